"""One entry per GPU (cascade_plan/gpus.py): every entry has a profile and every profile an entry, the aliases and
the device names the probe reports resolve to profiles that exist, and the tables derived from the registry hold
what the planner used before it had one."""

import pytest

from cascade_plan.calibration.aic.tables import AIC_SYSTEMS
from cascade_plan.calibration.aic.transfer import FA3_GPUS
from cascade_plan.calibration.step_fit import NVLINK_BASIS
from cascade_plan.engine.attention_backend import BLACKWELL_IDS
from cascade_plan.gpus import BY_ID, GPUS, PROBE_ORDER, hardware_id_for
from cascade_plan.inputs.hardware import ALIASES, builtin_hardware_ids, load_hardware


def test_every_gpu_has_a_profile_and_every_profile_an_entry():
    assert sorted(BY_ID) == builtin_hardware_ids() and len(BY_ID) == len(GPUS)
    assert sorted(PROBE_ORDER) == sorted(BY_ID)


def test_aliases_resolve_to_their_profiles():
    for alias, gpu_id in ALIASES.items():
        assert load_hardware(alias).id == gpu_id


@pytest.mark.parametrize("device,gpu_id", [
    ("NVIDIA H200", "h200"), ("NVIDIA H200 NVL", "h200"), ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", None),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A100 80GB PCIe", None),
    ("NVIDIA A100-PCIE-40GB", None), ("NVIDIA B200", "b200"), ("NVIDIA B300 SXM6 AC", "b300"),
    ("NVIDIA GB200", "gb200"), ("NVIDIA GB300", "gb300"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("AMD Instinct MI300X", "mi300x"),
    ("NVIDIA RTX 6000 Ada Generation", None),
    ("", None), (None, None),
])
def test_the_probe_files_a_device_under_a_profile_that_exists(device, gpu_id):
    # before the registry an H100 NVL was filed as 'h100-nvl', an A100 PCIe as 'a100-pcie' (neither a profile, so
    # calibrate refused the file), an A100-40GB SXM as the 80 GB part and a GH200 as an H200
    found = hardware_id_for(device)
    assert found == gpu_id
    if found is not None:
        assert load_hardware(found).id == found


def test_the_derived_tables_hold_what_they_held():
    assert AIC_SYSTEMS == {"a100-80gb": "a100_sxm", "h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm",
                           "b300": "b300_sxm", "gb200": "gb200", "gb300": "gb300", "l40s": "l40s"}
    assert FA3_GPUS == frozenset({"h100-sxm", "h100-pcie", "h200", "gh200"})
    assert set(BLACKWELL_IDS) == {"b200", "b300", "gb200", "gb300"}
    assert NVLINK_BASIS == {
        "h200": (450e9, "H200 SXM datasheet: NVLink 4, 900 GB/s per GPU (both directions), NVSwitch"),
        "h100-sxm": (450e9, "H100 SXM datasheet: NVLink 4, 900 GB/s per GPU (both directions), NVSwitch")}
    assert ALIASES == {"h100": "h100-sxm", "h100-sxm5": "h100-sxm", "a100": "a100-80gb", "a100-sxm": "a100-80gb",
                       "4090": "rtx-4090", "mi300": "mi300x", "gh200-144gb": "gh200"}
    assert list(ALIASES) == ["h100", "h100-sxm5", "a100", "a100-sxm", "4090", "mi300", "gh200-144gb"]
