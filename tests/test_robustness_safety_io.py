"""The safety review's reproducers, second half (defects 6-9): Ctrl-C one line and exit 130, bad input no longer
silently accepted, killed runs' temporaries cleaned, one report per folder at a time. The first half
(data loss, calibration schema, special files, names) is tests/test_robustness_safety.py."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_support import AIC_H100, ENV, GOOD, PROBE_H200, ROOT, TINY, refused, run, runner, tree_files  # noqa: F401

# ---- 6: tracebacks -------------------------------------------------------------------------------

@pytest.mark.parametrize("limit, ok", [("1PB", True), ("4GiB", True), ("2PB", False), ("1EB", False),
                                       ("9" * 30 + "TB", False), ("1MB", False)])
def test_memory_limit(tmp_path, limit, ok):
    from cascade_plan.cli.logs_cli import check_memory_limit
    from cascade_plan.errors import InputError

    if ok:
        assert check_memory_limit(limit).endswith("KiB")
    else:
        with pytest.raises(InputError, match="--memory-limit"):
            check_memory_limit(limit)


def _interrupt(args, delay, cwd):
    p = subprocess.Popen([sys.executable, "-m", "cascade_plan", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=cwd, env=ENV)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    return p.returncode, err


@pytest.mark.parametrize("delay", [0.2, 0.35, 0.5])
def test_ctrl_c_at_start_up_is_one_line_and_130(tmp_path, delay):
    code, err = _interrupt(["estimate", "rl-rollouts-64"], delay, tmp_path)
    if code == 0:
        pytest.skip("the command finished before the signal")
    if "init_import_site" in err:
        pytest.skip("the signal came while the interpreter itself started, before any of this package ran")
    assert code == 130 and err.strip() == "interrupted", (code, err)


def test_ctrl_c_while_typer_parses_is_carried_to_the_one_line():
    """Typer answers a Ctrl-C while it parses the command line with a silent exit status 130 (no "interrupted");
    the group carries it past typer as Interrupted, which entry.main turns into the one line."""
    import typer

    from cascade_plan.cli.interrupts import Interrupted
    from cascade_plan.cli.one_line_errors import OneLineErrorGroup

    def ctrl_c(value: str) -> str:
        raise KeyboardInterrupt

    app = typer.Typer(cls=OneLineErrorGroup)

    @app.command()
    def one(name: str = typer.Option("x", callback=ctrl_c)) -> None:
        pass

    @app.command()
    def two() -> None:
        pass

    with pytest.raises(Interrupted):
        typer.main.get_command(app).main(args=["one", "--name", "y"], standalone_mode=True)


def test_a_ctrl_c_wrapped_by_python_is_still_a_ctrl_c():
    """A Ctrl-C landing in a descriptor's __set_name__ while a module defines a class reaches entry.main as a
    RuntimeError (Python 3.11 wraps it); it is an interrupt all the same, and any other error stays an error."""
    from cascade_plan.cli.entry import from_interrupt

    class Lands:
        def __set_name__(self, owner, name):
            raise KeyboardInterrupt

    try:
        type("Defined", (), {"attr": Lands()})
    except BaseException as exc:      # a RuntimeError on Python 3.11; 3.12 lets the KeyboardInterrupt through
        caught = exc
    assert from_interrupt(caught)
    assert not from_interrupt(RuntimeError("a bug")) and not from_interrupt(ValueError("bad input"))


def test_ctrl_c_during_a_report_leaves_nothing(tmp_path):
    code, err = _interrupt(["report", "--out", tmp_path / "rep", "-j", "2"], 3.0, tmp_path)   # every workload: ~15 s
    if code == 0:
        pytest.skip("the report finished before the signal")
    assert code == 130 and err.strip() == "interrupted", (code, err)
    assert list(tmp_path.iterdir()) == []


def test_duckdb_interrupt_becomes_keyboard_interrupt(monkeypatch):
    from cascade_plan.logs import duck_reader

    def boom(*a, **k):
        raise RuntimeError("Query interrupted")
    monkeypatch.setattr(duck_reader, "_read_logs", boom)
    with pytest.raises(KeyboardInterrupt):
        duck_reader.read_logs([])


# ---- 7: bad input silently accepted -----------------------------------------------------------------

def test_json_duplicate_keys_are_refused_naming_the_key(tmp_path):
    text = TINY.read_text().replace('"num_hidden_layers": 4,', '"num_hidden_layers": 4, "num_hidden_layers": 128,')
    cfg = tmp_path / "config.json"
    cfg.write_text(text)
    refused(run("estimate", "--model", cfg, "--hardware", "h100", "--prefix", "100", "--samples", "2",
                "--output-tokens", "8"), "duplicate key 'num_hidden_layers'")
    cal = tmp_path / "cal.json"
    cal.write_text(AIC_H100.read_text().replace('"schema_version":1,', '"schema_version":1,"schema_version":1,', 1))
    refused(run("estimate", "rl-rollouts-64", "--hardware", "h100", "--calibration", cal),
            "duplicate key 'schema_version'")


def test_yaml_base_60_is_never_a_number(tmp_path):
    wl = tmp_path / "w.yaml"
    wl.write_text(GOOD.read_text().replace("tokens: 4096", "tokens: 1:30", 1))
    refused(run("estimate", wl, "--json"), "tokens")
    from cascade_plan.inputs.yaml_source import load_yaml

    p = tmp_path / "x.yaml"
    p.write_text("a: 1:30\nb: 190:20:30.15\nc: 90\nd: 1_000\ne: 0x10\nf: 1.5\n")
    assert load_yaml(p).data == {"a": "1:30", "b": "190:20:30.15", "c": 90, "d": 1000, "e": 16, "f": 1.5}


@pytest.mark.parametrize("edit, fragment", [
    (lambda t: t.replace("hbm_bytes_per_s: ", "hbm_bytes_per_s: '", 1).replace("\nmemory_bytes", "'\nmemory_bytes", 1),
     "hbm_bytes_per_s"),
    (lambda t: t.replace("id: h200", 'id: "h200\\nevil"', 1), "id"),
    (lambda t: t.replace("id: h200", "id: ../../h200", 1), "id"),
])
def test_hardware_profiles_are_typed_strictly(tmp_path, edit, fragment):
    hw = tmp_path / "gpu.yaml"
    text = (ROOT / "hardware_profiles" / "h200.yaml").read_text()
    new = edit(text)
    assert new != text
    hw.write_text(new)
    refused(run("estimate", "rl-rollouts-64", "--hardware", hw), fragment)


def _log(tmp_path, records, name="l.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


COMPACT = {"ts": 1.0, "replica": "r0", "batch": 64, "prefix": 4096, "siblings": 64, "private": 100}
SEQS = {"ts": 1.0, "replica": "r0", "seqs": [{"request": "a", "group": "g", "shared": 4096, "private": 5}]}


@pytest.mark.parametrize("bad", [64.7, "64", True, None, [64], 1e3])
def test_log_counts_must_be_json_integers(tmp_path, bad):
    from cascade_plan.logs.duck_reader import read_logs
    from cascade_plan.logs.sources import expand

    compact = [COMPACT, {**COMPACT, "ts": 2.0, "batch": bad}]
    seqs = [SEQS, {**SEQS, "ts": 2.0, "seqs": [{**SEQS["seqs"][0], "shared": bad}]}]
    for records, name in ((compact, "c.jsonl"), (seqs, "s.jsonl")):
        t = read_logs(expand([str(_log(tmp_path, records, name))]))
        assert t.files[0][1:] == (2, 1), (name, t.files)


def test_route_log_refuses_an_all_malformed_log(tmp_path):
    log = _log(tmp_path, [{**COMPACT, "batch": 6.5}, {"x": 1}])
    refused(run("analyze", log, "--model", "llama-3-8b"), "no valid decode step")
    refused(run("route", "--model", "llama-3-8b", "--hardware", "h200", "--log", log), "no valid decode step")


def test_a_truncated_zst_log_is_an_error(tmp_path):
    import duckdb

    src = _log(tmp_path, [{**COMPACT, "ts": float(i)} for i in range(20_000)])
    full = tmp_path / "full.jsonl.zst"
    duckdb.sql(f"COPY (SELECT * FROM read_json_objects('{src}', format='newline_delimited')) TO '{full}' "
               "(FORMAT csv, HEADER false, QUOTE '', COMPRESSION zstd)")
    data = full.read_bytes()
    from cascade_plan.errors import InputError
    from cascade_plan.logs.sources import check_zstd_complete

    check_zstd_complete(str(full))
    for cut in (len(data) - 1, len(data) // 2, 5, 1):
        part = tmp_path / f"cut{cut}.jsonl.zst"
        part.write_bytes(data[:cut])
        with pytest.raises(InputError, match="truncated|not a zstd"):
            check_zstd_complete(str(part))
    part = tmp_path / "cut.jsonl.zst"
    part.write_bytes(data[: len(data) // 2])
    refused(run("analyze", part, "--model", "llama-3-8b"), "truncated")


def test_workloads_path_takes_shipped_names_only():
    refused(run("workloads", "--path", "/etc/passwd"), "name of a shipped workload")
    refused(run("workloads", "--path", "passwd"), "not a shipped workload")
    assert run("workloads", "--path", "RL-rollouts-64.yaml").stdout.strip().endswith("rl-rollouts-64.yaml")


def test_probe_and_calibrate_never_overwrite_a_workload(tmp_path):
    wl = tmp_path / "wl.yaml"
    wl.write_text(GOOD.read_text())
    refused(run("probe", "--out", wl, "--quick"), "not a cascade-plan calibration")
    refused(run("calibrate", PROBE_H200, "--out", wl), "not a cascade-plan calibration")
    assert wl.read_text() == GOOD.read_text()


# ---- 8: temporary files of killed runs --------------------------------------------------------------

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_dead_or_zombie_writers_temporary_is_removed_and_a_live_one_kept(tmp_path):
    import fcntl

    from cascade_plan.atomic import write_text_atomic

    out = tmp_path / "out.json"
    dead = tmp_path / f".out.json.{_dead_pid()}.abcd1234.tmp"
    dead.write_text("half")
    zombie_proc = subprocess.Popen([sys.executable, "-c", "pass"])      # exits; not reaped until wait()
    time.sleep(0.5)
    zombie = tmp_path / f".out.json.{zombie_proc.pid}.zzzz1234.tmp"
    zombie.write_text("half")
    live = tmp_path / f".out.json.{os.getppid()}.live1234.tmp"        # a live process holding its lock
    live.write_text("being written")
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        write_text_atomic(out, "{}")
    finally:
        os.close(fd)
        zombie_proc.wait()
    assert not dead.exists() and not zombie.exists() and live.exists()


def test_after_sigkill_the_next_run_removes_the_temporary(tmp_path):
    out = tmp_path / "sim.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "cascade_plan", "simulate-log", "rl-rollouts-64", "--out", str(out)],
                         env=ENV, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline and not any(q.name.endswith(".tmp") for q in tmp_path.iterdir()):
        time.sleep(0.01)
    p.kill()                                        # not reaped yet: a zombie while the next run starts
    assert any(q.name.endswith(".tmp") for q in tmp_path.iterdir()), "the run finished before it was killed"
    res = subprocess.run([sys.executable, "-m", "cascade_plan", "simulate-log", "rl-rollouts-64", "--out", str(out)],
                         env=ENV, cwd=tmp_path, capture_output=True, text=True)
    p.wait()
    assert res.returncode == 0, res.stderr
    assert [q.name for q in tmp_path.iterdir()] == ["sim.jsonl"]


def test_a_killed_reports_folders_are_removed_by_the_next_report(tmp_path):
    (tmp_path / f".rep.{_dead_pid()}.abcdefgh.tmpdir").mkdir()
    (tmp_path / f".rep.{_dead_pid()}.abcdefgh.old").mkdir()
    (tmp_path / ".rep.cascade-plan.lock").write_text("")          # a killed holder's lock: free
    assert run("report", "rl-rollouts-64", "--out", tmp_path / "rep", "--no-plots").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


# ---- 9: concurrent reports into one folder ------------------------------------------------------------

def test_a_second_report_into_a_folder_being_written_says_so(tmp_path):
    from cascade_plan.report_folder import FolderLock

    out = tmp_path / "rep"
    lock = FolderLock(out.absolute(), "--out")
    try:
        refused(run("report", "rl-rollouts-64", "--out", out, "--no-plots"), "another cascade-plan report is writing")
    finally:
        lock.release()
    assert not out.exists()
    assert run("report", "rl-rollouts-64", "--out", out, "--no-plots").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


@pytest.mark.parametrize("bad", ["64.7", "true", "1e3", "x"])
def test_csv_log_counts_must_be_whole_numbers_and_the_locator_agrees(tmp_path, bad):
    from cascade_plan.logs.bad_lines import locate
    from cascade_plan.logs.duck_reader import read_logs
    from cascade_plan.logs.sources import expand

    log = tmp_path / "l.csv"
    log.write_text(f"ts,replica,batch,prefix,siblings,private\n1,r0,64,100,8,10\n2,r0,{bad},100,8,10\n"
                   "3,r0, 64.0 ,100,8,10\n")
    files = expand([str(log)])
    t = read_logs(files)
    assert t.files[0][1:] == (3, 1)
    assert [b.line for b in locate(files[0], t.forms[str(log)])] == [3]


def test_duckdbs_own_interrupt_error_is_the_one_line_interrupt():
    """A Ctrl-C during any DuckDB query surfaces as DuckDB's "Query interrupted" RuntimeError (seen in the
    signal campaign during analyze --workload-out): it is the interrupt, not a traceback; other errors pass."""
    from cascade_plan.cli.interrupts import Interrupted
    from cascade_plan.cli.interrupts import interruptible as _interruptible

    def query_interrupted():
        raise RuntimeError("Query interrupted")

    def broken():
        raise RuntimeError("something else")

    with pytest.raises(Interrupted):
        _interruptible(query_interrupted)()
    with pytest.raises(RuntimeError, match="something else"):
        _interruptible(broken)()
