"""The measured side of a calibration file as typed rows (cascade_plan/calibration_schema/): every shipped file and
the v1 file decode into them, a row's config converted back is the dict the file holds (the hold-out hash and
`validate`'s JSON rely on it), a shipped file's rows are decoded once per process, and a malformed row is refused
in one line naming the file, the list, the row and the field."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.calibration.calibration_file import ProbeData, find_committed, load_probe, read_shipped
from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration_schema.attention import AttentionConfigDoc
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import load_hardware

from cli_support import GOOD, PROBE_H200, ROOT, refused, run

SHIPPED = sorted((ROOT / "calibrations").glob("*.json"))
OLD_AIC = ROOT / "tests" / "data" / "calibration-v1-2026-11-30-a100-aic.json"
LISTS = ("measurements", "step_ops", "steps", "mla")


@pytest.fixture(scope="module")
def probe_doc() -> dict:
    return json.loads(PROBE_H200.read_text())


@pytest.mark.parametrize("path", [*SHIPPED, OLD_AIC], ids=lambda p: p.name)
def test_every_shipped_file_decodes_into_typed_rows(path):
    raw = json.loads(path.read_text())
    checked = load_probe(path)                        # the whole file checked at once
    lazy = ProbeData(str(path), raw)                  # decoded list by list on first use (shipped files)
    for name in LISTS:
        rows = getattr(checked, name)
        assert len(rows) == len(raw.get(name) or []), name
        assert rows == getattr(lazy, name), name
    for name in ("measurements", "mla"):              # configs round-trip: same keys, same order, same values
        for r, d in zip(getattr(checked, name), raw.get(name) or []):
            back = msgspec.to_builtins(r.config)
            assert back == d["config"] and list(back) == list(d["config"])
    assert checked.device == lazy.device and checked.ceilings == lazy.ceilings
    assert checked.grid == lazy.grid and checked.source == lazy.source and checked.crosscheck == lazy.crosscheck
    assert checked.device.l2_bytes == raw["device"]["l2_bytes"]
    assert checked.source_kind == ("aic" if raw.get("source_kind") == "aic" else "probe")


def test_the_probe_file_rows_by_hand():
    p = find_committed(load_hardware("h200"), "probe")
    # steps: 199 dense (the regimes step set's held-out steps among them) + 81 whole MoE / MLA + MoE; step_ops:
    # 1,780 (the small models' GEMMs, glue and layer graphs among them) + 16 moe_layer_graph (no-attention steps)
    # measurements: 3,879 + 264 FlashInfer rows of the probe 1.4 run (benchmarks/merge_h200_2026_12_05.py), less
    # 42 Triton fp8 rows and 18 fp8-KV Triton steps of probe 1.1's kernels (benchmarks/drop_superseded_triton_rows.py),
    # plus 16 FlashInfer regimes rows of 2026-12-06 and 82 Triton cascade rows at the rollout starts of the probe 1.4
    # run, and 28 Triton cascade rows of probe 1.5.5 at the seven regimes configurations that had no Triton rows
    # (benchmarks/merge_h200_2026_12_06.py)
    assert (len(p.measurements), len(p.step_ops), len(p.steps), len(p.mla)) == (4227, 1796, 280, 1038)
    assert p.decoded["notes"]["removed"][0]["sections"][0] == {
        "section": "measurements", "rows": 42, "runs": ["2026-12-01T09:33:00Z"], "workloads": []}
    raw = json.loads(Path(p.path).read_text())
    assert not [m for m in raw["measurements"] + raw["steps"] if m["backend"] == "triton"
                and (m.get("kv_dtype") or m["config"].get("kv_dtype")) == "fp8" and m["run"] < "2026-12-03"]
    # of which FlashInfer's three-level tree rows (2026-12-03b and 2026-12-04), validation only
    assert sum(m.config.root_tokens > 0 for m in p.measurements) == 264
    assert sum(not r.step_kind for r in p.steps) == 199
    assert sum(r.op == "moe_layer_graph" and r.model_config is not None for r in p.step_ops) == 16
    m = p.measurements[0]
    assert (m.backend, m.kernel, m.variant, m.config.prefix_tokens, m.config.kv_dtype) == \
        ("triton", "decode_shared", None, 256, "bf16")
    assert p.step_glue == "fused" and p.device.sm_count == 132
    assert {r.mode for r in p.steps} == {"per_sequence", "cascade"}
    layer = next(r for r in p.step_ops if r.op == "layer_graph")
    assert layer.per_layer_s is not None and layer.config.layers == 4


def test_the_v1_file_reads_typed():
    p = load_probe(OLD_AIC)
    assert p.measurements == [] and p.steps == [] and p.mla == []
    assert p.grid.head_dim == 128 and p.grid.axes.q_per_kv[:3] == [1, 2, 3] and p.grid.measured is None
    assert p.source is not None and p.source.label and p.source_kind == "aic"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_file_read_with_its_rows_still_json_types_the_same_rows(path):
    """read_shipped leaves the row lists as JSON: the typed rows are the checked file's, and `doc` (the file as
    data) is the file itself, every list included."""
    from cascade_plan.calibration import calibration_file

    raw = json.loads(path.read_text())
    calibration_file._DECODED.clear()       # a fresh read: another test's `doc` may have decoded the cached one
    checked, shipped = load_probe(path), ProbeData(str(path), read_shipped(path))
    lists = [name for name in calibration_file._RAW_LISTS if name in raw]
    assert lists and all(isinstance(shipped.decoded[name], msgspec.Raw) for name in lists)
    for name in LISTS:
        assert getattr(shipped, name) == getattr(checked, name), name
    assert shipped.fits == checked.fits and shipped.device == checked.device
    assert shipped.doc == raw and json.loads(json.dumps(shipped.doc)) == raw


def test_a_shipped_files_rows_are_decoded_once_per_process():
    hw = load_hardware("h200")
    a, b = find_committed(hw, "probe"), find_committed(hw, "probe")
    assert a is not b and a.measurements is b.measurements and a.step_ops is b.step_ops


def test_the_hold_out_hash_of_a_typed_config_is_the_files():
    cfg = {"prefix_tokens": 4096, "group_size": 64, "n_groups": 2, "suffix_tokens": 16, "q_per_kv": 4,
           "num_kv_heads": 8, "head_dim": 128, "kv_dtype": "fp8", "page_size": 16}
    typed = msgspec.convert(cfg, AttentionConfigDoc)
    from cascade_plan.calibration.holdout import config_key

    assert config_key(typed) == config_key(cfg) == json.dumps(cfg, sort_keys=True)
    for prefix in range(100, 160):            # the rule as the files' dicts were hashed before typed rows
        c = {**cfg, "prefix_tokens": prefix}
        sixth = int(hashlib.sha256(json.dumps(c, sort_keys=True).encode()).hexdigest(), 16) % 6 == 0
        assert is_held_out(msgspec.convert(c, AttentionConfigDoc)) == sixth


BAD_ROWS = [
    ("measurements", ("config", "group_size"), 0, "Expected `int` >= 1"),
    ("measurements", ("config", "kv_dtype"), "int4", "Invalid enum value 'int4'"),
    ("measurements", ("kernel",), None, "Expected `str`"),
    ("step_ops", ("median_s",), -1.0, "Expected `float` >= 0.0"),
    ("step_ops", ("config", "m"), "64", "Expected `int | null`"),
    ("steps", ("mode",), "both", "Invalid enum value 'both'"),
    ("steps", ("config", "generated"), -1, ">= 0"),
    ("mla", ("config", "num_heads"), 0, ">= 1"),
    ("mla", ("median_s",), 0.0, "> 0.0"),
]


def _with(doc: dict, name: str, index: int, field: tuple, value) -> dict:
    bad = copy.deepcopy(doc) if len(doc.get(name, ())) < 100 else {**doc, name: copy.deepcopy(doc[name])}
    target = bad[name][index]
    for part in field[:-1]:
        target = target[part]
    target[field[-1]] = value
    return bad


@pytest.mark.parametrize("name,field,value,message", BAD_ROWS, ids=lambda x: str(x))
def test_a_malformed_row_is_one_line_naming_file_list_row_and_field(tmp_path, probe_doc, name, field, value,
                                                                    message):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_with(probe_doc, name, 3, field, value)))
    where = f"{name}[3].{'.'.join(field)}"
    line = refused(run("validate", bad), "bad.json", where)
    assert message in line
    refused(run("estimate", GOOD, "--hardware", "h200", "--calibration", bad), "bad.json", where)


SMALL = {"device": {"l2_bytes": 6e7}, "ceilings": {"hbm_read_bytes_per_s": 4e12, "bf16_matmul_flop_per_s": 7e14}}
CONFIG_FIELDS = ("prefix_tokens", "group_size", "n_groups", "suffix_tokens", "q_per_kv", "num_kv_heads", "head_dim",
                 "page_size")


@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, 9), field=st.sampled_from(CONFIG_FIELDS),
       value=st.one_of(st.integers(max_value=-1), st.text(max_size=3), st.none(), st.floats(allow_nan=True),
                       st.integers(min_value=10**12)))
def test_any_bad_config_field_of_a_shipped_style_file_is_refused_where_it_is_read(index, field, value):
    """A ProbeData over a file decoded only (as shipped files are read) refuses a bad row on first use, naming it."""
    if field in ("prefix_tokens", "suffix_tokens") and isinstance(value, int) and not isinstance(value, bool) \
            and 0 <= value:
        return
    rows = [{"backend": "triton", "kernel": "decode_dup", "variant": None, "median_s": 1e-5,
             "config": {"prefix_tokens": 1024, "group_size": 4, "n_groups": 2, "suffix_tokens": 16, "q_per_kv": 4,
                        "num_kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16", "page_size": 16}} for _ in range(10)]
    rows[index]["config"][field] = value
    with pytest.raises(InputError) as e:
        ProbeData("x.json", {**SMALL, "measurements": rows}).measurements
    assert e.value.field == f"measurements[{index}].config.{field}" and e.value.file == "x.json"
    assert "\n" not in str(e.value) and "`" not in str(e.value)
