"""Safety classes of the robustness campaign (nothing lost, every input answered): special files, long
and dotted names, existing `--out` folders, JSON duplicate keys, every calibration field (decode_mla,
surfaces, step parts, in the imported files and the probe's), signals at random times.

Each class is a function `(n, tmp, seed) -> Tally` over seeded random cases, so a run is repeatable and
its size is the caller's: benchmarks/fuzz_campaign.py runs them long (`--safety N`), tests/test_fuzz_safety.py
runs a slice in CI. An outcome is "answered", "refused" (one line, exit 2), "interrupted" (exit 130, one
line) or a defect: traceback, wrong exit, multi-line error, bad input accepted, user file lost, written
outside --out, temp file left, non-finite or negative output, hang."""

from __future__ import annotations

import copy
import json
import os
import random
import re
import signal
import time
from pathlib import Path

import fuzz_support as fz

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CALIBRATIONS = sorted((ROOT / "calibrations").glob("*.json"))
DEFECTS = ("traceback", "wrong exit", "multi-line", "bad input accepted", "user file lost", "written outside",
           "temp file left", "non-finite", "negative", "invariant", "hang", "unsafe slug")
TEMP = re.compile(r"\.(tmp|tmpdir|old|lock)$")


def is_defect(outcome: str) -> bool:
    return outcome.startswith(DEFECTS)


class _Hang(Exception):
    pass


def _bounded(fn, seconds: int = 20):
    """fn() with an alarm: a call that blocks (a FIFO opened for reading) is a defect, not a stuck campaign."""
    def on_alarm(*_):
        raise _Hang()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _classify_library(fn) -> str:
    from cascade_plan.errors import InputError

    try:
        return _bounded(fn)
    except _Hang:
        return "hang"
    except InputError as exc:
        return "refused" if "\n" not in str(exc) else "multi-line error"
    except Exception as exc:                         # noqa: BLE001 - the defect being counted
        return f"traceback: {type(exc).__name__}: {str(exc)[:120]}"


# ---- every calibration field ------------------------------------------------------------------------

def _leaves(doc, path=()):
    """(path, value) of every number, and (path, dict) of every mapping, under `fitted`."""
    if isinstance(doc, dict):
        yield path, doc
        for k, v in doc.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):             # the first rows of a table stand for the rest
            yield from _leaves(v, path + (i,))
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc


def _set(doc, path, value):
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


SIGNED_FIELDS = re.compile(r"surface|log2_|log_|notes")
MUTATIONS = ("negative", "string", "extra key", "huge", "zero", "scaled", "list", "remove")


def calibration_fields(n: int, tmp: Path, seed: int = 0) -> fz.Tally:
    """A random field of a shipped calibration file (imported or probe), mutated; estimate through it. A mutation
    that makes the file invalid must be refused; one that keeps it valid must answer correctly."""
    from cascade_plan.cost.estimate import estimate, to_json
    from cascade_plan.inputs.choices import ParamsChoice
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.planning.params_select import select_params

    rng, tally = random.Random(seed), fz.Tally()
    docs = {p: json.loads(p.read_text()) for p in CALIBRATIONS}
    fields = {p: [x for x in _leaves(d["fitted"], ("fitted",))] for p, d in docs.items()}
    mla_workload = ROOT / "workloads" / "deepseek-v3-grpo-tp8.yaml"
    gqa_workload = ROOT / "workloads" / "rl-rollouts-64.yaml"
    for _ in range(n):
        source = rng.choice(CALIBRATIONS)
        doc = copy.deepcopy(docs[source])
        path, value = rng.choice(fields[source])
        kind = rng.choice(MUTATIONS)
        bad = True
        if isinstance(value, dict):
            if kind == "remove" and value:
                key = rng.choice(sorted(value))
                target = doc
                for p in path:
                    target = target[p]
                del target[key]
                bad = None                           # optional fields exist: either outcome may be right
            else:
                kind = "extra key"
                _set(doc, path + ("surprise_field",), 1) if path else doc.__setitem__("surprise_field", 1)
        elif kind == "negative":
            _set(doc, path, -abs(value) - 1e-3)
            bad = None if SIGNED_FIELDS.search(str(path)) else True
        elif kind == "string":
            _set(doc, path, str(value))
        elif kind == "huge":
            _set(doc, path, 1e308)
            bad = None
        elif kind == "zero":
            _set(doc, path, 0)
            bad = None
        elif kind == "scaled":
            _set(doc, path, value * rng.choice([0.5, 0.9, 1.1, 2.0]) if not isinstance(value, int) else value)
            bad = None
        elif kind == "list":
            _set(doc, path, [value])
        else:                                        # remove a number: required or not
            target = doc
            for p in path[:-1]:
                target = target[p]
            target.pop(path[-1]) if isinstance(target, dict) else target.pop()
            bad = None
        cal = tmp / "cal.json"
        cal.write_text(json.dumps(doc))
        mla = "decode_mla" in path or rng.random() < 0.3
        hw = doc.get("hardware_id") or "h200"

        def one():
            scn = load_scenario(mla_workload if mla else gqa_workload, hw)
            backend = path[3] if len(path) > 3 and path[1] == "kv_dtypes" else None
            return fz.check_answer(estimate(scn, select_params(scn, ParamsChoice(backend=backend, calibration=cal,
                                                                                 force=True))), to_json)
        outcome = _classify_library(one)
        if outcome == "answered" and bad:
            outcome = "bad input accepted"
        tally.add(outcome.split(":")[0] if not is_defect(outcome) else outcome,
                  f"{source.name} {'.'.join(map(str, path))} {kind}", 0)
    return tally


