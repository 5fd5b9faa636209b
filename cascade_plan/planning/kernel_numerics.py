"""How far the chosen kernels' outputs were from float32, as the probe measured them: the figure a reader wants
beside a cascade verdict, since vLLM turned cascade attention off by default over numerical concerns.

The probe checks every kernel against a float32 reference computed directly (no LSE merge) before timing it
(kernels_probe/runner.py): a row's `max_rel_err` is the largest ||out - ref|| / ||ref|| over its (sequence, query
head) rows. A kernel above the probe's tolerance (1e-2) is skipped, never timed, so every row in a file passed;
the figure says how far inside that it stayed. The part-kernels (prefix, suffix, merge) carry none: their outputs
are not final, and the whole cascade's row (`cascade_total`) is the one checked.

Which rows stand behind numbers (CostParams):

- a probe calibration: its backend's cascade_total rows and per-sequence decode rows (decode over shared pages
  and over private copies, whichever the workload runs: the larger) of that KV dtype, the kernels
  calibration/backends.py maps the backend to; an MLA model's from the file's `mla` rows;
- an AIConfigurator import: the cascade rows of the probe file its cascade kernels were transferred from, of
  the probe backend they came from (CostParams.margin_backend). Its per-sequence decode is AIConfigurator's
  own kernel, which nobody checked against float32 here: that figure is None;
- the defaults and the ideal bound: no kernel behind them, so no figure (kernel_numerics returns None).

A file without rows of that backend and KV dtype (torch has no fp8 KV rows) gives a KernelNumerics whose error
fields are None and rows 0, whose text says nothing was measured: the absence is worth saying beside a verdict.
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from cascade_plan.cost.cost_params import CostParams

PER_SEQUENCE_KERNELS = ("decode_shared", "decode_dup")


class KernelNumerics(msgspec.Struct, frozen=True):
    backend: str                              # the probe backend whose kernels were checked
    kv_dtype: str
    cascade_max_rel_err: float | None         # largest over the cascade_total rows; None: none measured
    per_sequence_max_rel_err: float | None    # largest over the per-sequence decode rows; None: none (or unchecked)
    rows: int                                 # cascade rows behind cascade_max_rel_err
    source: str                               # which file and GPU, in words

    @property
    def text(self) -> str:
        if self.cascade_max_rel_err is None and self.per_sequence_max_rel_err is None:
            return (f"measured error vs float32: none for {self.backend} with {self.kv_dtype} KV "
                    f"(no such rows; {self.source})")
        cascade = (f"max {_sci(self.cascade_max_rel_err)} relative over {self.rows} probed shapes"
                   if self.cascade_max_rel_err is not None else "not measured")
        decode = (_sci(self.per_sequence_max_rel_err) if self.per_sequence_max_rel_err is not None
                  else "not checked")
        return (f"measured error vs float32: cascade ({self.backend}, {self.kv_dtype} KV) {cascade}, "
                f"per-sequence decode {decode} ({self.source})")

    def to_json(self) -> dict:
        return {"backend": self.backend, "kv_dtype": self.kv_dtype, "cascade_max_rel_err": self.cascade_max_rel_err,
                "per_sequence_max_rel_err": self.per_sequence_max_rel_err, "rows": self.rows,
                "source": self.source, "text": self.text}


def _sci(x: float) -> str:
    """3.2e-3, not Python's 3.2e-03."""
    mantissa, exp = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exp)}"


def kernel_numerics(params: CostParams, kv_dtype: str) -> KernelNumerics | None:
    """The measured error against float32 of the kernels behind `params` at `kv_dtype` (see the module's
    docstring); None for the defaults, the ideal bound, or where the calibration file cannot be read."""
    if params.mode != "calibrated" or not params.source or not params.backend:
        return None
    aic = params.origin == "aic"
    path = _transferred_probe(Path(params.source)) if aic else Path(params.source)
    if path is None:
        return None
    mla = params.attention_kind == "mla"
    # MLA's cascade is FlashInfer's MLA wrapper under the planner's backend name; a GQA import's cascade may be
    # another probe backend's kernels (FlashInfer's FA2 prefill on a GPU without FA3)
    backend = params.backend if mla else (params.margin_backend or params.backend)
    found = _measured(str(path), backend, kv_dtype, mla)
    if found is None:
        return None
    cascade, rows, decode, gpu = found
    where = f"{gpu} probe, {path.name}" + (", MLA kernels" if mla else "")
    if aic:
        decode = None      # AIConfigurator's own decode kernel: timed there, never checked against float32
        where += (f"; cascade kernels transferred into {Path(params.source).name}, whose per-sequence decode is "
                  "AIConfigurator's")
    return KernelNumerics(backend=backend, kv_dtype=kv_dtype, cascade_max_rel_err=cascade,
                          per_sequence_max_rel_err=decode, rows=rows, source=where)


