"""Page blocks of the probe's own decode over shared pages (cost/ops/page_blocks.py): the tokens a block reads once
for its siblings, by hand; the rule a calibration records only where it gives back every row's recorded launch; the
fit and the planner pricing them alike; and on the H100 run of probe 1.5.5 (benchmarks/raw/device-2026-12-06), the
held-out error of the Triton decode over shared pages with the blocks against without them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

from cascade_plan.calibration.calibration_file import ProbeData, find_committed
from cascade_plan.calibration.fitting import features, fit_l2, predict, predict_kind
from cascade_plan.calibration.holdout import held_out_regime, is_held_out
from cascade_plan.calibration.launch_rules import page_block_rule
from cascade_plan.calibration.probe_fit import calibrate
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration.step_validation import step_points
from cascade_plan.calibration.tree_validation import validate_trees
from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.cost.cost_model import gpu_shape, single_level_load
from cascade_plan.cost.ops import decode
from cascade_plan.cost.ops.context import StepContext
from cascade_plan.cost.ops.page_blocks import (
    PageBlocks,
    load_saved_tokens,
    longest_program,
    page_blocks_of,
    saved_tokens,
)
from cascade_plan.cost.step_shape import StepLoad
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset
from cascade_plan.own_kernel_blocks import longest_program_tokens, page_blocks
from cascade_plan.own_kernel_tune import DEFAULT_TUNE

ROOT = Path(__file__).resolve().parents[1]
H100_RUN = ROOT / "benchmarks" / "raw" / "device-2026-12-06" / "default.json.gz"
# the same run with Triton's regimes and trees rows and its whole steps merged in (this session's H100 calls)
H100_ALL = ROOT / "benchmarks" / "raw" / "device-2026-12-06b" / "h100-probe-1.5.5.json.gz"
RULE = PageBlocks(132, DEFAULT_TUNE)


def _fitted(path: Path) -> ProbeData:
    """A compressed probe run, fitted as `calibrate` fits it."""
    doc = json.loads(gzip.open(path).read())
    probe = ProbeData(Path(path.name.removesuffix(".gz")), doc)
    return ProbeData(probe.path, {**doc, "fitted": calibrate(probe)})


def _without_rule(probe: ProbeData) -> ProbeData:
    """The same fits with every backend's page-block rule taken out: blocks priced as if every sibling read its
    own pages."""
    fitted = probe.decoded["fitted"]
    no_rule = {kv: {b: {k: v for k, v in f.items() if k != "page_blocks"} for b, f in per.items()}
               for kv, per in fitted["kv_dtypes"].items()}
    return ProbeData(probe.path, {**probe.decoded, "fitted": {**fitted, "kv_dtypes": no_rule}})


@pytest.fixture(scope="module")
def h100_run() -> ProbeData:
    """The H100 run of probe 1.5.5's default grid."""
    return _fitted(H100_RUN)


@pytest.fixture(scope="module")
def h100_all() -> ProbeData:
    """The same run with this session's regimes, trees and whole-step rows merged in."""
    return _fitted(H100_ALL)


def test_a_block_reads_the_shared_run_once_for_its_siblings():
    # 256 sequences of one prompt, 8 KV heads x 4 query heads, 4,096 + 128 tokens on 132 SMs: 2,048 programs fill
    # the GPU (4 per SM), so one split of 4,224 tokens in 128-token tiles; blocks of 4 sequences (4 x 4 query rows
    # fill the dot's 16); the shared run is 4,096 tokens (32 whole tiles), read by one program for 4: 3/4 spared
    assert saved_tokens(RULE, 256, 8, 4, 256, 4096, 4224) == 3072.0
    # 8 query heads: blocks of 2, half spared; one query head: blocks of 16, capped at 8 by the programs they leave
    # (2,048 / 8 = 256 working programs, at least one per SM)
    assert saved_tokens(RULE, 256, 8, 8, 256, 4096, 4224) == 2048.0
    assert saved_tokens(RULE, 256, 8, 1, 256, 4096, 4224) == 4096 * 7 / 8
    # nothing shared, nobody to share with, or a tail longer than the shared run: no block
    assert saved_tokens(RULE, 256, 8, 4, 256, 0, 128) == 0.0
    assert saved_tokens(RULE, 256, 8, 4, 1, 4096, 4224) == 0.0
    assert saved_tokens(RULE, 256, 8, 4, 256, 1024, 1024 + 4096) == 0.0
    assert saved_tokens(None, 256, 8, 4, 256, 4096, 4224) == 0.0
    # arrays broadcast, each distinct shape priced once
    got = saved_tokens(RULE, np.array([[256], [4]]), 8, 4, np.array([[256], [4]]), 4096, np.array([4224, 4096]))
    assert got.shape == (2, 2) and got[0, 0] == 3072.0


