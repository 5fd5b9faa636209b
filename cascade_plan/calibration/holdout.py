"""Which probe configurations are held out of the fit (validation measures the error on them)."""

from __future__ import annotations

import hashlib
import json

HOLDOUT_RULE = ("held out: every configuration with a 16,384-token prefix (a whole prefix slice), every one with "
                "1 KV head per GPU (the Llama-3-70B-at-TP-8 shape: a whole model-shape slice), and one in six of "
                "the rest by a stable hash of the configuration")


def config_key(cfg: dict) -> str:
    """One probe configuration as a stable string: the key that pairs kernels timed on the same config."""
    return json.dumps(cfg, sort_keys=True)


def is_held_out(cfg: dict) -> bool:
    if cfg["prefix_tokens"] == 16384 or cfg["num_kv_heads"] == 1:
        return True
    return int(hashlib.sha256(config_key(cfg).encode()).hexdigest(), 16) % 6 == 0
