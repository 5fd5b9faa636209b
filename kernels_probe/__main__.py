"""python -m kernels_probe --out FILE [--quick] [--backend NAME ...] [--page-size N]"""

from __future__ import annotations

import pathlib
import sys


def main(argv: list[str] | None = None) -> int:
    from kernels_probe.options import build_parser, check_choices

    ap = build_parser(__doc__)
    args = ap.parse_args(argv)
    bad = check_choices(args.backend, args.grid)
    if bad:
        ap.error(bad)
    if args.only_missing and args.merge_into is None:
        ap.error("--only-missing needs --merge-into FILE")

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

        from kernels_probe.steps.workload_probe import plan_from_json

        plan = plan_from_json(json.loads(args.plan.read_text()))
    owed = owed_by_backend(args) if args.only_missing else None
    doc = run_probe(args.out, quick=args.quick, backends=args.backend, page_size=args.page_size, console=console,
                    time_budget_s=args.time_budget, step=args.step, owed=owed,
                    attention=not args.no_attention, grid=args.grid, held_out=not args.no_held_out,
                    plan=plan, mla=args.mla and args.mla_grid, step_set=args.step_set)
    if args.merge_into is not None:
        doc = merge_into_file(args.out, args.merge_into, doc, keep_base_header=args.only_missing)
    console.print(summary_table(doc))
    console.print(f"wrote {args.out} ({len(doc['measurements'])} measurements, {len(doc['skipped'])} skipped)")
    return 0


def owed_by_backend(args) -> dict:
    """Per --backend, the --grid's configurations it has no row of in the --merge-into file."""
    import json

    from kernels_probe.attention.grid import BACKEND_MODULES, named_grid, owed_configs

    cfgs, _ = named_grid(args.grid, quick=args.quick, page_size=args.page_size)
    base = json.loads(pathlib.Path(args.merge_into).read_text())
    return owed_configs(cfgs, list(args.backend or BACKEND_MODULES), base.get("measurements", []))


def merge_into_file(out, base_path, doc: dict, keep_base_header: bool = False) -> dict:
    """Write base_path's rows plus doc's to out (atomically); returns the merged document. `keep_base_header`: the
    base's probe version, ceilings and notes stay (a run that only completes it: --only-missing)."""
    import json

    from kernels_probe.calibration_file import write_atomic
    from kernels_probe.merge import merge_documents

    merged = merge_documents(doc, json.loads(pathlib.Path(base_path).read_text()), keep_base_header=keep_base_header)
    write_atomic(pathlib.Path(out), merged)
    return merged


if __name__ == "__main__":
    sys.exit(main())
