"""Signals at random times, the campaign's slowest safety class (a subprocess per case, 1-3 s each):
SIGINT gives exit 130 and one line, SIGKILL leaves nothing the next clean run does not remove."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import fuzz_support as fz
from fuzz_safety import ROOT, TEMP, is_defect

# ---- signals at random times -------------------------------------------------------------------------------

def signal_commands(folder: Path) -> list[list[str]]:
    log = folder / "in.jsonl"
    return [["estimate", "rl-rollouts-64"], ["report", "rl-rollouts-64", "--out", str(folder / "rep"), "--no-plots"],
            ["report", "rl-rollouts-64", "--out", str(folder / "rep"), "-j", "2", "--compare-hardware", "h100,h200"],
            ["simulate-log", "rl-rollouts-64", "--out", str(folder / "sim.jsonl")],
            ["analyze", str(log), "--model", "llama-3-8b", "--hardware", "h200",
             "--workload-out", str(folder / "s.yaml")],
            ["breakeven", "rl-rollouts-64", "--json"],
            ["plot", "rl-rollouts-64", "--out", str(folder / "plots"), "--compare-hardware", "h100"],
            ["calibrate", str(ROOT / "calibrations" / "h200-probe-2026-12-01.json"), "--out", str(folder / "cal.json")],
            ["check", "rl-rollouts-64", "--min-run-speedup", "1.1", "--junit", str(folder / "j.xml"), "--markdown",
             str(folder / "m.md")]]


def _temps(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if TEMP.search(p.name) or p.name.startswith(".sim.jsonl.")]


def signals(n: int, tmp: Path, seed: int = 0, max_delay_s: float = 3.0) -> fz.Tally:
    """A writing or reading command sent SIGINT (or SIGKILL) at a random moment: SIGINT gives exit 130 and the
    one line "interrupted" (or the command had finished: exit 0), and leaves no temporary file; after a
    SIGKILL, the next clean run of the same command leaves none either."""
    rng, tally = random.Random(seed), fz.Tally()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log_src = None
    for i in range(n):
        folder = tmp / f"sig-{i}"
        folder.mkdir()
        if log_src is None:
            log_src = tmp / "shared-log.jsonl"
            subprocess.run([sys.executable, "-m", "cascade_plan", "simulate-log", "rl-rollouts-64",
                            "--out", str(log_src)],
                           env=env, check=True, capture_output=True)
        os.link(log_src, folder / "in.jsonl")
        argv = rng.choice(signal_commands(folder))
        sig = rng.choice([signal.SIGINT, signal.SIGINT, signal.SIGKILL])
        delay = rng.uniform(0.15, max_delay_s)
        err_file = tmp / f"sig-{i}.stderr"          # a file, not a pipe: a stray child holding it cannot stall us
        with open(err_file, "w") as err_fh:
            p = subprocess.Popen([sys.executable, "-m", "cascade_plan", *argv], cwd=folder, env=env,
                                 stdout=subprocess.DEVNULL, stderr=err_fh, text=True)
            time.sleep(delay)
            p.send_signal(sig)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                tally.add("hang: still running 60 s after the signal", " ".join(argv), 0)
                continue
        err = err_file.read_text().strip()
        what = f"{signal.Signals(sig).name} at {delay:.2f}s: {' '.join(argv)}"
        if os.environ.get("FUZZ_VERBOSE"):
            print(f"  {what}: rc {p.returncode}", file=sys.stderr, flush=True)
        if sig == signal.SIGINT:
            if p.returncode == 0 or (argv[0] == "check" and p.returncode == 1):
                outcome = "answered"
            elif "init_import_site" in err or "Fatal Python error" in err:
                outcome = "interpreter start-up"        # before any of this package ran: not ours to handle
            elif p.returncode == 130 and err == "interrupted":
                outcome = "interrupted"
            elif "Traceback" in err:
                outcome = f"traceback: {err.splitlines()[-1][:120]}"
            else:
                outcome = f"wrong exit {p.returncode}: {err[:160]}"
            left = _temps(folder)
            if outcome in ("interrupted", "answered") and left:
                outcome = f"temp file left: {left}"
        else:
            time.sleep(0.3)                           # a killed report's workers end with it (PDEATHSIG)
            try:
                res = subprocess.run([sys.executable, "-m", "cascade_plan", *argv], cwd=folder, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                tally.add("hang: the clean run after a SIGKILL ran past 120 s", what, 0)
                continue
            left = _temps(folder)
            ok = {0, 1} if argv[0] == "check" else {0}      # check: 1 is a failed check, an answer
            outcome = ("killed, then answered" if res.returncode in ok and not left else
                       f"temp file left: {left}" if left
                       else f"wrong exit {res.returncode}: {res.stderr.strip()[:160]}")
        tally.add(outcome if is_defect(outcome) else outcome.split(":")[0], what, 0)
        __import__("shutil").rmtree(folder, ignore_errors=True)
    return tally
