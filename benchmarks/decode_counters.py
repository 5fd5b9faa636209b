"""Hardware counters of our per-sequence decode and FlashInfer's on the rows ours still loses (development tool; GPU).

    python benchmarks/decode_counters.py list [ROW ...]            # the rows (those named, else all), one per line
    ncu --profile-from-start off ... python benchmarks/decode_counters.py run ROW BACKEND   # one profiled decode
    python benchmarks/decode_counters.py summary DIR               # the table, from DIR/<row>-<backend>.csv
    python benchmarks/decode_counters.py sass FILE [--top N]       # where the warps stall, per SASS instruction
                                                                   # and opcode (ncu -i REP --page source --csv)

Timings say where ours loses; they cannot say why. Under Nsight Compute each decode runs once between
cudaProfilerStart and cudaProfilerStop, after a checked warm-up run, so the counters are of exactly the launch the
timing stages time (the default tune, and it in lanes: decode_lanes; FlashInfer's tensor-core decode, the faster of
its two on every row here). The
run script's `counters` stage drives it (one process per row and backend: ncu cannot tell rows of one process
apart without markers) and prints the summary: DRAM bytes, L2 read hit rate, instructions, achieved occupancy and
the largest warp-stall reasons, ours beside FlashInfer's.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import sys
from pathlib import Path

sys.path.insert(0, ".")

TOL = 1e-2
BACKENDS = ("ours", "lanes", "fi")     # lanes: ours with decode_lanes on
# the metrics the summary reads besides ncu's sections; stalls as warps per issued instruction, by reason
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "smsp__inst_executed.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__cycles_active.avg",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "launch__registers_per_thread",
           "launch__grid_size", "launch__block_size", "launch__occupancy_limit_registers",
           "launch__occupancy_limit_shared_mem", "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio")


def rows():
    """(name, config, page layout): the rows below 1.0 under probe 1.20.0 (docs/probe-notes.md, "Where the remaining
    rows stand against DRAM"), each losing one beside its other page layout where ours wins (same launch rule)."""
    from kernels_probe.attention.grid import AttentionConfig as A

    big = A(prefix_tokens=1024, group_size=256, suffix_tokens=4096)
    d256 = A(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=1024, q_per_kv=2, num_kv_heads=4,
             head_dim=256)
    gemma = A(prefix_tokens=1024, group_size=32, n_groups=4, suffix_tokens=2048, q_per_kv=2, num_kv_heads=8,
              head_dim=256)
    fp8 = A(prefix_tokens=4096, group_size=64, q_per_kv=2, num_kv_heads=4, head_dim=256, kv_dtype="fp8")
    g5 = A(prefix_tokens=4096, group_size=8, q_per_kv=5, num_kv_heads=8)
    return [("256x8-shared", big, "shared_table"), ("256x8-private", big, "dup_table"),
            ("d256-16x64-shared", d256, "shared_table"), ("d256-16x64-private", d256, "dup_table"),
            ("d256-32x4-shared", gemma, "shared_table"), ("d256-32x4-private", gemma, "dup_table"),
            ("d256-fp8-private", fp8, "dup_table"), ("g5-8x8-shared", g5, "shared_table")]


def run(name: str, backend: str) -> int:
    """Build the row, check the decode against float32, run it once more between the profiler's start and stop."""
    import torch

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.timed import poisoned_run
    from kernels_probe.attention.triton_backend import shared_launch_tokens
    from kernels_probe.attention.triton_plans import DecodePlan

    (cfg, layout), = [(c, t) for n, c, t in rows() if n == name]
    d = build_data(cfg, "cuda")
    ref = reference_output(d)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    if backend in ("ours", "lanes"):
        out = torch.empty_like(d.q)
        tune = dataclasses.replace(DEFAULT_TUNE, decode_lanes=backend == "lanes")
        shared = shared_launch_tokens(cfg, tune) if layout == "shared_table" else 0
        fn = DecodePlan(d.q, d.k_cache, d.v_cache, getattr(d, layout), d.seq_lens,
                        cfg.prefix_tokens + cfg.suffix_tokens, out, sm_count=sm, tune=tune,
                        shared_prefix_tokens=shared)
    else:
        fn = flashinfer_backend.FlashInferDecode(d, shared=layout == "shared_table", tensor_cores=True)
        out = fn.out
    for _ in range(3):
        poisoned_run(out, fn)()
    torch.cuda.synchronize()
    if isinstance(fn, DecodePlan):     # its record reads what the run did (the blocks that formed)
        print(name, "launch", fn.launch_record(), file=sys.stderr)
    err = max_rel_err(out, ref)
    if not err < TOL:
        print("WRONG", name, backend, err, file=sys.stderr)
        return 1
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


def read_csv(path: Path) -> list[dict]:
    """ncu --csv --page details: one line per (kernel, metric); returns per kernel {metric name: value}, with the
    kernel's name under "kernel". ncu's own messages (==PROF== ..., before and after the table) are skipped."""
    text = [line for line in path.read_text(errors="replace").splitlines() if line.startswith('"')]
    if not text or not text[0].startswith('"ID"'):
        return []
    kernels: dict[str, dict] = {}
    for rec in csv.DictReader(text):
        k = kernels.setdefault(rec["ID"], {"kernel": rec["Kernel Name"]})
        k[rec["Metric Name"]] = (rec["Metric Value"] or "").replace(",", "")
    return list(kernels.values())


def _num(k: dict, *names: str) -> float:
    for n in names:
        try:
            return float(k[n])
        except (KeyError, ValueError):
            continue
    return float("nan")


def kernel_figures(k: dict) -> dict:
    """The summary's figures of one kernel (SI units; NaN where ncu did not report one)."""
    reads = _num(k, "lts__t_sectors_srcunit_tex_op_read.sum")
    hits = _num(k, "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")
    stalls = {n.removeprefix("smsp__average_warps_issue_stalled_").removesuffix("_per_issue_active.ratio"): _num(k, n)
              for n in k if n.startswith("smsp__average_warps_issue_stalled_")}
    return {"kernel": k["kernel"][:40], "time_us": _num(k, "gpu__time_duration.sum") / 1e3,
            "dram_read_mb": _num(k, "dram__bytes_read.sum") / 1e6, "l2_read_mb": reads * 32 / 1e6,
            "l2_hit_pct": 100 * hits / reads if reads else float("nan"),
            "inst_m": _num(k, "smsp__inst_executed.sum") / 1e6,
            "occupancy_pct": _num(k, "sm__warps_active.avg.pct_of_peak_sustained_active"),
            "regs": _num(k, "launch__registers_per_thread"), "grid": _num(k, "launch__grid_size"),
            "block": _num(k, "launch__block_size"),
            "smem_conflicts_k": _num(k, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum") / 1e3,
            "stalls": dict(sorted(stalls.items(), key=lambda kv: -kv[1] if kv[1] == kv[1] else 0)[:4])}


def summary(folder: str) -> int:
    """One line per kernel of each profiled decode, rows in rows()' order, ours before FlashInfer's."""
    print(f"{'row':20} {'who':4} {'kernel':28} {'us':>8} {'DRAM MB':>8} {'L2 MB':>8} {'hit%':>5} {'inst M':>7} "
          f"{'occ%':>5} {'regs':>4} {'grid':>6} {'blk':>4} {'conf k':>7}  stalls (warps/issue)")
    for name, _, _ in rows():
        for backend in BACKENDS:
            path = Path(folder) / f"{name}-{backend}.csv"
            if not path.exists():
                continue
            for k in read_csv(path):
                f = kernel_figures(k)
                st = " ".join(f"{s}={v:.2f}" for s, v in f["stalls"].items())
                print(f"{name:20} {backend:4} {f['kernel']:28.28} {f['time_us']:8.1f} {f['dram_read_mb']:8.1f} "
                      f"{f['l2_read_mb']:8.1f} {f['l2_hit_pct']:5.1f} {f['inst_m']:7.2f} {f['occupancy_pct']:5.1f} "
                      f"{f['regs']:4.0f} {f['grid']:6.0f} {f['block']:4.0f} {f['smem_conflicts_k']:7.1f}  {st}")
    return 0


# the source page's column of warp-state samples (PC sampling) per SASS instruction, and its issued-or-not split
SAMPLES = "Warp Stall Sampling (All Samples)"
NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"


def read_sass(path: Path) -> list[tuple[str, list[dict]]]:
    """ncu --import REP --page source --csv --print-source sass: per kernel (a table each, its header repeated),
    its rows as {column: value} (a .gz file read unzipped). A "Kernel Name" line (ncu 2025.3 writes one before each
    kernel's table) or a line outside the tables (ncu's messages, a kernel's name) names the next table."""
    tables: list[tuple[str, list[dict]]] = []
    label, header = "", None
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode(errors="replace")
    for line in text.splitlines():
        if not line.startswith('"'):
            label = line.strip() or label
            header = None
            continue
        fields = next(csv.reader([line]))
        if fields[0] == "Kernel Name":
            label, header = (fields[1:2] or [""])[0], None
            continue
        if header is None or fields == header:
            if "Source" in fields:
                header = fields
                tables.append((label, []))
            continue
        tables[-1][1].append(dict(zip(header, fields)))
    return tables


def opcode(sass: str) -> str:
    """A SASS line's opcode without its predicate or modifiers: "@!P0 LDG.E.128 R4, [R2.64]" -> "LDG"."""
    words = [w for w in sass.split() if not w.startswith("@")]
    return words[0].split(".")[0].rstrip(";") if words else "?"


def sass_stalls(rows: list[dict]) -> dict:
    """Stall samples of one kernel: total, by opcode (all and not-issued samples) and per instruction."""
    def num(r: dict, col: str) -> float:
        try:
            return float((r.get(col) or "0").replace(",", ""))
        except ValueError:
            return 0.0
    by_op: dict[str, list[float]] = {}
    per_inst = []
    for r in rows:
        all_s, not_issued = num(r, SAMPLES), num(r, NOT_ISSUED)
        op = opcode(r.get("Source", ""))
        acc = by_op.setdefault(op, [0.0, 0.0])
        acc[0] += all_s
        acc[1] += not_issued
        per_inst.append((all_s, r.get("# Address") or r.get("Address") or "", r.get("Source", "").strip()))
    return {"total": sum(v[0] for v in by_op.values()), "by_opcode": by_op,
            "instructions": sorted(per_inst, key=lambda x: -x[0])}


def sass(path: str, top: int) -> int:
    """Per kernel in the file: its stall samples by opcode and its `top` most sampled instructions."""
    tables = read_sass(Path(path))
    if not tables:
        print(f"{path}: no source-page table (ncu -i REP --page source --csv --print-source sass writes one)",
              file=sys.stderr)
        return 2
    for label, rows in tables:
        if rows and SAMPLES not in rows[0]:
            print(f"{label or path}: no {SAMPLES!r} column; columns: {list(rows[0])}")
            continue
        st = sass_stalls(rows)
        total = st["total"] or float("nan")
        print(f"\n{path}: {label[:100] or '(no kernel name)'}: {len(rows)} instructions, {st['total']:.0f} samples")
        print(f"  {'opcode':10} {'samples %':>9} {'not issued %':>12}")
        for op, (a, n) in sorted(st["by_opcode"].items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"  {op:10} {100 * a / total:9.1f} {100 * n / total:12.1f}")
        print(f"  the {top} most sampled instructions:")
        for a, addr, text in st["instructions"][:top]:
            print(f"  {100 * a / total:5.1f}%  {addr:>8}  {text[:90]}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("only", nargs="*", help="these rows only (their names)")
    sub.add_parser("metrics")
    r = sub.add_parser("run")
    r.add_argument("row")
    r.add_argument("backend", choices=BACKENDS)
    s = sub.add_parser("summary")
    s.add_argument("folder")
    sa = sub.add_parser("sass")
    sa.add_argument("file")
    sa.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    if args.cmd == "list":
        names = [n for n, _, _ in rows()]
        unknown = set(args.only) - set(names)
        if unknown:
            print(f"unknown rows: {sorted(unknown)}; rows: {names}", file=sys.stderr)
            return 2
        print("\n".join(n for n in names if not args.only or n in args.only))
        return 0
    if args.cmd == "metrics":
        print(",".join(METRICS))
        return 0
    if args.cmd == "run":
        return run(args.row, args.backend)
    if args.cmd == "sass":
        return sass(args.file, args.top)
    return summary(args.folder)


if __name__ == "__main__":
    raise SystemExit(main())
