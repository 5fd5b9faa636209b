"""The one percentage formatter every validation table uses."""

from cascade_plan.units import fmt_pct


def test_fmt_pct_by_hand():
    assert fmt_pct(0.034) == "3.4%"
    assert fmt_pct(0.0) == "0.0%"
    assert fmt_pct(1.25) == "125.0%"
    assert fmt_pct(0.034, signed=True) == "+3.4%"
    assert fmt_pct(-0.165, signed=True) == "-16.5%"
    assert fmt_pct(None) == fmt_pct(None, signed=True) == "—"
