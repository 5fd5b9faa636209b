"""`import-aic`: write a calibration file from NVIDIA AIConfigurator's measured tables."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cascade_plan.cli.common import JsonOpt, print_json
from cascade_plan.envelope import envelope
from cascade_plan.errors import InputError
from cascade_plan.units import fmt_pct


class Framework(str, Enum):
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"


def _summary(doc: dict, path: Path, size: int) -> dict:
    fits = doc["fitted"]["kv_dtypes"]
    dec = {kv: next(iter(per.values()))["decode_dup"] for kv, per in fits.items()}
    return {
        "hardware": doc["hardware_id"], "file": str(path), "bytes": size, "label": doc["source"]["label"],
        "tables": doc["source"]["tables"], "transfer_ratios": doc["source"]["transferred"]["ratios"],
        "backends": sorted(next(iter(fits.values()))),
        "decode": {kv: {"bw_bytes_per_s": d["bw_bytes_per_s"], "overhead_s": d["overhead_s"],
                        "train_median_ape": d["train_median_ape"], "rows": d["n_train"]} for kv, d in dec.items()},
        "allreduce_gpus": sorted(int(n) for n in doc["fitted"]["step_parts"]["allreduce"]),
        "gemm_tables": sorted(doc["fitted"]["step_parts"]["gemm"]),
    }


def import_aic(
    gpus: Annotated[list[str], typer.Argument(help="Hardware profile ids (h100-sxm, a100-80gb, ...), or `all` for "
                                                   "every profile AIConfigurator covers.")],
    framework: Annotated[Framework, typer.Option("--framework",
                                                 help="Serving framework whose tables to use.")] = Framework.vllm,
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="File to write (one GPU), or a folder (several). Default: ./calibrations/GPU-aic-FRAMEWORK.json "
                      "in the current folder (never the installed package); use it with --calibration FILE.")] = None,
    aic_data: Annotated[Optional[Path], typer.Option(
        "--aic-data",
        help="AIConfigurator's systems/data folder (default: the installed aiconfigurator-core's).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Calibrate GPUs from NVIDIA AIConfigurator's measured kernel tables (needs the `aic` extra:
    pip install 'cascade-plan[aic]').

    Measured there: per-sequence decode attention (and MLA decode), GEMMs by (M, N, K) and dtype, MoE
    expert GEMMs, all-reduce by GPU count and message size. Not measured there, so transferred from the
    H200 probe and labelled in the file and in every output: the cascade prefix pass, suffix pass and
    merge, and the L2 gain of decode over shared pages. A GPU's own probe calibration, where shipped,
    stays preferred.

    Examples:

      cascade-plan import-aic h100-sxm

      cascade-plan import-aic all --framework sglang --out my-calibrations/

      cascade-plan estimate rl-rollouts-64 --hardware h100-sxm
    """
    from cascade_plan.atomic import write_text_atomic
    from cascade_plan.calibration.aic.importer import default_out, to_json_text
    from cascade_plan.calibration.aic.importer import import_aic as run_import
    from cascade_plan.calibration.aic.tables import AIC_SYSTEMS

    ids = sorted(AIC_SYSTEMS) if gpus == ["all"] else gpus
    if out is not None and len(ids) > 1 and out.suffix == ".json":
        raise InputError("--out: give a folder when importing several GPUs")
    if out is not None:                 # checked before any fitting: a bad path is reported at once
        from cascade_plan.outputs import check_output_dir, check_output_file

        check_output_file(out, "--out") if out.suffix == ".json" else check_output_dir(out, "--out")
    summaries = []
    from rich.console import Console

    console = Console(stderr=True)
    docs = []
    for hw_id in ids:          # every GPU fitted before anything is written: bad input writes nothing
        with console.status(f"fitting {hw_id} from AIConfigurator's {framework.value} tables"):
            docs.append(run_import(hw_id, framework.value, aic_data))
    for doc in docs:
        name = f"{doc['hardware_id']}-aic-{framework.value}.json"
        path = default_out(doc["hardware_id"], framework.value) if out is None else (
            out if out.suffix == ".json" else out / name)
        text = to_json_text(doc)
        write_text_atomic(path, text)
        summaries.append(_summary(doc, path, len(text.encode())))
    if json_out:
        print_json(envelope({"imported": summaries}))
        return
    _render(summaries)


