"""Editor support: the committed workload JSON Schema is the one generated from the typed schema, it accepts
every shipped workload and rejects what the loader rejects; shell completion answers."""

import os
import subprocess
import sys

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from cascade_plan import InputError, builtin_workloads
from cascade_plan.cli.app import app
from cascade_plan.inputs.workload import parse_workload
from cascade_plan.inputs.workload_schema import schema_text, workload_json_schema


def test_committed_schema_matches_the_typed_schema(root):
    committed = (root / "schemas/workload.schema.json").read_text()
    assert committed == schema_text(), "regenerate: cascade-plan schema > schemas/workload.schema.json"
    assert CliRunner().invoke(app, ["schema"]).stdout == committed


def test_every_property_is_described():
    for name, struct in workload_json_schema()["$defs"].items():
        for field, prop in struct["properties"].items():
            assert prop.get("description"), f"{name}.{field}"


@pytest.mark.parametrize("path", list(builtin_workloads().values()), ids=lambda p: p.stem)
def test_schema_accepts_every_shipped_workload(path):
    jsonschema.validate(yaml.safe_load(path.read_text()), workload_json_schema())


@pytest.mark.parametrize("change", [
    {"tree": {"tokens": 5, "samples": 0, "output_tokens": 3}},
    {"tp": 65}, {"kv_dtype": "fp4"}, {"colour": "blue"}, {"checks": {"min_speedup": 2}}, {"schema_version": 2},
])
def test_schema_rejects_what_the_loader_rejects(change, tmp_path, root):
    doc = {**yaml.safe_load((root / "workloads/rl-rollouts-64.yaml").read_text()), **change}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, workload_json_schema())
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError):
        parse_workload(f)


def test_readme_points_editors_at_the_schema(root):
    readme = (root / "README.md").read_text()
    assert "schemas/workload.schema.json" in readme and "yaml-language-server" in readme
    assert "--install-completion" in readme


def _complete(words: str) -> list[str]:
    env = {**os.environ, "_CASCADE_PLAN_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - 1)}
    code = "import sys; sys.argv = ['cascade-plan']; from cascade_plan.cli.app import main; main()"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    return res.stdout.split()


def test_shell_completion_offers_commands_and_ids():
    assert "estimate" in _complete("cascade-plan est")
    assert _complete("cascade-plan estimate --hardware h2") == ["h200"]
    assert "llama-3-70b" in _complete("cascade-plan estimate --model llama")
