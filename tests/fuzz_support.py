"""Generated and mutated inputs for the robustness fuzz (tests/test_fuzz.py runs a bounded profile in
CI; benchmarks/fuzz_campaign.py runs a long one and prints the figures).

Every input goes through the calls the CLI makes (load the workload, pick the cost parameters,
estimate, capacity, engine gate, JSON) and is classified by `run_workload`:

- "refused":   InputError (the CLI prints one line and exits 2), the contract for bad input;
- "answered":  a result whose every number is finite and non-negative, and that keeps the
               invariants (no sharing -> cascade never faster; verdict agrees with the run speedup;
               cascade reads no more KV than per-sequence);
- anything else is a defect: "traceback" (another exception), "non-finite" / "negative" (a number in
  the JSON), "invariant" (an invariant broken).
"""

from __future__ import annotations

import contextlib
import json
import math
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

MODELS = ["llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mixtral-8x7b", "deepseek-v3", "mistral-7b"]
HARDWARE = ["h100-sxm", "h200", "a100-80gb", "l40s", "b200", "mi300x"]
MODES = ["ideal", "default", "calibrated", "calibrated:triton", "calibrated:torch", "calibrated:flashinfer-fa2"]

EXTREME_INTS = [0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**7, 10**8, 10**9, 10**12, 10**30]
odd_values = st.one_of(
    st.sampled_from(EXTREME_INTS), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.none(), st.booleans(),
    st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)
tokens = st.one_of(st.integers(0, 8192), st.integers(0, 8192), st.sampled_from([0, 1, 16, 4096, 32768, 10**6]))
small_count = st.one_of(st.integers(1, 8), st.integers(1, 256), st.sampled_from([1, 64, 1000]))
outputs = st.one_of(st.integers(1, 600), st.integers(1, 20000), st.sampled_from([1, 2, 8192, 8193, 10**5, 10**7]))


def _maybe(strategy, odd_rate: int):
    """`strategy`, or (one time in odd_rate) a value of the wrong type or far out of range."""
    return st.integers(0, odd_rate - 1).flatmap(lambda i: odd_values if i == 0 else strategy)


def leaf(odd: int):
    optional = {"copies": _maybe(small_count, odd), "private_tokens": _maybe(tokens, odd), "name": st.text(max_size=6)}
    if odd < 6:
        optional["bogus"] = odd_values           # an unknown field, in the aggressive profile only
    return st.fixed_dictionaries(
        {"tokens": _maybe(tokens, odd), "samples": _maybe(small_count, odd), "output_tokens": _maybe(outputs, odd)},
        optional=optional)


def trees(odd: int):
    return st.recursive(leaf(odd), lambda kids: st.fixed_dictionaries(
        {"tokens": _maybe(tokens, odd), "children": st.lists(kids, min_size=1, max_size=4)},
        optional={"copies": _maybe(small_count, odd)}), max_leaves=8)


def workloads(odd: int = 60):
    """Workload documents: mostly valid, one field in `odd` of the wrong type or out of range."""
    return st.fixed_dictionaries(
        {"schema_version": _maybe(st.just(1), odd * 3), "model": _maybe(st.sampled_from(MODELS + [
            str(DATA / "tiny-gqa-config.json"), str(DATA / "tiny-mla-moe-config.json")]), odd * 2),
         "tree": trees(odd)},
        optional={"hardware": _maybe(st.sampled_from(HARDWARE), odd * 2),
                  "kv_dtype": _maybe(st.sampled_from(["bf16", "fp8", "int4"]), odd * 2),
                  "weight_dtype": _maybe(st.sampled_from(["bf16", "fp8"]), odd * 2),
                  "tp": _maybe(st.sampled_from([1, 2, 4, 8]), odd * 2),
                  "prefix_caching": _maybe(st.booleans(), odd * 2),
                  "block_size": _maybe(st.sampled_from([1, 16, 256]), odd * 2)})


def no_sharing_workloads():
    """Trees in which no node is shared by two sequences: every leaf instance has one sequence and
    every node above the leaves carries no tokens."""
    lone = st.fixed_dictionaries({"tokens": tokens, "samples": st.just(1), "output_tokens": outputs},
                                 optional={"copies": small_count, "private_tokens": tokens})
    tree = st.one_of(lone, st.fixed_dictionaries({"tokens": st.just(0), "children": st.lists(lone, min_size=1,
                                                                                             max_size=5)},
                                                 optional={"copies": small_count}))
    return st.fixed_dictionaries({"schema_version": st.just(1), "model": st.sampled_from(MODELS), "tree": tree,
                                  "hardware": st.sampled_from(HARDWARE), "prefix_caching": st.booleans(),
                                  "kv_dtype": st.sampled_from(["bf16", "fp8"])})


HF_FIELDS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
             "intermediate_size", "head_dim", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "num_local_experts",
             "num_experts_per_tok", "moe_intermediate_size", "sliding_window", "mlp_only_layers", "tie_word_embeddings",
             "first_k_dense_replace", "n_shared_experts", "text_config"]
