"""Robustness fuzz, long profile: generated and mutated workloads through the library calls the CLI
makes, and a share of them through the CLI itself; prints the figures.

    python benchmarks/fuzz_campaign.py                 # 3,000 + 600 + 150 library inputs, 150 through the CLI
    python benchmarks/fuzz_campaign.py --library 30000 --cli 300

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

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

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
                "breakeven": ["breakeven", str(path), "--prefix", "64:8192:log", "--batch", "1:64:log", "--json"]}[command] + what_if
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", type=int, default=3000, help="inputs through the library calls")
    ap.add_argument("--cli", type=int, default=150, help="inputs through the CLI")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tally = library_campaign(a.library, Path(d))
        t_lib = time.perf_counter() - t0
        cli_tried, wrong_exit, cli_tb, cli_bad = cli_campaign(a.cli, Path(d))
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
    return 1 if defects or wrong_exit or cli_tb else 0


if __name__ == "__main__":
    sys.exit(main())
