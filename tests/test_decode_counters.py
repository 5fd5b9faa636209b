"""benchmarks/decode_counters.py reads Nsight Compute's CSV as ncu writes it: its own messages before the header,
thousands separators in the values, one line per (kernel, metric), several kernels in one file."""

from __future__ import annotations

import math

from benchmark_support import load_benchmark

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _counters():
    return load_benchmark("decode_counters")


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


SASS_HEAD = ('"# Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
             '"Instructions Executed"')


def test_sass_stalls_group_by_opcode_across_predicates_and_modifiers(tmp_path):
    """ncu's source page as CSV: its messages, a kernel's name before each table, thousands separators, predicated
    instructions: samples sum per opcode (LDG.E.128 and @!P0 LDG.E count as LDG) and per kernel."""
    text = "\n".join([
        "==PROF== Connected to process 9", "paged_decode_kernel", SASS_HEAD,
        '"00007f00","@!P0 LDG.E.128 R4, [R2.64] ;","1,200","1,100","64"',
        '"00007f10","LDG.E R8, [R6.64] ;","300","250","64"',
        '"00007f20","HMMA.16816.F32.BF16 R12, R4, R8, R12 ;","400","100","128"',
        '"00007f30","BAR.SYNC.DEFER_BLOCKING 0x0 ;","100","100","32"',
        "merge_kernel", SASS_HEAD,
        '"00008000","FADD R1, R2, R3 ;","10","5","8"',
    ])
    path = tmp_path / "row-ours-sass.csv"
    path.write_text(text)
    dc = _counters()
    tables = dc.read_sass(path)
    assert [label for label, _ in tables] == ["paged_decode_kernel", "merge_kernel"]
    st = dc.sass_stalls(tables[0][1])
    assert st["total"] == 2000
    assert st["by_opcode"]["LDG"] == [1500.0, 1350.0]
    assert st["by_opcode"]["HMMA"] == [400.0, 100.0] and st["by_opcode"]["BAR"] == [100.0, 100.0]
    assert st["instructions"][0][1] == "00007f00"
    assert dc.opcode("@P1 BRA `(.L_x_3) ;") == "BRA" and dc.opcode("") == "?"


def test_sass_names_the_columns_when_the_samples_column_is_missing(tmp_path, capsys):
    path = tmp_path / "other.csv"
    path.write_text('"# Address","Source","Instructions Executed"\n"0","FADD R1, R2, R3 ;","8"\n')
    assert _counters().sass(str(path), 5) == 0
    assert "no 'Warp Stall Sampling (All Samples)' column" in capsys.readouterr().out
    empty = tmp_path / "empty.csv"
    empty.write_text("==PROF== nothing profiled\n")
    assert _counters().sass(str(empty), 5) == 2


def test_sass_tables_named_by_ncus_kernel_name_lines(tmp_path):
    """ncu 2025.3 (device-2026-12-07j/counters/*-sass.csv) writes '"Kernel Name","<name>",' before each kernel's
    table, quoted like a row of it: each starts a table of its own, named so, not a row of the table before."""
    head = '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"'
    text = "\n".join([
        '"Kernel Name","paged_decode_kernel",', head,
        '"0x7f00","      BAR.SYNC.DEFER_BLOCKING 0x0","485","445"',
        '"0x7f10","      HMMA.16816.F32.BF16 R152, R120, R32, R152","59","50"',
        '"Kernel Name","void flashinfer::PersistentVariableLengthMergeStatesKernel<8>",', head,
        '"0x8000","      STG.E.128 desc[UR14][R28.64], R8","43","28"',
    ])
    path = tmp_path / "row-fi-sass.csv"
    path.write_text(text)
    tables = _counters().read_sass(path)
    assert [(label, len(rows)) for label, rows in tables] == [
        ("paged_decode_kernel", 2), ("void flashinfer::PersistentVariableLengthMergeStatesKernel<8>", 1)]
    st = _counters().sass_stalls(tables[0][1])
    assert st["total"] == 544 and st["by_opcode"]["BAR"] == [485.0, 445.0]
    assert st["instructions"][0][1] == "0x7f00"