def test_the_busiest_program_streams_the_shared_run_then_its_blocks_tails():
    # 256 x 8 KV heads, one query head per KV head, 16,384 + 128 tokens: unsplit (the batch fills the GPU) in
    # 128-token tiles, blocks of 8 (16 would leave fewer working programs than SMs); the first program of a block
    # reads the 16,384 shared tokens once and then 8 tails of 128
    assert page_blocks(256, 8, 1, 256, 16384, 16512, 132)["page_block_seqs"] == 8
    assert longest_program_tokens(256, 8, 1, 256, 16384, 16512, 132) == 16384 + 8 * 128
    # 64 sequences: three splits of 5,504 tokens; the last holds 5,376 shared tokens and the block's 8 tails
    assert longest_program_tokens(64, 8, 1, 64, 16384, 16512, 132) == 5376 + 8 * 128
    # G 8: blocks of two
    assert longest_program_tokens(256, 8, 8, 256, 16384, 16512, 132) == 16384 + 2 * 128
    # no block: the longest split (one sequence at 32K + 128: 65 splits of 512 tokens)
    assert longest_program_tokens(1, 8, 4, 1, 32768, 32896, 132) == 512
    # and the planner's step: 0 where no block can form, the program's tokens where one does
    assert longest_program(RULE, 1, 8, 4, 1, 32768, 32896) == 0.0
    assert longest_program(RULE, [256, 64], 8, 1, [256, 64], 16384, 16512).tolist() == [17408.0, 6400.0]


def test_the_fit_recovers_the_busiest_programs_time_per_token(h100_run):
    """Synthetic times at the run's own shapes over shared pages, from known parameters (a decode over private pages
    as the base, 80% of re-reads spared in L2 at 7 TB/s, 15 ns per token of the busiest program): fit_l2 finds the
    per-token time again."""
    fits = msgspec.convert(h100_run.fits.kv_dtypes["bf16"]["triton"], BackendFit)
    base = msgspec.structs.replace(fits.decode_dup, surface=None)
    cfgs = [r.config for r in h100_run.select("triton", "decode_shared", None, "bf16")]
    f = features("decode_shared", cfgs, page_blocks=RULE)
    assert (f.program_tokens > 0).sum() > 40
    true = msgspec.structs.replace(base, l2_hit_max=0.8, l2_bytes_per_s=7e12, l2_window_bytes=None,
                                   program_token_s=15e-9)
    t = predict(true, f) * np.exp(np.random.default_rng(3).normal(0, 0.02, f.bytes.size))
    got = fit_l2(base, f, t, h100_run.l2_bytes)
    assert got.program_token_s == pytest.approx(15e-9, rel=0.1)
    assert got.l2_hit_max == pytest.approx(0.8, abs=0.05)
    # without blocks nothing carries the term: the fit leaves it at 0
    plain = features("decode_shared", cfgs)
    assert fit_l2(base, plain, predict(base, plain), h100_run.l2_bytes).program_token_s == 0.0


def test_a_step_spares_what_its_sequences_spare():
    load = single_level_load(np.array([4096.0, 4096.0]), np.array([256.0, 1.0]), 1.0, 128.0)
    spared = load_saved_tokens(RULE, load, 8, 4)
    assert spared.tolist() == [256 * 3072.0, 0.0]
    assert load_saved_tokens(None, load, 8, 4).tolist() == [0.0, 0.0]
    # a tree: a 1,024-token root over 16 groups of 16 sequences, each group with a 1,024-token prefix, 128 private
    # tokens each: blocks of 4 inside a group read root + prefix (2,048 tokens, 16 whole tiles) once, 3/4 spared
    tree = StepLoad(active_seqs=np.array(256.0), ps_prefix_tokens=np.array(256 * 2048.0),
                    suffix_tokens=np.array(256 * 128.0), node_tokens=np.array([16 * 1024.0, 1024.0]),
                    node_query_tokens=np.array([256 * 1024.0, 256 * 1024.0]),
                    node_redundant_tokens=np.array([16 * 15 * 1024.0, 255 * 1024.0]), levels_on=np.array(2.0),
                    node_instance_tokens=np.array([1024.0, 1024.0]), longest_context=np.array(2176.0),
                    longest_suffix=np.array(128.0))
    assert saved_tokens(RULE, 256, 8, 4, 16, 2048, 2176) == 1536.0
    assert float(load_saved_tokens(RULE, tree, 8, 4)) == 256 * 1536.0


