"""Robustness fuzz, long profile: generated and mutated workloads through the library calls the CLI
makes, and a share of them through the CLI itself; prints the figures.

    python benchmarks/fuzz_campaign.py                 # 3,000 + 600 + 150 library inputs, 150 through the CLI
    python benchmarks/fuzz_campaign.py --library 30000 --cli 300
    python benchmarks/fuzz_campaign.py --library 0 --cli 0 --commands 2000     # route, rl, logs, probe args, ...
    python benchmarks/fuzz_campaign.py --library 0 --cli 0 --commands 0 --scaling 40   # time and memory by size

Figures: inputs tried, outcomes (answered / refused / each defect class), tracebacks, wrong exit
codes, non-finite or negative outputs, invariant violations, peak traced memory of one input and the
process's peak RSS, wall time. Exit status 1 when any defect was found. The bounded profile of the
same checks runs in CI (tests/test_fuzz.py)."""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fuzz_commands as fc  # noqa: E402
import fuzz_support as fz  # noqa: E402


def library_campaign(n: int, tmp: Path) -> fz.Tally:
    """n workloads (generated, mutated, or sharing nothing), then n/5 with a generated model config.json
    and hardware profile, then n/20 edits of the shipped calibration file."""
    tally = fz.Tally()

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(doc=st.one_of(fz.workloads(), fz.workloads(odd=3), fz.no_sharing_workloads()),
           mutation=st.sampled_from(range(len(fz.TEXT_MUTATIONS))), mode=st.sampled_from(fz.MODES))
    def one(doc, mutation, mode):
        text = fz.TEXT_MUTATIONS[mutation](fz.dump(doc))
        outcome, peak = fz.run_workload(text, mode, tmp)
        tally.add(outcome.split(":")[0] if not fz.is_defect(outcome) else outcome, text, peak)

    @settings(max_examples=max(n // 5, 1), deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=fz.workloads_with_files(), mode=st.sampled_from(fz.MODES))
    def with_files(case, mode):
        doc, files = case
        outcome, peak = fz.run_workload(fz.dump(doc), mode, tmp, files)
        tally.add(outcome.split(":")[0] if not fz.is_defect(outcome) else outcome, repr(files), peak)

    shipped = __import__("json").loads(next((fz.ROOT / "calibrations").glob("h200-*.json")).read_text())

    @settings(max_examples=max(n // 20, 1), deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(edits=fz.calibration_edits(), backend=st.sampled_from([None, "triton", "torch", "flashinfer-fa2"]))
    def calibration(edits, backend):
        outcome = fz.run_calibration(fz.edited_calibration(shipped, edits), backend, tmp)
        tally.add(outcome.split(":")[0] if not fz.is_defect(outcome) else outcome, repr(edits), 0)

    one()
    with_files()
    calibration()
    return tally


def cli_campaign(n: int, tmp: Path) -> tuple[int, int, int, list[str]]:
    """Inputs through `cascade-plan estimate --json` and `check`: exit codes and stderr lines."""
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    runner = CliRunner()
    counts = {"tried": 0, "wrong_exit": 0, "tracebacks": 0}
    bad: list[str] = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(doc=st.one_of(fz.workloads(), fz.workloads(odd=3)), mutation=st.sampled_from(range(len(fz.TEXT_MUTATIONS))),
           command=st.sampled_from(["estimate", "check", "breakeven"]), what_if=fz.what_if_options())
    def one(doc, mutation, command, what_if):
        path = tmp / "cli.yaml"
        path.write_bytes(fz.TEXT_MUTATIONS[mutation](fz.dump(doc)).encode("utf-8", "surrogatepass"))
        args = {"estimate": ["estimate", str(path), "--json"],
                "check": ["check", str(path), "--min-run-speedup", "1.1", "--json"],
                "breakeven": ["breakeven", str(path), "--prefix", "64:8192:log", "--batch", "1:64:log",
                              "--json"]}[command] + what_if
        res = runner.invoke(app, args)
        counts["tried"] += 1
        ok_codes = {0, 1, 2} if command == "check" else {0, 2}
        traceback = res.exception is not None and not isinstance(res.exception, SystemExit)
        if traceback:
            counts["tracebacks"] += 1
            bad.append(f"{command}: {type(res.exception).__name__}: {res.exception}")
        elif res.exit_code not in ok_codes or (res.exit_code == 2 and len(res.stderr.strip().splitlines()) != 1):
            counts["wrong_exit"] += 1
            bad.append(f"{command}: exit {res.exit_code}: {res.stderr.strip()[:200]}")

    one()
    return counts["tried"], counts["wrong_exit"], counts["tracebacks"], bad


def commands_campaign(n: int, tmp: Path) -> tuple[fz.Tally, float]:
    """n command lines of route, rl, simulate-log, analyze (generated and corrupted logs), import-aic,
    workloads, schema and probe (arguments only) through the CLI; (tally, slowest seconds)."""
    tally, slowest = fz.Tally(), [0.0, None]

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=fc.commands(st.one_of(fz.workloads(), fz.workloads(odd=3)).map(fz.dump)))
    def one(case):
        argv, files = case
        folder = Path(tempfile.mkdtemp(dir=tmp))
        outcome, peak, wall = fc.run_command(argv, files, folder)
        __import__("shutil").rmtree(folder, ignore_errors=True)
        tally.add(outcome if fc.is_defect(outcome) else outcome.split(":")[0], " ".join(argv), peak)
        if wall > slowest[0]:
            slowest[:] = [wall, " ".join(argv)]

    one()
    return tally, slowest


def scaling_cases(n: int, seed: int = 0) -> list[tuple[str, object, list[str]]]:
    """n worst-shaped valid inputs drawn log-uniformly up to the documented limits, by sequences
    (simulate-log: many short sequences beside one long child), replicas (analyze: one-step replicas;
    route) and chain levels (analyze: chains of up to 64 levels, and one over, which is malformed)."""
    import random

    import bounded_commands as bc

    rng = random.Random(seed)

    def log_uniform(lo: int, hi: int) -> int:
        return round(lo * (hi / lo) ** rng.random())

    kinds = ["sequences", "replicas", "route replicas", "levels"]
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind == "sequences":
            short = log_uniform(10, 99_000)
            long_steps = max(1, (5_000_000 - short) // 10)
            tree = (f"{{tokens: 1000, children: [{{tokens: 10, samples: {short}, output_tokens: 1}}, "
                    f"{{tokens: 10, samples: 10, output_tokens: {min(long_steps, 10_000_000)}}}]}}")
            out.append((f"simulate-log {short + 10:,} sequences", bc.workload(tree),
                        ["simulate-log", "{d}/w.yaml", "--out", "{d}/sim.jsonl"]))
        elif kind == "replicas":
            r = log_uniform(10, 200_000)
            out.append((f"analyze {r:,} one-step replicas", bc.one_step_replicas(r),
                        ["analyze", "{d}/replicas.jsonl", "--model", "llama-3-8b", "--json"]))
        elif kind == "route replicas":
            r = log_uniform(1, 4096)
            out.append((f"route --replicas {r:,}", None, ["route", "--model", "llama-3-8b", "--hardware", "h200",
                                                           "--replicas", str(r), "--json"]))
        else:
            lv = rng.choice([1, 2, 8, 32, 64, 65, 1000])
            out.append((f"analyze chain of {lv} levels", bc.deep_chain(lv, 500),
                        ["analyze", "{d}/chain.jsonl", "--model", "llama-3-8b", "--json"]))
    return out


def scaling_campaign(n: int) -> tuple[int, list[str], float, float]:
    """Each scaling case in a process of its own: (tried, misses, worst CPU s, worst peak RSS MiB).
    A miss: an exit other than 0/1/2, a traceback, or more than 5 s (CPU time while the machine is
    loaded, wall time otherwise) or 500 MiB."""
    import bounded_commands as bc

    misses, worst_cpu, worst_rss = [], 0.0, 0.0
    cases = scaling_cases(n)
    for name, setup, argv in cases:
        with tempfile.TemporaryDirectory() as d:
            rc, wall, cpu, rss, line = bc.run_case(setup, argv, Path(d))
        loaded = __import__("os").getloadavg()[0] > (__import__("os").cpu_count() or 1)
        worst_cpu, worst_rss = max(worst_cpu, cpu), max(worst_rss, rss)
        if rc not in (0, 1, 2) or "Traceback" in line or (cpu if loaded else wall) > bc.WALL_S or rss > bc.RSS_MIB:
            misses.append(f"{name}: exit {rc}, {wall:.1f} s wall, {cpu:.1f} s CPU, {rss:.0f} MiB {line[:80]}")
    return len(cases), misses, worst_cpu, worst_rss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", type=int, default=3000, help="inputs through the library calls")
    ap.add_argument("--cli", type=int, default=150, help="inputs through the CLI")
    ap.add_argument("--commands", type=int, default=300, help="command lines of route, rl, simulate-log, analyze, "
                    "import-aic, workloads, schema, probe")
    ap.add_argument("--scaling", type=int, default=12, help="worst-shaped inputs by sequences, replicas and chain "
                    "levels, one process each, timed (benchmarks/bounded_commands.py's budget)")
    ap.add_argument("--safety", type=int, default=0, help="cases per safety class (benchmarks/fuzz_safety_campaign.py: "
                    "special files, names, --out folders, JSON duplicates, calibration fields, signals)")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tally = library_campaign(a.library, Path(d)) if a.library else fz.Tally()
        t_lib = time.perf_counter() - t0
        cli_tried, wrong_exit, cli_tb, cli_bad = cli_campaign(a.cli, Path(d)) if a.cli else (0, 0, 0, [])
        t_cmd = time.perf_counter()
        cmd, slowest = commands_campaign(a.commands, Path(d)) if a.commands else (fz.Tally(), [0.0, None])
        t_cmd = time.perf_counter() - t_cmd
    wall = time.perf_counter() - t0
    defects = {k: v for k, v in tally.outcomes.items() if fz.is_defect(k)}
    count = lambda prefix: sum(v for k, v in tally.outcomes.items() if k.startswith(prefix))  # noqa: E731
    print(f"library: {tally.tried:,} inputs in {t_lib:.0f} s: {tally.outcomes.get('answered', 0):,} answered, "
          f"{tally.outcomes.get('refused', 0):,} refused with one line")
    print(f"  tracebacks {count('traceback')}, non-finite outputs {count('non-finite')}, negative outputs "
          f"{count('negative')}, invariant violations {count('invariant')}, multi-line errors {count('multi-line')}")
    print(f"  peak traced memory of one input: {tally.peak_bytes / 2**20:.1f} MiB")
    print(f"cli: {cli_tried:,} inputs: {wrong_exit} wrong exit codes or multi-line errors, {cli_tb} tracebacks")
    print(f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB, wall {wall:.0f} s")
    for k, v in sorted(defects.items()):
        print(f"DEFECT x{v}: {k}\n  first input: {tally.examples[k]!r}"[:600])
    for line in cli_bad[:20]:
        print(f"CLI DEFECT: {line}")
    cmd_defects = {k: v for k, v in cmd.outcomes.items() if fc.is_defect(k)}
    kinds = lambda prefix: sum(v for k, v in cmd_defects.items() if k.startswith(prefix))  # noqa: E731
    print(f"commands: {cmd.tried:,} command lines in {t_cmd:.0f} s: {cmd.outcomes.get('answered', 0):,} answered, "
          f"{cmd.outcomes.get('refused', 0):,} refused with one line")
    print(f"  tracebacks {kinds('traceback')}, wrong exit codes {kinds('wrong exit')}, multi-line errors "
          f"{kinds('multi-line')}, non-finite outputs {kinds('non-finite')}, negative outputs {kinds('negative')}, "
          f"invalid JSON {kinds('invalid json')}, half-written {kinds('half-written')}, scan aborted by a record "
          f"{kinds('engine error')}")
    print(f"  peak traced memory of one command: {cmd.peak_bytes / 2**20:.1f} MiB; "
          f"slowest {slowest[0]:.1f} s: {slowest[1]}")
    for k, v in sorted(cmd_defects.items()):
        print(f"COMMAND DEFECT x{v}: {k}\n  first input: {cmd.examples[k]!r}"[:600])
    scaled, misses, worst_cpu, worst_rss = scaling_campaign(a.scaling) if a.scaling else (0, [], 0.0, 0.0)
    print(f"scaling: {scaled} inputs by sequences, replicas and chain levels: {len(misses)} over 5 s / 500 MiB or "
          f"a wrong exit; worst {worst_cpu:.1f} s CPU, {worst_rss:.0f} MiB peak RSS")
    for m in misses:
        print(f"SCALING MISS: {m}")
    safety_defects = 0
    if a.safety:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fuzz_safety_campaign import safety_campaign

        safety_defects = safety_campaign(a.safety)
    return 1 if defects or wrong_exit or cli_tb or cmd_defects or misses or safety_defects else 0


if __name__ == "__main__":
    sys.exit(main())
