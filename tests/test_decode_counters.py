"""benchmarks/decode_counters.py reads Nsight Compute's CSV as ncu writes it: its own messages before the header,
thousands separators in the values, one line per (kernel, metric), several kernels in one file."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _counters():
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("decode_counters")
    finally:
        sys.path[:] = saved


def _line(kid: str, kernel: str, metric: str, value: str) -> str:
    launch = '"1","7","(64, 1, 1)","(2048, 1, 1)","0","9.0"'
    return f'"{kid}","9","python3","h","{kernel}",{launch},"s","{metric}","","{value}"'


def test_two_kernels_with_messages_before_the_header(tmp_path):
    stall = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
    text = "\n".join([
        "==PROF== Connected to process 9", HEAD,
        _line("0", "_decode", "gpu__time_duration.sum", "1,443,776"),
        _line("0", "_decode", "dram__bytes_read.sum", "2,700,000,000"),
        _line("0", "_decode", "lts__t_sectors_srcunit_tex_op_read.sum", "100,000,000"),
        _line("0", "_decode", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "25,000,000"),
        _line("0", "_decode", stall, "3.5"),
        _line("0", "_decode", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "0.25"),
        _line("1", "_merge", "gpu__time_duration.sum", "12,000"),
        _line("1", "_merge", "launch__registers_per_thread", "n/a"),
        "==PROF== Disconnected from process 9",
    ])
    path = tmp_path / "row-ours.csv"
    path.write_text(text)
    dc = _counters()
    kernels = dc.read_csv(path)
    assert [k["kernel"] for k in kernels] == ["_decode", "_merge"]
    f = dc.kernel_figures(kernels[0])
    assert f["time_us"] == 1443.776
    assert f["dram_read_mb"] == 2700.0
    assert f["l2_read_mb"] == 3200.0        # sectors of 32 bytes
    assert f["l2_hit_pct"] == 25.0
    assert list(f["stalls"]) == ["long_scoreboard", "barrier"]     # largest first
    g = dc.kernel_figures(kernels[1])
    assert g["time_us"] == 12.0
    assert math.isnan(g["regs"]) and math.isnan(g["l2_hit_pct"])   # not reported: NaN, no crash


def test_a_file_without_a_header_holds_no_kernel(tmp_path):
    path = tmp_path / "row-fi.csv"
    path.write_text("==ERROR== the profiler could not be initialised\n")
    assert _counters().read_csv(path) == []


def test_rows_are_named_once_and_name_both_page_layouts_of_the_row_lost_in_the_default_grid():
    names = [n for n, _, _ in _counters().rows()]
    assert len(names) == len(set(names))
    assert {"256x8-shared", "256x8-private"} <= set(names)
