"""Robustness campaign, safety classes (nothing lost, every input answered): prints the figures per class.

    python benchmarks/fuzz_safety_campaign.py         # 500 cases per library class, 100 --out folders, 20 signals
    python benchmarks/fuzz_safety_campaign.py --cases 5000 --folders 400 --signals 200
    python benchmarks/fuzz_campaign.py --safety 5000  # the same, after the other classes

Classes (tests/fuzz_safety.py): every calibration field (imported AIConfigurator files and the probe's:
decode_mla, surfaces, step parts), JSON duplicate keys (config.json, calibration), special files (FIFO,
devices, folders, broken links, huge sparse files, one byte over the cap, not UTF-8, empty) in every input
role, long and dotted workload names (slug safety; every 25th plotted for real), existing --out folders
(user files, forged markers, earlier reports with and without the user's additions) and signals at random
times (SIGINT: exit 130 and one line; SIGKILL: the next clean run leaves no temporary). Defects: tracebacks,
wrong exit codes, multi-line errors, bad input accepted, user files lost or changed, files written outside
--out, temporaries left, non-finite or negative outputs, hangs. Exit status 1 when any defect was found."""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fuzz_safety as fs  # noqa: E402


def safety_campaign(cases: int, folders: int | None = None, signals: int | None = None, seed: int = 0) -> int:
    """Run every safety class; print one line per class and each defect's first input. Returns the defect count."""
    sizes = {name: cases for name in fs.LIBRARY_CLASSES}
    sizes["out folders"] = folders if folders is not None else max(cases // 5, 1)
    sizes["signals"] = signals if signals is not None else max(cases // 25, 1)
    defects = 0
    library = commands = 0
    with tempfile.TemporaryDirectory() as d:
        for name, n in sizes.items():
            if n <= 0:
                continue
            tmp = Path(d) / name.replace(" ", "-")
            tmp.mkdir()
            t0 = time.perf_counter()
            tally = fs.CLASSES[name](n, tmp, seed)
            wall = time.perf_counter() - t0
            bad = {k: v for k, v in tally.outcomes.items() if fs.is_defect(k)}
            defects += sum(bad.values())
            if name in fs.LIBRARY_CLASSES:
                library += tally.tried
            else:
                commands += tally.tried
            shown = ", ".join(f"{v:,} {k}" for k, v in sorted(tally.outcomes.items(), key=lambda kv: -kv[1]))
            print(f"safety / {name}: {tally.tried:,} cases in {wall:.0f} s: {shown}; defects {sum(bad.values())}")
            for k, v in sorted(bad.items()):
                print(f"  DEFECT x{v}: {k}\n    first input: {tally.examples[k]!r}"[:600])
    print(f"safety: {library:,} library inputs, {commands:,} command lines, {defects} defects; process peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return defects


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=500, help="cases per library class")
    ap.add_argument("--folders", type=int, default=100, help="report runs over existing --out folders")
    ap.add_argument("--signals", type=int, default=20, help="commands signalled at random times (1-3 s each)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    return 1 if safety_campaign(a.cases, a.folders, a.signals, a.seed) else 0


if __name__ == "__main__":
    sys.exit(main())
