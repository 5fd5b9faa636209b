"""Serving-side commands: route (sharing across replicas) and rl (generation time per RL step)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cascade_plan.cli.common import HardwareOpt, JsonOpt, print_json
from cascade_plan.cli.model_options import ModelArg, WorkloadOpt, scenario_and_params
from cascade_plan.cli.option_bundles import Deployment, calibration_options, deployment_options
from cascade_plan.envelope import envelope
from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.choices import ParamsChoice
from cascade_plan.render.console import make_console
from cascade_plan.units import fmt_seconds, fmt_speedup

# requests per point of the --plot sweep (7 replica counts x 4 policies): enough for co-residency at up to
# 64 replicas (~400 requests each), and the whole sweep within a second or two
SWEEP_REQUESTS = 25_000

SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=limits.MAX_SEED, help="Random seed.")]


@calibration_options
@deployment_options
def route(
    model: ModelArg = None,
    hardware: HardwareOpt = None,
    workload: WorkloadOpt = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=limits.MAX_REPLICAS,
                                          help="Engine replicas (data-parallel).")] = 8,
    samples: Annotated[Optional[int], typer.Option("--samples", min=1, max=limits.MAX_SAMPLES,
                                                   help="Requests per prompt (siblings); "
                                                   "default 16.")] = None,
    prefix: Annotated[Optional[int], typer.Option("--prefix", min=0, max=limits.MAX_TOKENS,
                                                  help="Shared prompt tokens per group; "
                                                  "default 4096.")] = None,
    output_tokens: Annotated[Optional[int], typer.Option("--output-tokens", min=1, max=limits.MAX_OUTPUT_TOKENS,
                                                         help="Tokens each request decodes "
                                                         "(mean); default 1024.")] = None,
    private_tokens: Annotated[Optional[int], typer.Option("--private-tokens", min=0, max=limits.MAX_TOKENS,
                                                          help="Prompt tokens of each "
                                                          "request's own; default 0.")] = None,
    log: Annotated[Optional[list[str]], typer.Option("--log", help="Take the request mix (prefix, siblings, output, "
                                                     "private tokens) from batch logs: the workload that best "
                                                     "summarises them (see analyze). Repeat for several "
                                                     "files.")] = None,
    output_cv: Annotated[float, typer.Option("--output-cv", min=0, max=limits.MAX_SPREAD,
                                             help="Spread of decode lengths (coefficient of "
                                             "variation, lognormal); 0 = all equal.")] = 0.5,
    batch: Annotated[Optional[int], typer.Option("--batch", min=1, max=limits.MAX_SAMPLES,
                                                 help="Running sequences per replica (default 64).")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", min=0, max=1e15,
                                                  help="Instead of --batch: requests per second "
                                                  "over the fleet (batch from Little's law and the step "
                                                  "time).")] = None,
    sibling_spread: Annotated[float, typer.Option("--sibling-spread", min=0, max=limits.MAX_SPREAD,
                                                  help="Siblings arrive spread over this "
                                                  "fraction of one decode (0: together).")] = 0.0,
    forks_together: Annotated[bool, typer.Option("--forks-together",
                                                 help="Route each group as one n>1 request.")] = False,
    requests: Annotated[int, typer.Option("--requests", min=1, max=limits.MAX_ROUTE_REQUESTS,
                                        help="Requests simulated.")] = 1_000_000,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write speedup vs replica count per policy (PNG + SVG) "
                                                 "into this folder.")] = None,
    seed: SeedOpt = 0,
    deployment: Deployment = Deployment(),
    choice: ParamsChoice = ParamsChoice(),
    json_out: JsonOpt = False,
) -> None:
    """How many siblings land on the same replica under random, round-robin, least-loaded and
    prefix-aware (consistent hashing) routing, and what that leaves of cascade's speedup and of
    each replica's KV capacity.

    Examples:

      cascade-plan route --model llama-3-8b --hardware h200 --replicas 8 --samples 16 --prefix 4096 --plot out/

      cascade-plan route --model llama-3-8b --replicas 8 --samples 16 --forks-together --json
    """
    from cascade_plan.outputs import check_output_dir
    from cascade_plan.serving.route_costs import Mix, batch_for_rate, simulate, sweep_replicas

    if plot is not None:
        check_output_dir(plot, "--plot")
    scn, params = scenario_and_params(workload, model, hardware, deployment, choice)
    if batch is not None and rate is not None:
        raise InputError("give --batch or --rate, not both")
    given = {"--samples": samples, "--prefix": prefix, "--output-tokens": output_tokens,
             "--private-tokens": private_tokens}
    if log:
        from cascade_plan.serving.route_costs import mix_from_log

        clash = [k for k, v in given.items() if v is not None]
        if clash:
            raise InputError(f"--log sets the request mix: leave out {', '.join(clash)}")
        mix = mix_from_log(log, output_cv, sibling_spread)
    else:
        mix = Mix(prefix_tokens=4096 if prefix is None else prefix, samples=samples or 16,
                  output_tokens=output_tokens or 1024, private_tokens=private_tokens or 0, output_cv=output_cv,
                  sibling_spread=sibling_spread)
    samples, prefix = mix.samples, mix.prefix_tokens
    b = batch_for_rate(scn, params, mix, rate, replicas) if rate is not None else (batch or 64)
    _, outs = simulate(scn, params, mix, replicas, b, requests, forks_together=forks_together, seed=seed)
    written = []
    counts = [r for r in (1, 2, 4, 8, 16, 32, 64) if r <= max(64, replicas)]
    if plot:
        from cascade_plan.render.serving_plots import plot_route_sweep

        sweep = sweep_replicas(scn, params, mix, counts, b, min(requests, SWEEP_REQUESTS), forks_together, seed)
        title = (f"{scn.model.id} on {scn.hardware.id}: {samples} siblings, {prefix:,}-token prefix, {b} sequences "
                 f"per replica{', forks together' if forks_together else ''}")
        written = [str(p) for p in plot_route_sweep(counts, sweep, title, Path(plot) / "route-speedup-vs-replicas")]
    rows: list[dict[str, Any]] = [
        {"policy": o.routing.policy, "siblings_mean": o.routing.siblings_mean, "alone_share": o.routing.alone_share,
         "groups_per_replica_batch": o.groups, "siblings_per_group": o.siblings,
         "load_imbalance": o.routing.load_imbalance, "prefix_copies_per_prompt": o.routing.prefix_copies,
         "speedup": o.speedup, "per_sequence_s": o.per_sequence_s, "cascade_s": o.cascade_s,
         "max_sequences_per_replica": o.max_sequences, "memory": o.memory.to_json() if o.memory else None}
        for o in outs]
    if json_out:
        print_json(envelope({"model": scn.model.id,
                             "hardware": scn.hardware.id, "numbers": params.label, "replicas": replicas,
                             "batch_per_replica": b,
                             "requests": requests, "samples": samples, "prefix_tokens": prefix,
                             "output_tokens": mix.output_tokens,
                             "forks_together": forks_together, "policies": rows, "written": written}))
        return
    from rich.table import Table

    con = make_console()
    con.print(f"{requests:,} requests in groups of {samples} over {replicas} replicas, {b} sequences per replica; "
              f"{scn.model.id} on {scn.hardware.id}; numbers: {params.label}")
    from rich import box

    # Ids and numbers only: never cut (headers stacked so that the table fits 80 columns).
    t = Table(title="Routing and what it leaves of the sharing", title_justify="left", box=box.SIMPLE_HEAD,
              padding=(0, 1), collapse_padding=True, pad_edge=False, show_edge=False)
    for col in ("policy", "siblings\nbeside a\nrequest", "alone", "batch\nshape", "busiest\n/ mean\nload",
                "prompt\ncopies", "cascade\nspeedup", "seqs\nfit per\nreplica", "waves"):
        t.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    for r in rows:
        t.add_row(r["policy"], f"{r['siblings_mean']:.2f}", f"{r['alone_share']:.1%}",
                  f"{r['groups_per_replica_batch']} x {r['siblings_per_group']}", f"{r['load_imbalance']:.2f}",
                  f"{r['prefix_copies_per_prompt']:.2f}", fmt_speedup(r["speedup"]),
                  f"{r['max_sequences_per_replica']:,}",
                  _runs_as(r["memory"]))
    con.print(t)
    for o in outs:
        if o.memory is not None and o.memory.mode != "fits":
            con.print(f"{o.routing.policy}: {o.memory.describe()}; times and speedup are those of the waves")
    for w in written:
        con.print(f"wrote {w}")


def _runs_as(memory: dict | None) -> str:
    """Batches per replica step: 1 when the batch fits at once; the waves of what fits otherwise (a note
    below the table says how, and whether siblings are preempted)."""
    if memory is None or memory["mode"] == "fits":
        return "1"
    if memory["mode"] == "does-not-fit":
        return "-"
    return f"{memory['waves']:,}"


@calibration_options
@deployment_options
def rl(
    model: ModelArg = None,
    hardware: HardwareOpt = None,
    workload: WorkloadOpt = None,
    prompts: Annotated[int, typer.Option("--prompts", min=1, max=limits.MAX_RL_SEQUENCES,
                                         help="Prompts per RL step.")] = 64,
    samples: Annotated[int, typer.Option("--samples", min=1, max=limits.MAX_RL_SEQUENCES,
                                         help="Completions per prompt (GRPO group size).")] = 16,
    prompt_tokens: Annotated[float, typer.Option("--prompt-tokens", min=0, max=limits.MAX_TOKENS,
                                                 help="Mean prompt length.")] = 2048,
    prompt_cv: Annotated[float, typer.Option("--prompt-cv", min=0, max=limits.MAX_SPREAD,
                                             help="Prompt length spread (lognormal CV).")] = 0.3,
    completion_tokens: Annotated[float, typer.Option("--completion-tokens", min=1, max=limits.MAX_OUTPUT_TOKENS,
                                                     help="Mean completion length.")] = 1024,
    completion_cv: Annotated[float, typer.Option("--completion-cv", min=0, max=limits.MAX_SPREAD,
                                                 help="Completion length spread "
                                                 "(lognormal CV): the long tail.")] = 0.6,
    max_completion: Annotated[int, typer.Option("--max-completion", min=1, max=limits.MAX_OUTPUT_TOKENS,
                                                help="Completion cap (max_tokens).")] = 8192,
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=limits.MAX_REPLICAS,
                                          help="Rollout engine replicas.")] = 8,
    other_s: Annotated[float, typer.Option("--other-s", min=0, max=limits.MAX_SECONDS,
                                           help="Rest of an RL step (training, weight sync), "
                                           "seconds, for the end-to-end figure.")] = 0.0,
    sampled_steps: Annotated[int, typer.Option("--sampled-steps", min=1, max=limits.MAX_SAMPLED_STEPS,
                                               help="RL steps drawn to average over.")] = 8,
    seed: SeedOpt = 0,
    deployment: Deployment = Deployment(),
    choice: ParamsChoice = ParamsChoice(),
    json_out: JsonOpt = False,
) -> None:
    """Generation time per RL step (GRPO-style rollouts) with and without cascade, the long tail of
    the longest completion, and the wall time saved per 1,000 RL steps: "the number that moves".

    Example: cascade-plan rl --model llama-3-8b --hardware h200 --prompts 64 --samples 16 --prompt-tokens 4096 --completion-tokens 1024 --replicas 8
    """  # noqa: E501
    from cascade_plan.serving.rl import TAIL_FINISHED, RlSchedule, rl_generation

    scn, params = scenario_and_params(workload, model, hardware, deployment, choice)
    s = RlSchedule(prompts=prompts, samples=samples, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                   max_completion=max_completion, replicas=replicas, prompt_cv=prompt_cv, completion_cv=completion_cv,
                   other_s=other_s)
    res = rl_generation(scn, params, s, sampled_steps, seed)
    if json_out:
        print_json(envelope({"model": scn.model.id, "hardware": scn.hardware.id,
                             "tp": scn.tp, "numbers": params.label, **res.to_json()}))
        return
    from rich.table import Table

    con = make_console()
    con.print(f"{prompts} prompts x {samples} completions per RL step over {replicas} replicas; {scn.model.id} on "
              f"{scn.hardware.id}, TP {scn.tp}; numbers: {params.label}; mean of {sampled_steps} sampled RL steps")
    t = Table(title="Generation per RL step (the slowest replica sets it)", title_justify="left")
    for col in ("", "per-sequence", "cascade", "speedup"):
        t.add_column(col, justify="left" if not col else "right")
    t.add_row("generation", fmt_seconds(res.per_sequence_s), fmt_seconds(res.cascade_s), fmt_speedup(res.speedup))
    t.add_row(f"  of which the tail (after {TAIL_FINISHED:.0%} finished)", fmt_seconds(res.tail_per_sequence_s),
              fmt_seconds(res.tail_cascade_s),
              fmt_speedup(res.tail_per_sequence_s / res.tail_cascade_s) if res.tail_cascade_s else "no tail")
    if other_s:
        t.add_row("whole RL step", fmt_seconds(res.per_sequence_s + other_s), fmt_seconds(res.cascade_s + other_s),
                  fmt_speedup(res.rl_step_speedup))
    con.print(t)
    con.print(f"Longest completion {res.longest_completion:,.0f} tokens vs median {res.median_completion:,.0f}: the "
              f"tail is {res.tail_per_sequence_s / res.per_sequence_s:.0%} of generation per-sequence and "
              f"{res.tail_cascade_s / res.cascade_s:.0%} with cascade (a thin batch shares little).")
    if res.memory is not None:
        con.print(f"KV memory per replica: {res.memory.describe()}", soft_wrap=True)
    saved = res.saved_per_1000_steps_s
    verb = "saved" if saved >= 0 else "LOST (cascade is slower here)"
    con.print(f"[bold]Wall time {verb} per 1,000 RL steps: {fmt_seconds(abs(saved))} ({abs(saved) / 3600:.1f} "
              f"h)[/bold]")
