"""Every fact about a built-in GPU that is not a datasheet peak, one entry per GPU: the names users give it,
NVIDIA AIConfigurator's folder for it, its architecture (which decides vLLM's default attention backend and
FlashInfer's prefill path), its NVLink figure, and the CUDA device names the probe reports for it. The peaks
themselves, with their sources, are the GPU's profile (hardware_profiles/<id>.yaml); a new GPU is a profile
and an entry here. A leaf module: the planner and the probe (kernels_probe) both read it."""

from __future__ import annotations

from typing import NamedTuple

AMPERE, ADA, HOPPER, BLACKWELL, CDNA3 = "ampere", "ada", "hopper", "blackwell", "cdna3"


class Gpu(NamedTuple):
    id: str                                  # the profile's id (hardware_profiles/<id>.yaml)
    arch: str
    aliases: tuple[str, ...] = ()
    aic_system: str | None = None            # AIConfigurator's systems/ folder; None: it has no data for this GPU
    # NVLink bandwidth per GPU per direction (bytes/s) and its source; None where no figure is on file
    nvlink: tuple[float, str] | None = None
    # CUDA device names (torch.cuda.get_device_name, upper-cased, '-' as ' ') that are this GPU: each a tuple of
    # parts that must all appear in the name; hardware_id_for tries the GPUs in PROBE_ORDER
    device_names: tuple[tuple[str, ...], ...] = ()


_NVLINK4 = (450e9, "{} datasheet: NVLink 4, 900 GB/s per GPU (both directions), NVSwitch")

# Listed with the GPUs that have aliases first, in the order messages list the aliases.
GPUS: tuple[Gpu, ...] = (
    Gpu("h100-sxm", HOPPER, aliases=("h100", "h100-sxm5"), aic_system="h100_sxm",
        nvlink=(_NVLINK4[0], _NVLINK4[1].format("H100 SXM")), device_names=(("H100",),)),
    Gpu("a100-80gb", AMPERE, aliases=("a100", "a100-sxm"), aic_system="a100_sxm", device_names=(("A100", "SXM"),)),
    Gpu("rtx-4090", ADA, aliases=("4090",), device_names=(("RTX", "4090"),)),
    Gpu("mi300x", CDNA3, aliases=("mi300",), device_names=(("MI300X",),)),
    Gpu("gh200", HOPPER, aliases=("gh200-144gb",), device_names=(("GH200",),)),
    Gpu("a100-40gb", AMPERE, device_names=(("A100", "SXM", "40GB"),)),
    Gpu("b200", BLACKWELL, aic_system="b200_sxm", device_names=(("B200",),)),
    Gpu("b300", BLACKWELL, aic_system="b300_sxm", device_names=(("B300",),)),
    Gpu("gb200", BLACKWELL, aic_system="gb200", device_names=(("GB200",),)),
    Gpu("gb300", BLACKWELL, aic_system="gb300", device_names=(("GB300",),)),
    Gpu("h100-pcie", HOPPER, device_names=(("H100", "PCIE"),)),
    Gpu("h200", HOPPER, aic_system="h200_sxm", nvlink=(_NVLINK4[0], _NVLINK4[1].format("H200 SXM")),
        device_names=(("H200",),)),
    Gpu("l40s", ADA, aic_system="l40s", device_names=(("L40S",),)),
)
BY_ID: dict[str, Gpu] = {g.id: g for g in GPUS}

# The order device names are tried in: a name that holds another's words comes first (GH200 holds H200, GB200
# holds B200), and parts without a profile of their own map to none (an H100 NVL, an A100 PCIe: other bandwidth
# and power than the SXM parts the profiles describe).
NO_PROFILE: tuple[tuple[str, ...], ...] = (("H100", "NVL"), ("A100", "PCIE"))
PROBE_ORDER = ("gh200", "gb200", "gb300", "h100-pcie", "h100-sxm", "h200", "a100-40gb", "a100-80gb", "b200", "b300",
               "l40s", "rtx-4090", "mi300x")


def aliases() -> dict[str, str]:
    """Every alias and the profile id it names."""
    return {a: g.id for g in GPUS for a in g.aliases}


def ids_of(arch: str) -> tuple[str, ...]:
    return tuple(g.id for g in GPUS if g.arch == arch)


def hardware_id_for(device_name: str | None) -> str | None:
    """The profile id of a CUDA device name, as the probe reports it (None where no profile describes it)."""
    if not device_name:
        return None
    n = device_name.upper().replace("-", " ")
    if any(all(part in n for part in name) for name in NO_PROFILE):
        return None
    for gpu_id in PROBE_ORDER:
        if any(all(part in n for part in name) for name in BY_ID[gpu_id].device_names):
            return gpu_id
    return None
