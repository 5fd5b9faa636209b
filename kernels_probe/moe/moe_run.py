"""``python -m kernels_probe.moe.moe_run --out FILE``: the MoE expert-GEMM probe on one CUDA GPU
(kernels_probe/moe/moe_probe.py measures; this writes the rows and prints a table). The file holds
``step_ops`` rows of op ``moe_grouped_gemm`` that benchmarks/merge_moe_rows.py merges into a calibration.
"""

from __future__ import annotations

import time

import torch
import triton

from kernels_probe.moe.moe_probe import measure_moe


def _table(rows: list[dict]) -> str:
    """Per shape, dtype, routing, backend: gate_up + down microseconds at a few M."""
    show = (1, 16, 128, 1024)
    key: dict[tuple, dict[int, dict[str, float]]] = {}
    for r in rows:
        c = r["config"]
        key.setdefault((c["model"], c["tp"], c["dtype"], c["routing"], c["backend"]), {}).setdefault(c["m"], {})[
            c["proj"]] = r["median_s"]
    lines = [f"{'shape':<18}{'dtype':<6}{'routing':<10}{'backend':<12}" + "".join(f"{'M=' + str(m):>10}" for m in show)
             + "   (gate_up + down, us per layer)"]
    for (model, tp, dt, rt, be), by_m in sorted(key.items()):
        cells = []
        for m in show:
            d = by_m.get(m, {})
            cells.append(f"{(d['gate_up'] + d['down']) * 1e6:10.1f}" if len(d) == 2 else f"{'-':>10}")
        lines.append(f"{model + ' tp' + str(tp):<18}{dt:<6}{rt:<10}{be:<12}" + "".join(cells))
    return "\n".join(lines)


def run(out_path, shapes, device, flusher, *, m_grid, dtypes, backends, deadline_s, t_start, time_fn=None) -> dict:
    """Measure, write out_path (after each shape and projection, atomically), print the table; the document."""
    import json
    import os

    name = torch.cuda.get_device_properties(device).name if device.type == "cuda" else "cpu"
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 0
    print(f"moe_probe: {name}, torch {torch.__version__}, triton {triton.__version__}; "
          f"{len(shapes)} shapes, dtypes {dtypes}, backends {backends}", flush=True)
    head = {"kind": "moe_probe_rows", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": {"name": name, "sm_count": sms, "torch": torch.__version__,
                       "triton": triton.__version__, "cuda": torch.version.cuda},
            "shapes": [s.as_dict() for s in shapes]}
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def write(rows, skipped, complete=False):
        doc = {**head, "complete": complete, "step_ops": rows, "skipped": skipped,
               "elapsed_s": time.perf_counter() - t_start}
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, out_path)
        return doc

    rows, skipped = measure_moe(flusher, device, shapes, m_grid=m_grid, dtypes=dtypes, backends=backends,
                                deadline_s=deadline_s, log=lambda s: print(s, flush=True), checkpoint=write,
                                time_fn=time_fn)
    out = write(rows, skipped, complete=True)
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s["reason"][:60]] = reasons.get(s["reason"][:60], 0) + 1
    print(f"\n{len(rows)} rows, {len(skipped)} skipped {reasons}, {out['elapsed_s']:.0f} s; wrote {out_path}")
    print(_table(rows))
    return out


def main(argv=None) -> int:
    from kernels_probe.moe.moe_shapes import (
        MOE_M_GRID,
        MOE_M_GRID_QUICK,
        MOE_PROBE_MODELS,
        MOE_PROBE_MODELS_QUICK,
        moe_shape,
    )
    from kernels_probe.options import command_parser

    ap = command_parser("kernels_probe.moe.moe_run", __doc__, budget_s=150.0)
    ap.add_argument("--model", action="append", metavar="ID:TP", help="e.g. deepseek-v3:8 (repeatable)")
    ap.add_argument("--backend", action="append", choices=("triton", "grouped_mm", "loop"))
    from kernels_probe.timing import start_command

    started = start_command(ap, argv, "moe_probe")
    if started is None:
        return 2
    args, t_start, device, _, flusher = started
    from kernels_probe.steps.step_probe import has_fp8

    models = ([(s.split(":")[0], int(s.split(":")[1])) for s in args.model] if args.model
              else list(MOE_PROBE_MODELS_QUICK if args.quick else MOE_PROBE_MODELS))
    shapes = [moe_shape(m, tp) for m, tp in models]
    dtypes = ["bf16"] + (["fp8"] if has_fp8(device) else [])
    backends = args.backend or ["triton", "grouped_mm", "loop"]
    run(args.out, shapes, device, flusher, m_grid=MOE_M_GRID_QUICK if args.quick else MOE_M_GRID, dtypes=dtypes,
        backends=backends, deadline_s=t_start + args.budget_s, t_start=t_start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