# ---- JSON duplicate keys --------------------------------------------------------------------------------

def _dump_with_duplicate(doc, target_path, dup_value):
    """JSON text of `doc` with the first key of the object at target_path written twice (first with dup_value)."""
    def enc(node, path):
        if isinstance(node, dict):
            items = [f"{json.dumps(k)}: {enc(v, path + (k,))}" for k, v in node.items()]
            if path == target_path and node:
                k = next(iter(node))
                items.insert(0, f"{json.dumps(k)}: {json.dumps(dup_value)}")
            return "{" + ", ".join(items) + "}"
        if isinstance(node, list):
            return "[" + ", ".join(enc(v, path + (i,)) for i, v in enumerate(node)) + "]"
        return json.dumps(node)
    return enc(doc, ())


def json_duplicates(n: int, tmp: Path, seed: int = 0) -> fz.Tally:
    """A config.json or a calibration file with one key written twice, in a random object: always refused,
    naming the key (a JSON parser keeps the last silently)."""
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.inputs.model_spec import load_model

    rng, tally = random.Random(seed), fz.Tally()
    configs = [json.loads(p.read_text()) for p in sorted(DATA.glob("tiny-*-config.json"))]
    small_cals = [p for p in CALIBRATIONS if p.stat().st_size < 200_000]
    cals = {p: json.loads(p.read_text()) for p in small_cals}
    for _ in range(n):
        if rng.random() < 0.5:
            doc, loader, name = rng.choice(configs), load_model, "config.json"
        else:
            src = rng.choice(small_cals)
            doc, loader, name = cals[src], load_probe, "cal.json"
        objects = [p for p, v in _leaves(doc) if isinstance(v, dict) and v]
        where = rng.choice(objects)
        node = doc
        for p in where:
            node = node[p]
        first = next(iter(node))
        dup = rng.choice([node[first], 0, -1, "x", None, 131072])
        path = tmp / name
        path.write_text(_dump_with_duplicate(doc, where, dup))
        outcome = _classify_library(lambda: loader(str(path)))
        if outcome != "refused" and not is_defect(outcome):
            outcome = "bad input accepted"
        tally.add(outcome.split(":")[0] if not is_defect(outcome) else outcome, f"{name} {where} {first!r}", 0)
    return tally


# ---- special files -------------------------------------------------------------------------------------------

ROLES = ("workload", "config", "hardware", "calibration", "log")
CAPS = {"workload": 1 << 20, "config": 1 << 20, "hardware": 64 << 10, "calibration": 32 << 20}