HW_FIELDS = ["hbm_bytes_per_s", "memory_bytes", "dense_bf16_flop_per_s", "dense_fp8_flop_per_s", "l2_bytes", "sm_count",
             "sources", "id", "vendor"]
TINY = [1e-300, 0, -1, float("inf"), float("nan"), "4.8e12", 1e300, 2**64, None]


def _mutated(base: dict, fields: list[str]):
    """`base` with up to two fields replaced by a wrong or extreme value, or removed."""
    edit = st.tuples(st.sampled_from(fields), st.one_of(odd_values, st.sampled_from(TINY), st.just("<remove>")))
    return st.lists(edit, max_size=2).map(lambda edits: _apply(base, edits))


def _apply(base: dict, edits) -> dict:
    out = dict(base)
    for key, value in edits:
        if value == "<remove>":
            out.pop(key, None)
        else:
            out[key] = value
    return out


def model_configs():
    from cascade_plan.inputs.model_presets import PRESETS

    bases = [cfg for _, cfg, _, _ in PRESETS.values()] + [json.loads((DATA / n).read_text()) for n in
                                                         ("tiny-gqa-config.json", "tiny-mla-moe-config.json")]
    return st.sampled_from(bases).flatmap(lambda b: _mutated(b, HF_FIELDS))


def hardware_profiles():
    base = yaml.safe_load((ROOT / "hardware_profiles" / "h200.yaml").read_text())
    return _mutated(base, HW_FIELDS)


def workloads_with_files():
    """A workload whose model is a generated config.json and hardware a generated profile."""
    return st.tuples(workloads(), model_configs(), hardware_profiles()).map(
        lambda t: ({**t[0], "model": "model/config.json", "hardware": "gpu.yaml"},
                   {"model/config.json": json.dumps(t[1], allow_nan=True), "gpu.yaml": dump(t[2])}))


CAL_PATHS = [("device", "l2_bytes"), ("ceilings", "hbm_read_bytes_per_s"), ("ceilings", "bf16_matmul_flop_per_s"),
             ("measurements",), ("measurements", 7, "median_s"), ("measurements", 900, "config", "prefix_tokens"),
             ("measurements", 1500, "backend"), ("fitted",), ("fitted", "kv_dtypes", "bf16"),
             ("fitted", "ceilings", "hbm_read_bytes_per_s")] + [
    ("fitted", "kv_dtypes", "bf16", b, k, f) for b in ("flashinfer", "triton", "torch")
    for k in ("decode_shared", "prefix", "suffix")
    for f in ("bw_bytes_per_s", "flop_per_s", "overhead_s", "l2_hit_max", "l2_bytes_per_s", "surface")]


def calibration_edits():
    """Up to two (path, value) edits of the shipped calibration file."""
    return st.lists(st.tuples(st.sampled_from(CAL_PATHS), st.one_of(odd_values, st.sampled_from(TINY),
                                                                   st.just("<remove>"))), min_size=1, max_size=2)


def edited_calibration(doc: dict, edits) -> dict:
    doc = json.loads(json.dumps(doc))
    for path, value in edits:
        node = doc
        for part in path[:-1]:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                node = None
                break
        if isinstance(node, (dict, list)):
            key = path[-1]
            if value == "<remove>" and isinstance(node, dict):
                node.pop(key, None)
            elif isinstance(node, dict) or (isinstance(key, int) and key < len(node)):
                node[key] = None if value == "<remove>" else value
    return doc


def run_calibration(doc: dict, backend: str | None, tmp: Path) -> str:
    """Classify a calibration file through what `estimate --calibration FILE --force` does."""
    from cascade_plan.cost.estimate import estimate, to_json
    from cascade_plan.errors import InputError
    from cascade_plan.inputs.choices import ParamsChoice
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.planning.params_select import select_params

    path = tmp / "cal.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    try:
        scn = load_scenario(ROOT / "workloads" / "rl-rollouts-64.yaml", "h200")
        return check_answer(estimate(scn, select_params(scn, ParamsChoice(backend=backend, calibration=path,
                                                                          force=True))), to_json)
    except InputError as exc:
        return "refused" if "\n" not in str(exc) else "multi-line error"
    except Exception as exc:                         # noqa: BLE001 - the defect being counted
        return f"traceback: {type(exc).__name__}: {str(exc)[:120]}"


def what_if_options():
    """Nothing, or one what-if hardware option with a number, a unit, junk or an extreme."""
    value = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(str), st.text(max_size=8),
                      st.sampled_from(["4.8", "4800GB/s", "1e-300", "1e300", "0", "-1", "96MiB", "1.2 PFLOP/s"]))
    option = st.sampled_from(["--hbm-bandwidth", "--memory", "--bf16-tflops", "--l2"])
    return st.one_of(st.just([]), st.tuples(option, value).map(list))


