"""Which probe configurations are held out of the fit (validation measures the error on them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from cascade_plan.calibration_schema.attention import AttentionConfigDoc

HOLDOUT_RULE = ("held out: every configuration with a 16,384-token prefix (a whole prefix slice), every one with "
                "1 KV head per GPU (the Llama-3-70B-at-TP-8 shape: a whole model-shape slice), and one in six of "
                "the rest by a stable hash of the configuration")


def config_key(cfg: msgspec.Struct | Mapping[str, Any]) -> str:
    """One probe configuration as a stable string: the key that pairs kernels timed on the same config. A typed
    config is hashed as the plain data the file holds (its fields are the file's keys)."""
    return json.dumps(cfg if isinstance(cfg, Mapping) else msgspec.to_builtins(cfg), sort_keys=True)


def stable_sixth(cfg: msgspec.Struct | Mapping[str, Any]) -> bool:
    """One configuration in six, by a hash of the configuration that no run or machine changes."""
    return int(hashlib.sha256(config_key(cfg).encode()).hexdigest(), 16) % 6 == 0


def is_held_out(cfg: AttentionConfigDoc) -> bool:
    if cfg.prefix_tokens == 16384 or cfg.num_kv_heads == 1:
        return True
    return stable_sixth(cfg)