def test_the_rule_holds_only_where_it_gives_back_every_recorded_launch(h100_run):
    for kv in ("bf16", "fp8"):
        rule, line = page_block_rule(h100_run, "triton", kv)
        assert rule is not None and rule.sm_count == 132 and "every row's recorded launch" in line
    # the same rows with a tune that blocks at most 2 sequences: the rule would price launches the kernel never made
    doc = {**h100_run.decoded, "notes": {**h100_run.decoded["notes"],
                                         "tune": {**h100_run.decoded["notes"]["tune"], "decode_page_group": 2}}}
    rule, line = page_block_rule(ProbeData(h100_run.path, doc), "triton", "bf16")
    assert rule is None and "page blocks not priced" in line
    # a tune whose fp8 launches stream at 4 per SM (tune_at_kv_dtype; none of this file's blocked rows streams): the
    # fp8 rule the planner keeps launches so, the bf16 one as the file's tune says
    tune = h100_run.decoded["notes"]["tune"]
    notes = {**h100_run.decoded["notes"], "tune": {**tune, "fp8_stream_programs_per_sm": 4}}
    doc = {**h100_run.decoded, "notes": notes}
    fp8, _ = page_block_rule(ProbeData(h100_run.path, doc), "triton", "fp8")
    bf16, _ = page_block_rule(ProbeData(h100_run.path, doc), "triton", "bf16")
    assert fp8 is not None and bf16 is not None
    assert (fp8.tune["stream_programs_per_sm"], fp8.tune["stream_max_programs_per_sm"]) == (4, 4)
    assert bf16.tune == notes["tune"]      # this file's tune streams nowhere (no stream_programs_per_sm)
    # other kernels, and the shipped H200 file (probe 1.3's tune: no blocks), have no rule
    assert page_block_rule(h100_run, "flashinfer", "bf16") == (None, "")
    assert page_block_rule(find_committed(load_hardware("h200"), "probe"), "triton", "bf16") == (None, "")


def test_blocks_cut_the_held_out_error_of_the_decode_over_shared_pages(h100_run):
    fits = msgspec.convert(h100_run.fits.kv_dtypes["bf16"]["triton"], BackendFit)
    assert fits.page_blocks is not None
    rows = [r for r in h100_run.select("triton", "decode_shared", None, "bf16") if is_held_out(r.config)]
    cfgs, t = [r.config for r in rows], np.array([r.timed_s for r in rows])

    def median_err(f: BackendFit) -> float:
        return float(np.median(np.abs(predict_kind(f, "decode_shared", cfgs, h100_run.l2_bytes) / t - 1)))

    with_blocks = median_err(fits)
    # the same fit asked without its rule prices the blocked rows as if every sibling read its own pages
    without = median_err(msgspec.structs.replace(fits, page_blocks=None))
    assert len(rows) >= 40 and with_blocks < 0.15 and with_blocks < without / 3


def test_the_planner_prices_the_blocks_as_the_fit_does(h100_run):
    """Llama-3-8B's layer (8 KV heads, G 4, head dim 128) at one of the probe's shapes: the planner's decode op,
    per layer, is the fit's prediction at that configuration."""
    hw, model = load_hardware("h100-sxm"), load_preset("llama-3-8b")
    params = msgspec.structs.replace(params_from_probe(h100_run, "triton", "bf16", hw), measured=None)
    assert params.page_blocks == page_blocks_of(132, h100_run.decoded["notes"]["tune"])
    fits = msgspec.convert(h100_run.fits.kv_dtypes["bf16"]["triton"], BackendFit)
    row = next(r for r in h100_run.select("triton", "decode_shared", None, "bf16")
               if (r.config.prefix_tokens, r.config.group_size, r.config.n_groups, r.config.suffix_tokens,
                   r.config.q_per_kv, r.config.num_kv_heads) == (4096, 256, 1, 128, 4, 8))
    g = gpu_shape(model, hw, "bf16", "bf16", 1)
    load = single_level_load(4096, 256, 1, 128)
    ctx = StepContext(model, 1, "bf16", load.active_seqs, g.hbm_bytes_per_s, g.gemm_flop_per_s, params.step, params,
                      g, load, True)
    op = decode.cost(ctx)
    assert op is not None
    fitted = predict_kind(fits, "decode_shared", [row.config], h100_run.l2_bytes)[0]
    assert float(op.time_s) / model.num_layers == pytest.approx(fitted, rel=1e-6)
    # over private copies too (prefix caching off: the decode's private-pages fit), whose latency bound streams the
    # launch's longest split: one sequence x 8 KV heads at 32K + 128 is 65 splits of 512 tokens, not a 32,896-token
    # row (the bound at the whole row put it at 2.6x its time on probe 1.7.0's H100 rows)
    dup_ctx = msgspec.structs.replace(ctx, prefix_caching=False)
    dup_fit = predict_kind(fits, "decode_dup", [row.config], h100_run.l2_bytes)[0]
    assert float(decode.cost(dup_ctx).time_s) / model.num_layers == pytest.approx(dup_fit, rel=1e-6)
    one = next(r for r in h100_run.select("triton", "decode_dup", None, "bf16")
               if (r.config.prefix_tokens, r.config.group_size, r.config.q_per_kv, r.config.num_kv_heads)
               == (32768, 1, 4, 8))
    assert features("decode_dup", [one.config], page_blocks=params.page_blocks).longest_tokens.tolist() == [512.0]
    one_ctx = StepContext(model, 1, "bf16", np.array([1.0]), g.hbm_bytes_per_s, g.gemm_flop_per_s, params.step,
                          params, g, single_level_load(32768, 1, 1, 128), False)
    assert float(decode.cost(one_ctx).time_s) / model.num_layers == pytest.approx(
        predict_kind(fits, "decode_dup", [one.config], h100_run.l2_bytes)[0], rel=1e-6)
    # and the blocks are what make it so: without them the planner prices the row about as its private copies
    no_blocks = msgspec.structs.replace(ctx, params=msgspec.structs.replace(params, page_blocks=None))
    assert float(decode.cost(no_blocks).time_s) > 2 * float(op.time_s)
    assert row.timed_s == pytest.approx(fitted, rel=0.35)