@functools.lru_cache(maxsize=32)
def _measured(path: str, backend: str, kv_dtype: str, mla: bool) -> tuple[float | None, int, float | None, str] | None:
    """(largest cascade error, cascade rows behind it, largest per-sequence decode error, the GPU in words) of one
    backend and KV dtype in a probe file; None where the file cannot be read."""
    from cascade_plan.calibration.backends import BACKENDS

    read = _rows(path, "mla" if mla else "measurements")
    if read is None:
        return None
    hardware_id, rows = read
    if mla:
        cascade_spec: tuple[str, str | None] = (backend, None)
        decode_spec: tuple[str, str | None] = (backend, None)
    elif backend in BACKENDS:
        spec = BACKENDS[backend]
        cascade_spec, decode_spec = spec.get("total", spec["prefix"]), spec["decode"]
    else:
        cascade_spec = decode_spec = (backend, None)

    def errs(kernels: tuple[str, ...], which: tuple[str, str | None]) -> list[float]:
        b, variant = which
        return [r.max_rel_err for r in rows if r.max_rel_err is not None and r.kernel in kernels and r.backend == b
                and (variant is None or r.variant == variant) and r.config.kv_dtype == kv_dtype]

    cascade, decode = errs(("cascade_total",), cascade_spec), errs(PER_SEQUENCE_KERNELS, decode_spec)
    gpu = hardware_id.upper() or "the"      # "the probe, FILE" where the file names no GPU
    return (max(cascade) if cascade else None), len(cascade), (max(decode) if decode else None), gpu


class _Config(msgspec.Struct, frozen=True):
    kv_dtype: str = "bf16"      # an MLA row's default (calibration_schema/mla.py: MlaConfig); a GQA row always names it


class _ErrorRow(msgspec.Struct, frozen=True):
    """A measured row read for its error alone: the typed rows (calibration_schema.attention.Measurement) leave
    it out."""

    backend: str
    kernel: str
    config: _Config
    variant: str | None = None
    max_rel_err: float | None = None


class _ErrorsDoc(msgspec.Struct, frozen=True):
    hardware_id: str | None = None
    measurements: list[_ErrorRow] = []
    mla: list[_ErrorRow] = []


@functools.lru_cache(maxsize=8)
def _rows(path: str, name: str) -> tuple[str, tuple[_ErrorRow, ...]] | None:
    """(hardware id, the rows of list `name` read for their errors) of a calibration file. A file this process
    decoded already (read_already: estimate's own numbers on the H200) is not parsed again: its row list, still
    JSON, is decoded to these few fields. A shipped file not read yet (an imported GPU's transferred probe) is read
    the shared way (read_shipped), so that the speedup margin read next takes its one field from that read; a
    user's file only these fields."""
    from cascade_plan.calibration.calibration_file import read_already, read_shipped
    from cascade_plan.resources import data_dir

    p = Path(path)
    try:
        doc = read_already(p)
        if doc is None and p.parent.resolve() == data_dir("calibrations").resolve():
            doc = read_shipped(p)
        if doc is None:
            whole = msgspec.json.decode(p.read_bytes(), type=_ErrorsDoc)
            return whole.hardware_id or "", tuple(getattr(whole, name))
        raw = doc.get(name)
        rows = ([] if raw is None else msgspec.json.decode(raw, type=list[_ErrorRow]) if isinstance(raw, msgspec.Raw)
                else msgspec.convert(raw, list[_ErrorRow]))    # ProbeData.doc decoded the list in place
        return str(doc.get("hardware_id") or ""), tuple(rows)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _transferred_probe(imported: Path) -> Path | None:
    """The probe file an AIConfigurator import's cascade kernels were transferred from (`source.transferred.from`,
    beside the import), the way planning/speedup_margin.py finds it; None where it names none or it is gone."""
    from cascade_plan.calibration.calibration_file import read_already
    from cascade_plan.calibration_schema.imported import Source, SourceOnlyDoc

    try:     # the document select_params read already, else only `source` decoded
        doc = read_already(imported)
        src = (msgspec.convert(doc.get("source"), Source | None) if doc is not None else
               msgspec.json.decode(imported.read_bytes(), type=SourceOnlyDoc).source)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    name = src.transferred.from_ if src is not None and src.transferred is not None else None
    if not name:
        return None
    p = imported.with_name(name)
    return p if p.exists() else None
