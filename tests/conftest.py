import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# Hypothesis budgets. "ci" (the default) runs each property with the max_examples its test states, sized for
# CI's two cores; HYPOTHESIS_PROFILE=thorough runs every property THOROUGH times as many examples (a pre-release
# or nightly run: `HYPOTHESIS_PROFILE=thorough python3 -m pytest -q -m "not gpu"`). "ci" draws the same examples
# on every run, so that a run's result depends on the commit alone; "thorough" draws new ones each time, which is
# where a property's counterexamples are found.
THOROUGH = 10
settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("thorough", deadline=None, max_examples=100 * THOROUGH)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def _reuse_click_commands() -> None:
    """typer's CliRunner.invoke converts the whole Typer app (19 commands, ~1,000 options) into click objects
    on every call: 0.1-0.4 s of each in-process CLI test, several minutes of the suite. The click command is
    rebuilt only when the app's registrations change; click creates a fresh context on each invocation, so
    nothing carries over from one run to the next."""
    import typer.testing

    build = typer.testing._get_command
    built: dict[int, tuple] = {}

    def get_command(app):
        state = (len(app.registered_commands), len(app.registered_groups), app.registered_callback)
        hit = built.get(id(app))
        if hit is None or hit[0] is not app or hit[1] != state:
            hit = built[id(app)] = (app, state, build(app))
        return hit[2]

    typer.testing._get_command = get_command


WORKERS = 2      # CI's machines have two cores


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Where pytest-xdist is installed (the test extra), the suite runs on WORKERS processes unless the command
    line says otherwise: `-n 0` runs it in one process, `-n N` on N; --pdb and --collect-only run in one."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is None and not config.getoption("usepdb") and not config.getoption("collectonly"):
        config.option.numprocesses = WORKERS
    if config.option.dist == "no":
        # tests marked xdist_group run on one worker: the Spark tests share one JVM (getOrCreate), ~15 s less
        config.option.dist = "loadgroup"


TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist's workers start with COLUMNS=80 and LINES=24 in their environment (a terminal size the run does not
    have): tables then wrap at 80 columns where a plain run prints them whole. Each worker gets the run's own."""
    node.workerinput["terminal_size"] = {k: os.environ.get(k) for k in TERMINAL_SIZE}


def pytest_configure(config):
    _reuse_click_commands()
    # Triton's interpreter on in every process before any test module imports triton: the probe's kernel tests
    # need it, and a module that imported triton first (the CPU compile of tests/test_kernel_pipelining runs in
    # a subprocess of its own) would make them skip on whichever worker it ran
    from kernels_probe.interpret import enable_interpreter

    enable_interpreter()
    size = getattr(config, "workerinput", {}).get("terminal_size")
    for key, value in (size or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# A kernel test skipped because triton was imported without the interpreter is a hole in the suite, not a machine
# without triton: the run fails and says which.
INTERPRETER_SKIPS = ("without TRITON_INTERPRET", "imported without the interpreter")
interpreter_skipped: list[str] = []


def _note_interpreter_skip(report) -> None:
    if report.skipped and any(words in str(report.longrepr) for words in INTERPRETER_SKIPS):
        interpreter_skipped.append(report.nodeid)


def pytest_collectreport(report):
    _note_interpreter_skip(report)


def pytest_runtest_logreport(report):
    _note_interpreter_skip(report)


def pytest_sessionfinish(session, exitstatus):
    if interpreter_skipped and exitstatus == 0 and not hasattr(session.config, "workerinput"):
        session.exitstatus = 1
        print(f"\nerror: {len(interpreter_skipped)} kernel tests skipped because triton was imported without the "
              f"interpreter first: {', '.join(sorted(set(interpreter_skipped))[:5])}")


def pytest_collection_modifyitems(config, items):
    """The tests marked slow run first (in their own order): xdist hands out work in collection order, so a
    10-50 s test started last would leave the other worker idle at the end of the run. Under the thorough
    profile, a test's own @settings(max_examples=N) becomes THOROUGH x N (a test's settings win over any
    profile, so the profile alone would not lengthen them)."""
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("slow") is None)
    if PROFILE != "thorough":
        return
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples < 100 * THOROUGH:
            test._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * THOROUGH)


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def data() -> Path:
    return DATA


# The Spark tests' local session: two cores and two shuffle partitions (Spark's 200 partitions run 200 tasks
# per stage over a few dozen log lines), and a JVM that starts fast (C1 JIT only, serial GC): together about
# 3x less time than the defaults on two cores. Two partitions, not one, so that the job still merges partial
# aggregates as it does on a cluster. A variable the user set wins.
SPARK_TEST_ENV = {
    "SPARK_MASTER": "local[2]",
    "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.shuffle.partitions=2 --conf spark.default.parallelism=2"
                           " --driver-java-options '-XX:+UseSerialGC -XX:TieredStopAtLevel=1' pyspark-shell",
}


@pytest.fixture
def local_spark(monkeypatch):
    """For a test that runs `analyze --engine spark` in process: the first such test on a worker starts the
    JVM with SPARK_TEST_ENV, the others reuse it (getOrCreate)."""
    for key, value in SPARK_TEST_ENV.items():
        if key not in os.environ:
            monkeypatch.setenv(key, value)


# `validate` on the shipped H200 probe file takes 5-15 s (every held-out row and whole step priced again). The
# tests that read its answer share one run per worker: each is marked xdist_group("validate") so that one
# worker runs them all.
@pytest.fixture(scope="session")
def h200_validation(h200_validate_command):
    """validate() of the shipped H200 probe file as `validate --json` prints it (its keys, plus the steps and the
    file's name): the same computation, read from the one shared run instead of a second one; read-only."""
    return h200_validate_command[0]


@pytest.fixture(scope="session")
def h200_validate_command(tmp_path_factory):
    """`cascade-plan validate H200-FILE --json --plots DIR` run once: (its JSON document, DIR)."""
    import json

    from typer.testing import CliRunner

    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.cli.app import app
    from cascade_plan.inputs.hardware import load_hardware

    plots = tmp_path_factory.mktemp("validate-plots")
    path = find_committed(load_hardware("h200")).path
    res = CliRunner().invoke(app, ["validate", str(path), "--json", "--plots", str(plots)])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), plots