def test_blocks_cut_the_error_on_regimes_the_fit_never_saw(h100_all):
    """The same H100 run with Triton's rows of the regimes grid added (benchmarks/raw/device-2026-12-06b: head dims
    64 and 256, groups of 6 and 12, prefixes over 64K, suffixes over 4K, rollout starts; never fitted), its trees'
    and its whole steps' beside them."""
    probe = h100_all
    fits = msgspec.convert(probe.fits.kv_dtypes["bf16"]["triton"], BackendFit)
    rows = [r for r in probe.select("triton", "decode_shared", None, "bf16") if held_out_regime(r.config)]
    cfgs, t = [r.config for r in rows], np.array([r.timed_s for r in rows])
    err = {k: float(np.median(np.abs(predict_kind(f, "decode_shared", cfgs, probe.l2_bytes) / t - 1)))
           for k, f in (("blocks", fits), ("none", msgspec.structs.replace(fits, page_blocks=None)))}
    # 15% median before the busiest program's time was fitted (fitting.fit_l2 program_token_s), 10% since; the fit
    # now spares more of the re-reads in L2, so the same fit without its blocks is less far off than it was (31%)
    assert len(rows) >= 60 and err["blocks"] < 0.12 and err["blocks"] < err["none"] / 1.4


def test_whole_steps_the_fit_never_saw_agree_with_the_blocks(h100_all):
    """Triton's whole decode steps on the same H100 (benchmarks/raw/device-2026-12-06b/h100-probe-1.5.5.json.gz:
    seven workloads, first / middle / final step, per-sequence and cascade, probe 1.5.5's kernels, torch glue; never
    fitted), predicted from the file's own fits. Qwen2.5-7B at a long shared prompt is where the blocks decide."""
    hw = load_hardware("h100-sxm")

    def per_sequence_errors(probe: ProbeData) -> dict[str, float]:
        return {f"{p.workload} {p.position}": p.predicted_ps_s / p.measured_ps_s - 1 for p in step_points(probe, hw)
                if p.backend == "triton"}

    with_blocks = per_sequence_errors(h100_all)
    without = per_sequence_errors(_without_rule(h100_all))
    assert len(with_blocks) == 21 and max(abs(e) for e in with_blocks.values()) < 0.12
    assert max(abs(with_blocks[k]) for k in with_blocks if k.startswith("long-prefix-qwen")) < 0.03
    assert min(without[k] for k in without if k.startswith("long-prefix-qwen")) > 0.12


def test_a_three_level_tree_is_priced_with_the_blocks_of_its_innermost_groups(h100_all):
    """The probe's three-level trees on the same H100 (a root every sequence shares, a prefix per group; never fitted):
    a block lies inside one group and reads the root and the group's prefix once, so the kernel's recorded launches
    are the one-level rule's at root + prefix tokens (the rule holds on the file's tree rows too), and the planner
    prices the tree's per-sequence decode with them."""
    assert h100_all.decoded["fitted"]["kv_dtypes"]["bf16"]["triton"].get("page_blocks")
    hw = load_hardware("h100-sxm")
    with_blocks = validate_trees(h100_all, hw)["summary"]["triton/bf16"]["per_sequence"]
    without = validate_trees(_without_rule(h100_all), hw)["summary"]["triton/bf16"]["per_sequence"]
    assert with_blocks["n"] == 30 and with_blocks["median_ape"] < 0.12 and without["median_ape"] > 0.3