# Text-level mutations the YAML parser and the line map must survive.
TEXT_MUTATIONS = [
    lambda t: t,
    lambda t: t,
    lambda t: t,
    lambda t: t,
    lambda t: t + t.splitlines()[-1] + "\n",                                     # duplicate the last key
    lambda t: "x: &a [1, 2]\n" + t.replace("tokens: 0", "tokens: *a", 1),       # an alias
    lambda t: t[: len(t) // 2],                                                 # truncated
    lambda t: t.replace("\n", "\n\x00", 1),                                     # a NUL byte
    lambda t: t.replace("tokens:", "1:", 1),                                    # an integer key
    lambda t: t + "extra: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
    lambda t: "\ufeff" + t,                                                     # a BOM
]


@dataclass
class Tally:
    tried: int = 0
    outcomes: dict = field(default_factory=dict)
    peak_bytes: int = 0
    examples: dict = field(default_factory=dict)       # outcome -> first input text that produced it

    def add(self, outcome: str, text: str, peak: int) -> None:
        self.tried += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.peak_bytes = max(self.peak_bytes, peak)
        self.examples.setdefault(outcome, text)


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc


_LOADED: dict = {}


@contextlib.contextmanager
def _calibration_read_once():
    """The shipped calibration file is read and checked once per process, not once per example: its 2.6 MB
    cost 0.15 s to load, 0.8 s under tracemalloc, most of each calibrated example. Its reading is fuzzed
    by test_edited_calibration_files; here the workload is."""
    from cascade_plan.calibration import calibration_file as pc

    original = getattr(pc, "load_probe", None)
    if original is None:
        yield
        return

    def load_probe(path):
        key = str(path)
        if key not in _LOADED:
            _LOADED[key] = original(path)
        return _LOADED[key]

    pc.load_probe = load_probe
    try:
        yield
    finally:
        pc.load_probe = original


def _params(mode: str, scn):
    from cascade_plan.inputs.choices import ParamsChoice
    from cascade_plan.planning.params_select import select_params

    if mode == "ideal":
        return select_params(scn, ParamsChoice(ideal=True))
    if mode == "default":
        return select_params(scn, ParamsChoice(uncalibrated=True))
    backend = mode.partition(":")[2] or None
    cal = next((ROOT / "calibrations").glob("h200-*.json"))
    with _calibration_read_once():
        return select_params(scn, ParamsChoice(backend=backend, calibration=cal, force=True))


def check_answer(est, to_json) -> str:
    """"answered" or the defect class of a finished estimate."""
    import numpy as np

    doc = to_json(est, "fuzz")
    for where, value in _numbers(doc):
        if not math.isfinite(value):
            return "non-finite"
        if value < 0:
            return "negative"
    json.dumps(doc, allow_nan=False)
    c, flat = est.costs, est.flat
    if np.any(c.cas_prefix_bytes + c.cas_suffix_bytes > c.ps_attention_bytes * (1 + 1e-9) + 1e-6):
        return "invariant"
    per_instance = np.zeros(flat.node_tokens.size)
    np.add.at(per_instance, flat.pair_node, flat.pair_seqs)
    if not np.any(per_instance > 1):                 # nothing shared: cascade is never faster
        if est.run_speedup > 1 + 1e-12 or np.any(c.cas_step_s < c.ps_step_s * (1 - 1e-12)):
            return "invariant"
    v = est.verdict
    if v.level in ("go", "marginal", "no-go"):      # judged (not "does-not-fit" or "undecided")
        if (v.level == "go" and est.run_speedup <= 1.0) or (est.run_speedup < 1.0 and v.level != "no-go"):
            return "invariant"
        if v.speedup_range is None and f"{est.run_speedup:.2f}x" not in v.text:
            return "invariant"                      # the verdict quotes the speedup line's number
    return "answered"


def run_workload(text: str, mode: str, tmp: Path, files: dict | None = None) -> tuple[str, int]:
    """Classify one workload text (and the files it refers to) through the library calls the CLI
    makes; (outcome, peak bytes)."""
    from cascade_plan.cost.capacity import capacity
    from cascade_plan.cost.estimate import estimate, to_json
    from cascade_plan.engine.engine_gate import engine_view
    from cascade_plan.errors import InputError
    from cascade_plan.inputs.workload import load_scenario

    for name, content in (files or {}).items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(content)
    path = tmp / "w.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    tracemalloc.start()
    try:
        try:
            scn = load_scenario(path)
            est = estimate(scn, _params(mode, scn))
            capacity(scn, flat=est.flat)
            engine_view(est)
            outcome = check_answer(est, to_json)
        except InputError as exc:
            outcome = "refused" if "\n" not in str(exc) else "multi-line error"
        except Exception as exc:                     # noqa: BLE001 - the defect being counted
            outcome = f"traceback: {type(exc).__name__}: {str(exc)[:120]}"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return outcome, peak


def dump(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


DEFECTS = ("traceback", "non-finite", "negative", "invariant", "multi-line error")


def is_defect(outcome: str) -> bool:
    return outcome.startswith(DEFECTS)