def _special(kind: str, role: str, folder: Path) -> Path:
    suffix = {"workload": ".yaml", "config": ".json", "hardware": ".yaml", "calibration": ".json",
              "log": ".jsonl"}[role]
    path = folder / f"special{suffix}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "dev-null-link":
        path.symlink_to("/dev/null")
    elif kind == "folder":
        path.mkdir()
    elif kind == "broken-link":
        path.symlink_to(folder / "nowhere")
    elif kind == "sparse-huge":
        with open(path, "wb") as fh:
            fh.truncate(CAPS.get(role, 16 << 20) * 4 + 1)      # logs have no cap (streamed): 64 MB of NULs
    elif kind == "over-cap-by-one":
        path.write_bytes(b"#" * (CAPS.get(role, 1 << 20) + 1) if role != "log" else b"\xff\xfe")
    elif kind == "not-utf8":
        path.write_bytes(b"\xff\xfe\x00garbage")
    elif kind == "empty":
        path.write_bytes(b"")
    return path


SPECIAL_KINDS = ("fifo", "dev-zero-link", "dev-null-link", "folder", "broken-link", "sparse-huge", "over-cap-by-one",
                 "not-utf8", "empty")


def special_files(n: int, tmp: Path, seed: int = 0) -> fz.Tally:
    """Each input role given a FIFO, a device, a folder, a broken link, a huge (sparse) file, a file one byte over
    its cap, bytes that are not UTF-8, or nothing: refused in one line, quickly, without reading it whole."""
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.model_spec import load_model
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.logs.duck_reader import read_logs, require_steps
    from cascade_plan.logs.sources import expand

    def read_log(p):
        files = expand([str(p)])
        return require_steps(read_logs(files), files)

    rng, tally = random.Random(seed), fz.Tally()
    loaders = {"workload": lambda p: load_scenario(p), "config": lambda p: load_model(str(p)),
               "hardware": lambda p: load_hardware(str(p)), "calibration": lambda p: load_probe(p),
               "log": read_log}
    for i in range(n):
        kind, role = rng.choice(SPECIAL_KINDS), rng.choice(ROLES)
        folder = tmp / f"special-{i}"
        folder.mkdir()
        path = _special(kind, role, folder)
        t0 = time.perf_counter()
        outcome = _classify_library(lambda: loaders[role](path))
        if outcome != "refused" and not is_defect(outcome):
            outcome = "bad input accepted"
        if outcome == "refused" and time.perf_counter() - t0 > 5:
            outcome = "hang (refused after more than 5 s)"
        tally.add(outcome.split(":")[0] if not is_defect(outcome) else outcome, f"{role} {kind}", 0)
        __import__("shutil").rmtree(folder, ignore_errors=True)
    return tally


# ---- long and dotted names -------------------------------------------------------------------------------------

NAME_PARTS = ["..", ".", "/", "\\", "report.md", ".cascade-plan-report", "a" * 100, "é", "日本", " ", "-", "_", "~",
              "x.png", ".hidden", "\n", "\t", "rl", "CON", "$(rm -rf ~)", "..\\..", "%2e%2e"]


def random_name(rng: random.Random) -> str:
    return "".join(rng.choice(NAME_PARTS) for _ in range(rng.randint(1, 8))) * rng.choice([1, 1, 1, 4])


SAFE_SLUG = re.compile(r"^[a-z0-9_-]([a-z0-9._-]{0,62}[a-z0-9_-])?$")


def names(n: int, tmp: Path, seed: int = 0, cli_every: int = 25) -> fz.Tally:
    """Workload names made of dots, slashes, reserved names, non-ASCII and very long runs: every slug is a safe,
    bounded folder name; every `cli_every`-th one is plotted for real, and everything lands under --out."""
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app
    from cascade_plan.inputs.ids import slug

    rng, tally, runner = random.Random(seed), fz.Tally(), CliRunner()
    good = (ROOT / "workloads" / "rl-rollouts-64.yaml").read_text()
    for i in range(n):
        name = random_name(rng)
        s = slug(name)
        outcome = "answered"
        if not SAFE_SLUG.match(s) or ".." in s or s.endswith((".md", ".png", ".svg", ".json")) or len(s) > 64:
            outcome = f"unsafe slug: {s!r}"
        elif cli_every and i % cli_every == 0:
            case = tmp / f"name-{i}"
            (case / "out").mkdir(parents=True)
            wl = case / "w.yaml"
            wl.write_text(good.replace("schema_version: 1", f"schema_version: 1\nname: {json.dumps(name)}", 1))
            out = case / "out" / "plots"
            res = runner.invoke(app, ["plot", str(wl), "--out", str(out), "--kind", "steps", "--compare-hardware", ""])
            outcome = _cli_outcome(res, {0, 2})
            stray = [p for p in case.rglob("*") if p.is_file() and p != wl and out not in p.parents]
            if stray:
                outcome = f"written outside --out: {stray[0]}"
            __import__("shutil").rmtree(case, ignore_errors=True)
        tally.add(outcome if is_defect(outcome) else outcome.split(":")[0], repr(name), 0)
    return tally


