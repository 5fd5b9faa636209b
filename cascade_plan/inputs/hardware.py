"""Hardware profiles: datasheet peaks per GPU, one YAML each, with a source for every number."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.gpus import aliases
from cascade_plan.inputs import limits
from cascade_plan.inputs.ids import match_id, suggestion
from cascade_plan.inputs.yaml_source import check_reference, load_yaml, validation_error
from cascade_plan.resources import data_dir

NUMBER_FIELDS = ("hbm_bytes_per_s", "memory_bytes", "dense_bf16_flop_per_s", "dense_fp8_flop_per_s",
                 "l2_bytes", "sm_count")


# A finite number in a plausible range (msgspec rejects NaN; the upper bound rejects infinity). Written out, not
# built by a helper function, so a type checker reads them as the float aliases they are.
HbmBytesPerS = Annotated[float, msgspec.Meta(ge=limits.HBM_BYTES_PER_S[0], le=limits.HBM_BYTES_PER_S[1],
                                             description="HBM bandwidth, bytes/s")]
MemoryBytes = Annotated[float, msgspec.Meta(ge=limits.MEMORY_BYTES[0], le=limits.MEMORY_BYTES[1],
                                            description="GPU memory, bytes")]
FlopPerS = Annotated[float, msgspec.Meta(ge=limits.FLOP_PER_S[0], le=limits.FLOP_PER_S[1],
                                         description="dense tensor rate, FLOP/s")]
L2Bytes = Annotated[float, msgspec.Meta(ge=limits.L2_BYTES[0], le=limits.L2_BYTES[1], description="L2 cache, bytes")]


# An id is printed in tables, file names and JSON: short, one line, no path separators.
ProfileId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$",
                                        description="letters, digits, . _ + -; at most 64")]
OneLine = Annotated[str, msgspec.Meta(pattern=r"^[^\x00-\x1f\x7f]{0,200}$", description="one line, at most 200")]


class HardwareProfile(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    schema_version: Literal[1]
    id: ProfileId
    name: OneLine
    vendor: Literal["nvidia", "amd", "intel", "other"]
    hbm_bytes_per_s: HbmBytesPerS
    memory_bytes: MemoryBytes
    dense_bf16_flop_per_s: FlopPerS
    l2_bytes: L2Bytes
    sm_count: Annotated[int, msgspec.Meta(ge=limits.SM_COUNT[0], le=limits.SM_COUNT[1])]
    sources: dict[str, str]
    memory_kind: OneLine | None = None
    dense_fp8_flop_per_s: FlopPerS | None = None
    notes: str | None = None

    def to_dict(self) -> dict:
        return msgspec.structs.asdict(self)

    def flop_per_s(self, dtype: str) -> float:
        """Dense tensor rate for a GEMM in `dtype`. fp8 weights on a part without fp8 tensor cores
        are dequantised and run at the bf16 rate; int8/int4 weight-only formats likewise."""
        if dtype == "fp8" and self.dense_fp8_flop_per_s:
            return self.dense_fp8_flop_per_s
        return self.dense_bf16_flop_per_s


def builtin_hardware_ids() -> list[str]:
    return sorted(p.stem for p in data_dir("hardware_profiles").glob("*.yaml"))


def load_hardware_file(path: Path) -> HardwareProfile:
    doc = load_yaml(path, "hardware profile", max_bytes=limits.MAX_HARDWARE_BYTES)
    try:
        hw = msgspec.convert(doc.data, HardwareProfile)      # strict: "3.35e12" in quotes is text, not a number
    except msgspec.ValidationError as exc:
        raise validation_error(doc, exc) from None
    missing = [f for f in NUMBER_FIELDS if getattr(hw, f) is not None and f not in hw.sources]
    if missing:
        raise doc.error(("sources",), f"no source given for {', '.join(missing)}")
    return hw


# Short names people type for the common parts (ids match in any case).
ALIASES = aliases()        # alias -> profile id (cascade_plan/gpus.py: one entry per GPU)


def load_hardware(ref: str, base_dir: Path | None = None) -> HardwareProfile:
    """A built-in id (`h100-sxm`, any case, or an alias such as `h100`) or a path to a profile YAML
    (relative to base_dir when given)."""
    check_reference(ref, "hardware")
    if "/" not in ref and not ref.endswith((".yaml", ".yml")):
        ids = builtin_hardware_ids()
        found = match_id(ref, ids, ALIASES)
        if found:
            return load_hardware_file(data_dir("hardware_profiles") / f"{found}.yaml")
        raise InputError(f"unknown hardware {ref!r}{suggestion(ref, list(ids) + list(ALIASES))}: use one of "
                         f"{', '.join(ids)} (aliases: {', '.join(f'{a}={t}' for a, t in ALIASES.items())}) or a path "
                         "to a profile YAML")
    path = Path(ref)
    if base_dir is not None and not path.is_absolute() and not path.exists():
        path = base_dir / path
    return load_hardware_file(path)
