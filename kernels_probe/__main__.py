"""python -m kernels_probe --out FILE [--quick] [--backend NAME ...] [--page-size N]"""

from __future__ import annotations

import argparse
import pathlib
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels_probe", description=__doc__)
    ap.add_argument("--out", required=True, type=pathlib.Path, help="calibration JSON to write")
    ap.add_argument("--quick", action="store_true", help="a handful of points (under a minute)")
    ap.add_argument("--backend", action="append", dest="backends", default=None,
                    help="triton, torch, flashinfer (repeatable; default: all available)")
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--step", action="store_true",
                    help="also measure the rest of the decode step: GEMMs, glue, all-reduce, whole model steps")
    ap.add_argument("--no-attention", action="store_true", help="skip the attention grid (with --step)")
    ap.add_argument("--time-budget", type=float, default=None, help="seconds; later points are skipped past it")
    ap.add_argument("--grid", choices=("full", "coverage", "full+coverage"), default="full",
                    help="attention grid: the full grid, the coverage grid (fp8 on every backend, group sizes 1-16, "
                         "batches to 1024, 64K prefix), or both")
    ap.add_argument("--plan", type=pathlib.Path, default=None,
                    help="a workload probe plan (JSON of WorkloadProbePlan.describe(), as `cascade-plan probe "
                         "--workload` derives it): measure exactly that workload's shapes")
    ap.add_argument("--mla", action="store_true", help="also MLA rows (FlashInfer's MLA wrapper, DeepSeek-V3 shape)")
    ap.add_argument("--mla-grid", choices=("shipped", "tp"), default="shipped",
                    help="with --mla: the first run's 128-head grid, or query heads per GPU at TP 8/4/2/1 over "
                         "batch 1-1024, prefix 1K-32K, suffix 1-2048, bf16 and fp8 latent")
    ap.add_argument("--no-held-out", action="store_true", help="with --step: skip the held-out model steps")
    ap.add_argument("--merge-into", type=pathlib.Path, default=None,
                    help="an existing calibration file: write its rows plus this run's (re-measured points replaced)")
    args = ap.parse_args(argv)

    from kernels_probe.environment import missing_requirements

    missing = missing_requirements()
    if missing:
        for m in missing:
            print(f"error: {m}", file=sys.stderr)
        return 2
    from rich.console import Console

    from kernels_probe.report import summary_table
    from kernels_probe.runner import run_probe

    console = Console()
    plan = None
    if args.plan is not None:
        import json

        from kernels_probe.workload_probe import plan_from_json

        plan = plan_from_json(json.loads(args.plan.read_text()))
    doc = run_probe(args.out, quick=args.quick, backends=args.backends, page_size=args.page_size, console=console,
                    time_budget_s=args.time_budget, step=args.step,
                    attention=not args.no_attention, grid=args.grid, held_out=not args.no_held_out,
                    plan=plan, mla=args.mla and args.mla_grid)
    if args.merge_into is not None:
        doc = merge_into_file(args.out, args.merge_into, doc)
    console.print(summary_table(doc))
    console.print(f"wrote {args.out} ({len(doc['measurements'])} measurements, {len(doc['skipped'])} skipped)")
    return 0


def merge_into_file(out, base_path, doc: dict) -> dict:
    """Write base_path's rows plus doc's to out (atomically); returns the merged document."""
    import json

    from kernels_probe.calibration_file import write_atomic
    from kernels_probe.merge import merge_documents

    merged = merge_documents(doc, json.loads(pathlib.Path(base_path).read_text()))
    write_atomic(pathlib.Path(out), merged)
    return merged


if __name__ == "__main__":
    sys.exit(main())
