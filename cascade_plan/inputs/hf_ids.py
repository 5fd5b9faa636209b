"""Hugging Face repo ids (`meta-llama/Meta-Llama-3-8B`): the preset that cites the repo, or a config.json
already in the local Hugging Face cache. Never a download: the planner works offline."""

from __future__ import annotations

import os
import re
from pathlib import Path

from cascade_plan.inputs.model_presets import PRESETS

_REPO_IN_URL = re.compile(r"huggingface\.co/([^/]+/[^/]+)/")
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def repo_in_source(source: str) -> str | None:
    """The Hugging Face repo a preset's source URL cites (`meta-llama/Meta-Llama-3-8B`), or None."""
    m = _REPO_IN_URL.search(source)
    return m.group(1) if m else None


def preset_for_repo(repo_id: str) -> str | None:
    """The preset whose source cites this repo (case-insensitive), or None."""
    for preset, (source, *_rest) in PRESETS.items():
        repo = repo_in_source(source)
        if repo and repo.lower() == repo_id.strip().lower():
            return preset
    return None


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def cached_config(repo_id: str, cache: Path | None = None) -> Path | None:
    """config.json of `repo_id` in the local cache (the snapshot `refs/main` names, else the newest), or None."""
    cache = cache or hub_cache_dir()
    if not cache.is_dir():
        return None
    wanted = "models--" + repo_id.strip().replace("/", "--")
    repos = [p for p in cache.iterdir() if p.name.lower() == wanted.lower()]
    if not repos:
        return None
    snapshots = repos[0] / "snapshots"
    main = repos[0] / "refs" / "main"
    if main.is_file() and (snapshots / main.read_text().strip() / "config.json").is_file():
        return snapshots / main.read_text().strip() / "config.json"
    found = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    return found[0] if found else None