def test_estimate_and_report_price_a_run_with_the_blocks(tmp_path, h100_run):
    """A user's own calibration with page blocks, through the commands: `estimate` over a whole run (its step arrays
    broadcast in shapes of their own) says the blocks are priced, and `report` gives the same run speedup."""
    from cascade_plan.cli.common import dumps_json

    from cli_support import estimate_json_and_text, run

    cal = tmp_path / "h100.json"
    cal.write_text(dumps_json(h100_run.decoded))
    args = ("--hardware", "h100", "--calibration", cal, "--backend", "triton")
    data, text = estimate_json_and_text(ROOT / "workloads" / "rl-rollouts-64.yaml", *args)
    assert "per-sequence decode priced with its page blocks" in text
    res = run("report", ROOT / "workloads" / "rl-rollouts-64.yaml", *args, "--out", tmp_path / "rep")
    assert res.exit_code == 0, res.output
    assert f"{data['run']['speedup']:.2f}x" in (tmp_path / "rep" / "report.md").read_text()


def test_the_redundant_prefix_reads_are_the_priced_kernels(tmp_path, h100_run):
    """With blocks priced, the per-sequence decode reads a block's shared pages once: the estimate's per-sequence
    prefix bytes, and the redundant prefix reads its verdict weighs against the weights, are those its priced kernel
    reads (fewer than every sibling reading its own), while the suffix bytes stay as they were."""
    from cascade_plan.cli.common import dumps_json

    from cli_support import estimate_json_and_text

    def estimate(probe: ProbeData, name: str) -> dict:
        cal = tmp_path / name
        cal.write_text(dumps_json(probe.decoded))
        return estimate_json_and_text(ROOT / "workloads" / "rl-rollouts-64.yaml", "--hardware", "h100",
                                      "--calibration", cal, "--backend", "triton")[0]

    blocks, plain = estimate(h100_run, "blocks.json"), estimate(_without_rule(h100_run), "plain.json")
    b, p = blocks["first_step"], plain["first_step"]
    spared = p["per_sequence"]["prefix_bytes"] - b["per_sequence"]["prefix_bytes"]
    assert spared > 0.1 * p["per_sequence"]["prefix_bytes"]
    assert b["per_sequence"]["suffix_bytes"] == pytest.approx(p["per_sequence"]["suffix_bytes"])
    assert b["cascade"]["prefix_bytes"] == pytest.approx(p["cascade"]["prefix_bytes"])
    assert blocks["go_no_go"]["redundant_prefix_bytes"] == pytest.approx(
        plain["go_no_go"]["redundant_prefix_bytes"] - spared)
    assert blocks["go_no_go"]["redundant_prefix_bytes"] == pytest.approx(
        b["per_sequence"]["prefix_bytes"] - b["cascade"]["prefix_bytes"])


def test_the_planners_decode_spares_the_blocks_of_the_models_head_dim(h100_run):
    """A layer of 4 KV heads x 2 query heads at head dim 256 (Llama-3-8B's widths otherwise), 256 sequences sharing
    4,160 of 4,224 tokens, under the current tune: its batch-filled tile holds 64 tokens at head dim 256, so blocks
    of four read all 4,160 shared tokens once (4,096 in the 128-token tiles of head dim 128); the decode op spares
    what the head dim's launch spares."""
    hw = load_hardware("h100-sxm")
    base = load_preset("llama-3-8b")
    model = msgspec.structs.replace(base, num_q_heads=8, num_kv_heads=4, head_dim=256)
    g = gpu_shape(model, hw, "bf16", "bf16", 1)
    load = single_level_load(4160, 256, 1, 64)
    params = msgspec.structs.replace(params_from_probe(h100_run, "triton", "bf16", hw), measured=None,
                                     page_blocks=RULE)
    ctx = StepContext(model, 1, "bf16", load.active_seqs, g.hbm_bytes_per_s, g.gemm_flop_per_s, params.step, params,
                      g, load, True)
    assert float(decode.spared_tokens(ctx)) == 256 * 4160 * 3 / 4
    narrow = msgspec.structs.replace(ctx, model=msgspec.structs.replace(model, head_dim=128))
    assert float(decode.spared_tokens(narrow)) == 256 * 4096 * 3 / 4
