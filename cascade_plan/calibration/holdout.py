"""Which probe configurations are held out of the fit (validation measures the error on them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from cascade_plan.calibration_schema.attention import AttentionConfigDoc
from cascade_plan.calibration_schema.kernel_fit import BackendFit

HOLDOUT_RULE = ("held out: every configuration with a 16,384-token prefix (a whole prefix slice), every one with "
                "1 KV head per GPU (the Llama-3-70B-at-TP-8 shape: a whole model-shape slice), every one of the "
                "regimes grid (head dims other than 128, query groups of 6 or 12, prefixes over 64K, suffixes over "
                "4K: whole regimes the fit never sees), every rollout start (1,024 or more sequences with at most "
                "one page of private tokens: trained on, these rows moved the core whole steps' per-sequence "
                "errors by +3%), and one in six of the rest by a stable hash of the configuration")
# The regimes the fit never sees: the probe's regimes grid (kernels_probe/attention/grid.py: regimes_grid).
FIT_HEAD_DIM = 128
FIT_MAX_PREFIX_TOKENS = 65536
FIT_MAX_SUFFIX_TOKENS = 4096
HELD_OUT_GROUPS = (6, 12)
ROLLOUT_START_SEQS = 1024


def config_key(cfg: msgspec.Struct | Mapping[str, Any]) -> str:
    """One probe configuration as a stable string: the key that pairs kernels timed on the same config. A typed
    config is hashed as the plain data the file holds (its fields are the file's keys)."""
    return json.dumps(cfg if isinstance(cfg, Mapping) else msgspec.to_builtins(cfg), sort_keys=True)


def stable_sixth(cfg: msgspec.Struct | Mapping[str, Any]) -> bool:
    """One configuration in six, by a hash of the configuration that no run or machine changes."""
    return int(hashlib.sha256(config_key(cfg).encode()).hexdigest(), 16) % 6 == 0


def regime_names(cfg: AttentionConfigDoc) -> list[str]:
    """The regimes the fit never sees that a configuration lies in, by name (none: the core grids')."""
    out = ["rollout start"] if rollout_start(cfg) else []
    out += [f"head dim {cfg.head_dim}"] if cfg.head_dim != FIT_HEAD_DIM else []
    out += [f"G = {cfg.q_per_kv}"] if cfg.q_per_kv in HELD_OUT_GROUPS else []
    out += ["prefix > 64K"] if cfg.prefix_tokens > FIT_MAX_PREFIX_TOKENS else []
    return out + (["suffix > 4K"] if cfg.suffix_tokens > FIT_MAX_SUFFIX_TOKENS else [])


def rollout_start(cfg: AttentionConfigDoc) -> bool:
    """1,024 or more sequences with at most one page of private tokens each: where an RL rollout starts decoding."""
    return cfg.group_size * cfg.n_groups >= ROLLOUT_START_SEQS and cfg.suffix_tokens <= cfg.page_size


def held_out_regime(cfg: AttentionConfigDoc) -> bool:
    """A configuration of a regime the fit never sees (head dim, query group, prefix or suffix length)."""
    return bool(regime_names(cfg))


def is_tree(cfg: AttentionConfigDoc) -> bool:
    """A row of a three-level tree (a root prefix above the groups' prefixes): never fitted, never interpolated (the
    fits' features and the planner's measured tables are two-level); calibration/tree_validation.py scores them."""
    return cfg.root_tokens > 0


def fit_trained_on(fits: BackendFit | None, cfg: AttentionConfigDoc) -> bool:
    """Was a backend's fit trained on this configuration? Every row where it was fitted on all of them (too few to
    hold any out: `train_rows`), or where there is no fit to ask; else the rows the hold-out rule keeps."""
    return fits is None or bool(fits.train_rows) or not is_held_out(cfg)


def is_held_out(cfg: AttentionConfigDoc) -> bool:
    if cfg.prefix_tokens == 16384 or cfg.num_kv_heads == 1 or held_out_regime(cfg):
        return True
    return stable_sixth(cfg)
