"""The local Hugging Face cache, read offline: where it is and a repository's ``config.json``
in it. Nothing is downloaded."""

from __future__ import annotations

import os

__all__ = ["hf_cache_dirs", "find_cached_config", "repo_id_of"]


def hf_cache_dirs() -> tuple[str, ...]:
    """Where ``huggingface_hub`` keeps downloaded repositories, in its own order:
    ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub`` (huggingface_hub ``constants.py``)."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return (env["HF_HUB_CACHE"],)
    if env.get("HF_HOME"):
        return (os.path.join(env["HF_HOME"], "hub"),)
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return (os.path.join(xdg, "huggingface", "hub"),)


def find_cached_config(repo_id: str) -> str | None:
    """The ``config.json`` of Hugging Face repo ``repo_id`` (``org/name``) in the local
    cache, or ``None``: ``models--org--name/snapshots/<rev>/config.json`` for the revision
    ``refs/main`` names, else the most recently modified snapshot that has one. Matching
    is exact first, then ignoring case. Nothing is downloaded."""
    if "/" not in repo_id or repo_id.count("/") != 1 or ".." in repo_id:
        return None
    folder_name = "models--" + repo_id.strip().replace("/", "--")
    for cache in hf_cache_dirs():
        try:
            entries = os.listdir(cache)
        except OSError:
            continue
        matches = [e for e in entries if e == folder_name] or [e for e in entries if e.lower() == folder_name.lower()]
        for entry in matches:
            repo = os.path.join(cache, entry)
            snapshots = os.path.join(repo, "snapshots")
            try:
                with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as f:
                    main = f.read(100).strip()
            except OSError:
                main = ""
            candidate = os.path.join(snapshots, main, "config.json") if main else ""
            if candidate and os.path.isfile(candidate):
                return candidate
            try:
                revisions = [os.path.join(snapshots, rev, "config.json") for rev in os.listdir(snapshots)]
            except OSError:
                continue
            found = [c for c in revisions if os.path.isfile(c)]
            if found:
                return max(found, key=os.path.getmtime)
    return None


def repo_id_of(file: str) -> str:
    """``org/name`` when ``file`` lies in a Hugging Face cache snapshot, else ``""``."""
    parts = os.path.abspath(file).split(os.sep)
    for i in range(len(parts) - 3, -1, -1):
        if parts[i].startswith("models--") and i + 1 < len(parts) and parts[i + 1] == "snapshots":
            return parts[i][len("models--"):].replace("--", "/", 1)
    return ""

