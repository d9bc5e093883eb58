"""Finding a model by name: a preset (name, title, alias or Hugging Face id), a Hugging Face
id whose ``config.json`` is in the local cache (read offline: nothing is downloaded), or a
released variant of a preset.

>>> get_model("qwen3_235b_a22b").name
'qwen3-235b-a22b'
>>> get_model("meta-llama/Llama-4-Scout-17B-16E-Instruct").title
'Llama-4-Scout'
>>> get_model("deepseek-ai/DeepSeek-R1-0528").notes.split(";")[0]
'architecture of the deepseek-r1 preset: variant of DeepSeek-R1 (suffix 0528)'
>>> get_model("deepseek-v4")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
epbuf.errors.UnknownNameError: --model (model) = 'deepseek-v4': unknown; did you mean deepseek-v3, deepseek-v2, deepseek-v3.2? `epbuf models` lists all 25; or --model-config PATH
"""

from __future__ import annotations

import os

from .._names import _fold, _index, _lookup, _shown
from ..errors import UnknownNameError
from . import ModelSpec
from .presets import MODELS

__all__ = ["get_model", "VARIANTS", "hf_cache_dirs", "find_cached_config"]


_MODEL_INDEX: dict[str, str] = {}

#: Published variants that keep a preset's architecture (same hidden size, experts, top-k):
#: folded name -> (preset, where the equality was read). Checked after the presets, so a
#: Hugging Face id of a variant answers without its config.json.
VARIANTS: dict[str, tuple[str, str]] = {
    "glm46": ("glm-4.5", "GLM-4.6 config (hidden_size 5120, 160 routed + 1 shared experts, top-8, 92 layers): "
                         "github.com/andreidhoang/stanford-ai LLM/glm-4.6-training-pipeline/docs/GLM-4.6_DEEP_DIVE.md "
                         "(a copy of the published config; secondary source)"),
}
#: Suffixes of released variants that do not change the architecture; stripped (repeatedly,
#: from the end) to find the preset of e.g. ``DeepSeek-R1-0528`` or ``Qwen3-30B-A3B-Instruct-2507``.
_VARIANT_SUFFIXES = ("instruct", "thinking", "chat", "base", "fp8", "bf16", "awq", "gptq", "int4", "int8", "hf")


def _variant(name: str) -> ModelSpec | None:
    """The preset whose architecture a released variant keeps, retitled with the variant's name."""
    import re

    words = [w for w in re.split(r"[-_. /]+", str(name).strip().rsplit("/", 1)[-1].lower()) if w]
    trimmed = list(words)
    while trimmed:
        key = _MODEL_INDEX.get("".join(trimmed))
        found = VARIANTS.get("".join(trimmed))
        if found is not None:
            key = found[0]
        if key is not None and trimmed != words:
            how = found[1] if found is not None else f"variant of {MODELS[key].title} (suffix {'-'.join(words[len(trimmed):])})"
            break
        if key is not None and found is not None:
            how = found[1]
            break
        last = trimmed[-1]
        if last in _VARIANT_SUFFIXES or (last.isdigit() and len(last) == 4):
            trimmed.pop()
            continue
        return None
    else:
        return None
    spec = MODELS[key]
    title = str(name).strip().rsplit("/", 1)[-1]
    notes = f"architecture of the {spec.name} preset: {how}" + (f"; {spec.notes}" if spec.notes else "")
    return spec.replace(name=title.lower(), title=title, notes=notes,
                        hf_id=str(name).strip() if "/" in str(name) else "", aliases=())


def get_model(name: str) -> ModelSpec:
    """The preset called ``name`` (a preset name, title, alias or Hugging Face id), or the
    model of a Hugging Face id whose ``config.json`` is in the local cache, or a released
    variant of a preset (``DeepSeek-R1-0528``, ``Qwen3-30B-A3B-Instruct-2507``, ``GLM-4.6``).

    Matching ignores case, an ``org/`` prefix and the separators ``- _ .`` and spaces.
    The cache is read offline (:func:`find_cached_config`); a preset name wins over it.

    Raises:
        UnknownNameError: none of these; the one-line message suggests the three closest
            names and points to ``epbuf models``.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownNameError(f"--model (model) = {_shown(name)}: empty; name a preset (`epbuf models`), a "
                               "Hugging Face id in the local cache, or read a file with --model-config PATH")
    if not _MODEL_INDEX:
        _MODEL_INDEX.update(_index(MODELS))
    key = _MODEL_INDEX.get(_fold(name))
    if key is not None:
        return MODELS[key]
    stripped = name.strip()
    if stripped.startswith(("/", "./", "../", "~")) or stripped in (".", ".."):  # a checkpoint folder, as vLLM takes
        from ..errors import ConfigFileError
        from .config_json import read_model_config

        folder = os.path.expanduser(stripped)
        if not os.path.exists(folder):
            raise ConfigFileError(f"--model = {_shown(name)}: no such file or folder (epbuf downloads nothing)")
        return read_model_config(folder)
    cached = find_cached_config(name)
    if cached is not None:
        from .config_json import read_model_config

        return read_model_config(cached)
    variant = _variant(name)
    if variant is not None:
        return variant
    return _lookup(MODELS, _MODEL_INDEX, name, "model",
                   "or --model-config PATH")


# ------------------------------------------------------------------- Hugging Face cache


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