def _cli_outcome(res, ok_codes) -> str:
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return f"traceback: {type(res.exception).__name__}: {str(res.exception)[:120]}"
    if res.exit_code not in ok_codes:
        return f"wrong exit {res.exit_code}: {res.stderr.strip()[:160]}"
    if res.exit_code == 2:
        return "refused" if len(res.stderr.strip().splitlines()) == 1 else "multi-line error"
    return "answered"


# ---- existing --out folders -----------------------------------------------------------------------------

USER_FILES = ["README.md", "notes.md", "fig.png", "draft.svg", "data.csv", ".hidden", "report.md", "sub/ideas.md",
              "sub/deep/x.png", ".cascade-plan-report", "rl-rollouts-64/steps.png", "a.md.tmp"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def out_folders(n: int, tmp: Path, seed: int = 0) -> fz.Tally:
    """`report --out X` over a folder that already holds a random mix of the user's files, a forged marker, an
    earlier report (with or without a file the user added), or nothing: the user's files survive byte for
    byte (refused in one line), an earlier report or an empty folder is replaced, nothing lands beside X."""
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    rng, tally, runner = random.Random(seed), fz.Tally(), CliRunner()
    for i in range(n):
        case = tmp / f"out-{i}"
        out = case / "x"
        shape = rng.choice(["user", "user", "forged marker", "earlier report", "earlier report + user file", "empty"])
        if shape.startswith("earlier report"):
            first = runner.invoke(app, ["report", "beam-search", "--out", str(out), "--no-plots",
                                        "--compare-hardware", ""])
            assert first.exit_code == 0, first.output
        out.mkdir(parents=True, exist_ok=True)
        user = []
        if shape in ("user", "forged marker", "earlier report + user file"):
            for f in rng.sample(USER_FILES, rng.randint(1, 4)):
                if f == ".cascade-plan-report" and shape == "earlier report + user file":
                    continue
                (out / f).parent.mkdir(parents=True, exist_ok=True)
                (out / f).write_bytes(os.urandom(8))
                user.append(f)
            if shape == "forged marker":
                (out / ".cascade-plan-report").write_text(rng.choice(['{"kind": "cascade-plan-report", "format": 1, '
                                                                      '"files": []}', "hello", "{}"]))
        expect_refusal = bool(user) or shape == "forged marker"
        before = _snapshot(out)
        beside = sorted(p.name for p in case.iterdir())
        res = runner.invoke(app, ["report", "rl-rollouts-64", "--out", str(out), "--no-plots",
                                  "--compare-hardware", ""])
        outcome = _cli_outcome(res, {2} if expect_refusal else {0})
        after = _snapshot(out)
        if expect_refusal and after != before:
            outcome = "user file lost or changed"
        if not expect_refusal and outcome == "answered" and set(after) != {"report.md", ".cascade-plan-report"}:
            outcome = f"wrong exit: the report folder holds {sorted(after)}"
        if sorted(p.name for p in case.iterdir()) != beside:
            outcome = f"written outside --out: {sorted(p.name for p in case.iterdir())}"
        tally.add(outcome if is_defect(outcome) else outcome.split(":")[0], f"{shape}: {user}", 0)
        __import__("shutil").rmtree(case, ignore_errors=True)
    return tally


def signals(n: int, tmp: Path, seed: int = 0) -> fz.Tally:
    from fuzz_signals import signals as run

    return run(n, tmp, seed)


CLASSES = {"calibration fields": calibration_fields, "json duplicates": json_duplicates, "special files": special_files,
           "names": names, "out folders": out_folders, "signals": signals}
LIBRARY_CLASSES = ("calibration fields", "json duplicates", "special files", "names")
