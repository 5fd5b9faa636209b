"""The launches the probe's own kernels choose, read from the tune a calibration file records (`notes.tune`) and
its GPU's SM count: where a fit may price a launch apart (calibration/fitting.py fit_kernel `filled`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from cascade_plan.calibration_schema.kernel_fit import PageBlockRule
from cascade_plan.cost.ops.page_blocks import PageBlocks, page_blocks_of
from cascade_plan.own_kernel_blocks import page_blocks
from cascade_plan.own_kernel_pages import tune_at_kv_dtype
from cascade_plan.own_kernel_prefix import prefix_launch

if TYPE_CHECKING:
    from cascade_plan.calibration.calibration_file import ProbeData

# Backends whose kernels are the probe's own (cascade_plan/own_kernel_launch.py picks their launches)
OWN_KERNELS = ("triton",)
TUNE_KEYS = ("target_programs_per_sm", "decode_short_tokens", "decode_block_n", "decode_block_n_large_batch")


def filled_launch(probe: ProbeData, backend: str) -> tuple[int, int, int] | None:
    """((sequence, KV head) rows per layer, tokens a row must exceed, the tile's tokens) from which the
    per-sequence decode of `backend` runs unsplit with its large-batch tile: the batch alone gives
    target_programs_per_sm programs per SM, and a row holds more tokens than the short-split tile takes
    (own_kernel_launch.decode_tile). None: not the probe's own kernel, no such tile in the recorded tune, or no tune
    or SM count recorded."""
    if backend not in OWN_KERNELS:
        return None
    tune = (probe.decoded.get("notes") or {}).get("tune") or {}
    sms = probe.device.sm_count
    if not sms or any(not isinstance(tune.get(k), int) or isinstance(tune.get(k), bool) for k in TUNE_KEYS):
        return None
    if (tune["decode_block_n_large_batch"], tune.get("decode_stages_large_batch")) == (
            tune["decode_block_n"], tune.get("decode_stages")):
        return None
    return tune["target_programs_per_sm"] * sms, tune["decode_short_tokens"], tune["decode_block_n_large_batch"]


def _prefix_launches_differ(probe: ProbeData, backend: str, kv_dtype: str, rule: PageBlocks) -> str:
    """Why the rule's prefix-pass launch is not every cascade row's recorded one ("" where it is: the fit and the
    planner then take the pass's busiest program from it, cost/ops/prefix_programs.py)."""
    for m in probe.doc.get("measurements") or []:
        c, rec = m.get("config") or {}, m.get("launch")
        if (m.get("backend"), m.get("kernel"), c.get("kv_dtype")) != (backend, "cascade_prefix", kv_dtype) or \
                not isinstance(rec, dict) or "prefix_splits" not in rec:
            continue
        levels = [(c["group_size"], c["n_groups"], c["prefix_tokens"])]
        if c.get("root_tokens"):
            levels.insert(0, (c["group_size"] * c["n_groups"], 1, c["root_tokens"]))
        got = [prefix_launch(n, c["q_per_kv"], c["num_kv_heads"], ng, tokens, rule.sm_count, rule.tune)
               for n, ng, tokens in levels]
        tiles = rec.get("prefix_block_m")
        if [g[2] for g in got] != rec["prefix_splits"] or (tiles is not None and [g[0] for g in got] != tiles):
            return (f"the file's tune gives another prefix-pass launch ({[g[2] for g in got]} splits) than its row at "
                    f"{c['prefix_tokens']} tokens x {c['group_size'] * c['n_groups']} sequences records "
                    f"({rec['prefix_splits']})")
    return ""


def page_block_rule(probe: ProbeData, backend: str, kv_dtype: str) -> tuple[PageBlockRule | None, str]:
    """The rule by which the backend's per-sequence decode over shared pages reads a block of siblings' pages once
    (cost/ops/page_blocks.py), with a line on how it was decided: only for the probe's own kernels, from the tune
    the file records and its SM count, and only where that rule gives back the recorded launch of every decode row
    of that KV dtype (splits, block size and grouped share: the kernel's own record of what it did). None where the
    rows formed no block, record no launch, or the rule disagrees with them (a tune this version reads otherwise)."""
    tune = (probe.decoded.get("notes") or {}).get("tune") or {}
    sms = probe.device.sm_count
    group = tune.get("decode_page_group")
    if backend not in OWN_KERNELS or not sms or not isinstance(group, int) or isinstance(group, bool) or group < 2:
        return None, ""
    launched = [m for m in probe.doc.get("measurements") or []
                if m.get("backend") == backend and m.get("kernel") == "decode_shared"
                and (m.get("config") or {}).get("kv_dtype") == kv_dtype and isinstance(m.get("launch"), dict)]
    if not any(m["launch"].get("grouped_programs") for m in launched):
        return None, ""
    # the launch rules over this KV dtype (own_kernel_pages.tune_at_kv_dtype), in the rule the planner keeps too
    base = page_blocks_of(sms, tune).tune
    tune = {**tune, **{k: v for k, v in asdict(tune_at_kv_dtype(base, kv_dtype)).items() if v != getattr(base, k)}}
    rule = page_blocks_of(sms, tune)
    for m in launched:
        c, want = m["config"], m["launch"]
        shared = c.get("root_tokens", 0) + c["prefix_tokens"]     # a tree's group shares the root's pages and its own
        got = page_blocks(c["group_size"] * c["n_groups"], c["num_kv_heads"], c["q_per_kv"], c["group_size"],
                          shared, shared + c["suffix_tokens"], rule.sm_count, rule.tune,
                          head_dim=c.get("head_dim", 128))
        if (got["splits"], got["page_block_seqs"]) != (want.get("splits"), want.get("page_block_seqs")) or \
                abs(got.get("grouped_programs", 0.0) - want.get("grouped_programs", 0.0)) > 1e-6:
            return None, (f"{backend} ({kv_dtype}): page blocks not priced: the file's tune gives another launch "
                          f"({got['splits']} splits, blocks of {got['page_block_seqs']}) than its row at "
                          f"{shared} + {c['suffix_tokens']} tokens x {c['group_size'] * c['n_groups']} "
                          f"sequences records ({want.get('splits')}, {want.get('page_block_seqs')})")
    why = _prefix_launches_differ(probe, backend, kv_dtype, rule)
    if why:
        return None, f"{backend} ({kv_dtype}): page blocks not priced: {why}"
    n = sum(bool(m["launch"].get("grouped_programs")) for m in launched)
    return PageBlockRule(sm_count=sms, tune=dict(tune)), (
        f"{backend} ({kv_dtype}): per-sequence decode over shared pages read blocks of siblings' pages once on {n} "
        f"of {len(launched)} rows; the file's tune gives every row's recorded launch, so the fit and the planner "
        "price the blocks")
