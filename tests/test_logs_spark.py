"""`analyze --engine spark` gives what the DuckDB engine gives (local mode). Skipped, with the
reason, without PySpark (the `spark` extra) or a Java runtime."""

import importlib.util
import json
import os
import shutil

import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app

pytestmark = [
    pytest.mark.slow,          # a Spark session in local mode: ~20 s
    pytest.mark.xdist_group("spark"),   # one worker, one JVM for every Spark test
    pytest.mark.usefixtures("local_spark"),   # conftest.py: two cores, two shuffle partitions, a fast JVM start
    pytest.mark.skipif(importlib.util.find_spec("pyspark") is None,
                       reason="PySpark is not installed (pip install '.[spark]')"),
    pytest.mark.skipif(not (os.environ.get("JAVA_HOME") or shutil.which("java")), reason="no Java runtime"),
]


def test_spark_engine_matches_duckdb(root, tmp_path):
    runner = CliRunner()
    seq = tmp_path / "seq.jsonl"
    runner.invoke(app, ["simulate-log", str(root / "workloads/system-prompt-document-samples.yaml"), "--out", str(seq)])
    lines = seq.read_text().splitlines()[:40]
    lines[3] = "{broken"
    lines[7] = lines[7].replace('"shared":14060', '"shared":-1', 1)
    seq.write_text("\n".join(lines) + "\n")
    compact = tmp_path / "compact.csv"
    compact.write_text("ts,replica,batch,prefix,siblings,private\n1,c,64,2048,16,10\n2,c,64,2048,16,x\n3,c,8,0,1,7\n")
    args = ["analyze", str(seq), str(compact), "--model", "llama-3-8b", "--json"]
    duck = json.loads(runner.invoke(app, args).stdout)
    res = runner.invoke(app, args + ["--engine", "spark"])
    assert res.exit_code == 0, res.output
    spark = json.loads(res.stdout)
    assert duck["malformed"] == 3 and duck["steps"] == 40 - 2 + 2
    for key in ("files", "records", "malformed", "steps", "requests", "distributions", "malformed_examples"):
        assert spark[key] == duck[key], key
    for key, value in duck["decode_time"]["overall"].items():
        assert spark["decode_time"]["overall"][key] == pytest.approx(value), key
