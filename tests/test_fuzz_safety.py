"""The safety classes of the robustness campaign, a slice small enough for CI (about a minute on 2 cores):
every class runs, and none finds a defect. The long profile is benchmarks/fuzz_safety_campaign.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_safety as fs  # noqa: E402

SLICE = {"calibration fields": 60, "json duplicates": 40, "special files": 45, "names": 60, "out folders": 8,
         "signals": 2}


@pytest.mark.parametrize("name", sorted(SLICE))
def test_safety_class_finds_no_defect(tmp_path, name):
    tally = fs.CLASSES[name](SLICE[name], tmp_path, seed=7)
    assert tally.tried == SLICE[name]
    bad = {k: (v, tally.examples[k]) for k, v in tally.outcomes.items() if fs.is_defect(k)}
    assert not bad, bad
    if name in ("json duplicates", "special files"):           # every case there is bad input
        assert set(tally.outcomes) == {"refused"}, tally.outcomes


def test_the_classifier_sees_defects():
    """A campaign that cannot fail is no campaign: each defect class is recognised."""
    for outcome in ("traceback: TypeError", "bad input accepted", "user file lost or changed",
                    "written outside --out: x",
                    "temp file left: ['.a.1.x.tmp']", "hang", "unsafe slug: '..'", "wrong exit 1: x"):
        assert fs.is_defect(outcome), outcome
    for outcome in ("answered", "refused", "interrupted", "killed, then answered", "interpreter start-up"):
        assert not fs.is_defect(outcome), outcome