def _render(summaries: list[dict]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Imported from AIConfigurator", title_justify="left", box=box.SIMPLE_HEAD,
              caption="decode: per-sequence decode attention fitted to the table (bandwidth, fixed cost, median error "
                      "on its rows); ratios: how the H200 probe's cascade kernels were scaled to this GPU "
                      "(bandwidth / FLOP / fixed costs)", caption_justify="left")
    for col in ("GPU", "decode TB/s", "decode fixed us", "fit error", "ratios bw/flop/fixed", "all-reduce GPUs",
                "file", "KiB"):
        t.add_column(col, no_wrap=col != "file", justify="left" if col in ("GPU", "file") else "right")
    for s in summaries:
        d = s["decode"]["bf16"]
        r = s["transfer_ratios"]
        t.add_row(s["hardware"], f"{d['bw_bytes_per_s'] / 1e12:.2f}", f"{d['overhead_s'] * 1e6:.1f}",
                  f"{d['train_median_ape']:.1%}", f"{r['bandwidth']:.2f}/{r['flop']:.2f}/{r['fixed']:.2f}",
                  ",".join(map(str, s["allreduce_gpus"])) or "-", s["file"], f"{s['bytes'] / 1024:.0f}")
    Console().print(t)
    for s in summaries:
        Console().print(f"{s['hardware']}: numbers {s['label']}")
        Console().print(f"wrote {s['file']} (use it with --calibration {s['file']})", soft_wrap=True)


def aic_check(
    gpus: Annotated[Optional[list[str]], typer.Argument(
        help="GPUs to check (default: a100-80gb h100-sxm h200 b200, the cross-check grid).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Batch 8 and 128, context 4K only (a few seconds).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """AIConfigurator's own per-op decode estimate beside the planner's, term by term (needs the `aic`
    extra: pip install 'cascade-plan[aic]').

    Grid: Llama-3.1-8B at TP 1 and 70B at TP 4 and 8, batch 1-256, prompt 1K-8K, one decode step after
    it, vLLM tables, each GPU's shipped imported calibration. Prints per term (attention, GEMMs, glue,
    all-reduce, whole step) the median and worst planner / AIConfigurator - 1, and the all-reduce per
    call at TP 4/8 and 16-256 sequences. AIConfigurator's glue is a formula, not measured: docs/aic.md
    explains every whole-step difference over 10% term by term.

    Examples:

      cascade-plan aic-check

      cascade-plan aic-check h100-sxm --quick --json
    """
    from cascade_plan.calibration.aic import estimates as est

    kw: dict[str, Any] = {"gpus": tuple(gpus) if gpus else est.GRID_GPUS}
    if quick:
        kw |= {"batches": (8, 128), "isls": (4096,)}
    res = est.crosscheck_grid(**kw)
    if json_out:
        print_json(res)
        return
    _render_check(res)


def _render_check(res: dict) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    s = res["summary"]
    n = len(res["rows"])
    t = Table(title=f"Planner vs AIConfigurator's own estimate, {n} configurations (planner / AIC - 1)",
              title_justify="left", box=box.SIMPLE_HEAD, caption="glue: AIConfigurator computes it by formula, the "
              "planner uses the H200 probe's measured glue (docs/aic.md)", caption_justify="left")
    for col in ("term", "configs", "median |diff|", "median", "min", "max", "> 10%"):
        t.add_column(col, justify="left" if col == "term" else "right")
    for term in ("attention", "gemm", "glue", "allreduce", "step"):
        if term in s:
            x = s[term]
            t.add_row(term, str(x["n"]), fmt_pct(x["median_abs"]), fmt_pct(x["median"], True), fmt_pct(x["min"], True),
                      fmt_pct(x["max"], True), str(x["over_10pct"]))
    Console().print(t)
    c = s.get("allreduce_per_call_tp4_8_batch16_256")
    if c:
        Console().print(f"all-reduce per call, TP 4/8, 16-256 sequences: {c['n']} configurations, median |diff| "
                        f"{fmt_pct(c['median_abs'])}, range {fmt_pct(c['min'], True)} to {fmt_pct(c['max'], True)}, "
                        f"{c['within_10pct']:.0%} within 10%")
