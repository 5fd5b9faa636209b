"""The README's figures, computed by running the tool: `python scripts/readme_figures.py` prints them and
says which README spans differ (exit 1 if any); `--write` rewrites those spans in README.md.

Each figure in README.md sits between markers, <!--fig:NAME-->VALUE<!--/fig-->, which GitHub does not
render; tests/test_readme_figures.py fails when a marked value is not what the tool prints today, so a
change that moves a figure is caught and fixed with `python scripts/readme_figures.py --write`.

Every figure comes from a command's JSON or text output, run in-process, so it is what a user sees.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = re.compile(r"<!--fig:(?P<name>[a-z0-9_]+)-->(?P<value>.*?)<!--/fig-->", re.DOTALL)


def _run(*args: str) -> str:
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    if r.exit_code not in (0, 1):
        raise RuntimeError(f"cascade-plan {' '.join(args)} exited {r.exit_code}: {r.output}")
    return r.stdout


def _estimate(*args: str) -> dict:
    return json.loads(_run("estimate", "rl-rollouts-64", *args, "--json"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def figures() -> dict[str, str]:
    """Every marked README figure, by name, formatted as the README shows it."""
    seed = _estimate("--ideal")                                   # the seed's worked example: H100, ideal
    h200 = {name: _estimate("--hardware", "h200", *args) for name, args in (
        ("ideal", ("--ideal",)), ("default", ("--uncalibrated",)), ("flashinfer", ("--backend", "flashinfer")),
        ("flashinfer_fa2", ("--backend", "flashinfer-fa2")), ("triton", ("--backend", "triton")),
        ("torch", ("--backend", "torch")))}
    fail = next(line for line in _run("check", "rl-rollouts-64", "--min-run-speedup", "5").splitlines()
                if line.startswith("FAIL") and "min_run_speedup" in line)
    cap = json.loads(_run("capacity", "rl-rollouts-64", "--tpot-ms", "9", "--hardware", "h200,h100-sxm", "--json"))
    aic_bytes = sum(p.stat().st_size for p in (ROOT / "calibrations").glob("*-aic-*.json"))
    figs = {
        "seed_weight_gb": f"{seed['weight_bytes'] / 1e9:.1f} GB",
        "seed_weight_ms": _ms(seed["weight_s"]).replace(".0 ms", " ms"),
        "seed_final_ps": f"{seed['final_step']['per_sequence']['step_s'] * 1e3:.0f} ms",
        "seed_final_cas": f"{seed['final_step']['cascade']['step_s'] * 1e3:.0f} ms",
        "h200_ideal_speedup": f"{h200['ideal']['run']['speedup']:.1f}x",
        "h200_default_speedup": f"{h200['default']['run']['speedup']:.2f}x",
        "h200_default_gemm": _ms(h200["default"]["first_step"]["gemm_s"]),
        "h200_weight_bytes_over_bw": _ms(h200["ideal"]["first_step"]["gemm_s"]),
        "h200_default_glue": _ms(h200["default"]["first_step"]["glue_s"]),
        "check_fail_line": f"`{fail}`",
        "capacity_answer": f"```\nAnswer: {cap['answer']}\nLaunch: {cap['launch']['command']}\n```",
        "aic_calibrations_kb": f"{aic_bytes / 1e3:.0f} KB",
    }
    for backend in ("flashinfer", "flashinfer_fa2", "triton", "torch"):
        figs[f"h200_{backend}_speedup"] = f"{h200[backend]['run']['speedup']:.2f}x"
    return figs


def render(text: str, figs: dict[str, str]) -> str:
    """`text` with every marked span set to its figure (an unknown name is an error, not skipped)."""
    def put(m: re.Match) -> str:
        name = m.group("name")
        if name not in figs:
            raise KeyError(f"README marks a figure the script does not compute: {name}")
        return f"<!--fig:{name}-->{figs[name]}<!--/fig-->"

    return MARK.sub(put, text)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    figs = figures()
    text = README.read_text(encoding="utf-8")
    marked = {m.group("name"): m.group("value") for m in MARK.finditer(text)}
    for name, value in figs.items():
        was = marked.get(name)
        state = "not in README" if was is None else "ok" if was == value else f"README has {was!r}"
        print(f"{name:28} {value:40} {state}")
    new = render(text, figs)
    if "--write" in argv:
        if new != text:
            README.write_text(new, encoding="utf-8")
            print(f"rewrote {README}")
        return 0
    return int(new != text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
