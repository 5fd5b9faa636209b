"""Every file of this repository that a comment, docstring or doc names exists: a path like
`cost/run_load.py` or `tests/test_x.py::test_name`, and a bare module name like `probe_calibration.py`.
Stale names (a `calibration.py` long split up, a test file renamed) sent readers to nothing."""

import re
import subprocess

import pytest

# Files of other projects that comments cite by name (vLLM's, SGLang's, AIConfigurator's, PyYAML's).
EXTERNAL = {"flash_attn.py", "gpu_model_runner.py", "single_type_kv_cache_manager.py", "collect_all_reduce.py",
            "scheduler.py", "radix_cache.py", "schedule_batch.py", "resolver.py"}
# Names the docs use for files a user writes (probe output, an example calibration to create). A `commit:path`
# (git show) names a file of the history and is not checked.
USER_FILES = {"calibrations/h200-mine.json"}
TOP = ("cascade_plan/", "kernels_probe/", "tests/", "benchmarks/", "scripts/", "docs/", "calibrations/", "workloads/",
       "hardware_profiles/", "schemas/", ".ci/")
PACKAGES = ("calibration/", "cost/", "cli/", "inputs/", "render/", "logs/", "serving/", "engine/")
REF = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|json|yaml|sh|toml)(?:\.gz)?)(::\w+)?\b")


def _tracked(root) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return out.split()


def _missing(root, tracked: list[str]) -> list[str]:
    have = set(tracked)
    names = {t.rsplit("/", 1)[-1] for t in tracked}
    folders = {t.rsplit("/", 1)[0] + "/" for t in tracked if "/" in t}
    tests = {}
    out = []
    for f in tracked:
        if (not f.endswith((".py", ".md", ".toml", ".sh")) or f.startswith("benchmarks/raw/")
                or f == "tests/test_references.py"):      # this file names missing files on purpose
            continue
        for n, line in enumerate((root / f).read_text(errors="replace").splitlines(), 1):
            for m in REF.finditer(line):
                ref, func = m.group(1), m.group(2)
                if ref in USER_FILES or ref in EXTERNAL:
                    continue
                if ref.startswith(TOP + PACKAGES):
                    cands = (ref, "cascade_plan/" + ref)
                    if not any(c in have or c + "/" in folders for c in cands):
                        out.append(f"{f}:{n}: {ref}")
                    elif func and ref.startswith("tests/"):
                        if ref not in tests:
                            tests[ref] = set(re.findall(r"^\s*def (\w+)", (root / ref).read_text(), re.M))
                        if func[2:] not in tests[ref]:
                            out.append(f"{f}:{n}: {ref}{func}")
                elif "/" not in ref and ref.endswith(".py") and ref not in names:
                    out.append(f"{f}:{n}: {ref}")
    return out


def test_every_named_file_of_the_repository_exists(root):
    assert _missing(root, _tracked(root)) == []


def test_a_stale_name_is_found(root, tmp_path):
    (tmp_path / "cascade_plan").mkdir()
    (tmp_path / "cascade_plan/a.py").write_text('"""See calibration.py and tests/test_robust_run.py; cost/a.py."""\n'
                                                "# tests/test_b.py::test_gone, tests/test_b.py::test_here\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_b.py").write_text("def test_here():\n    pass\n")
    found = _missing(tmp_path, ["cascade_plan/a.py", "tests/test_b.py"])
    assert found == ["cascade_plan/a.py:1: calibration.py", "cascade_plan/a.py:1: tests/test_robust_run.py",
                     "cascade_plan/a.py:1: cost/a.py", "cascade_plan/a.py:2: tests/test_b.py::test_gone"]
