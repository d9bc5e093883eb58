"""Values read from the engines' JSON settings (``--speculative-config``, ``--additional-config``,
``--eplb-config``, expert maps), validated like command-line integers (type, range) with one line
naming the key. Parsing (no ``RecursionError``, no ``int()`` digit-limit ``ValueError``, regular
files only) is :func:`epbuf.engines._knobs.load_json` / ``parse_json_object``. No formulas.
"""

from __future__ import annotations

from ._knobs import INT_SETTING_MAX, MAX_JSON_DEPTH, _fail, _shown, load_json, parse_json_object  # noqa: F401

__all__ = ["MAX_JSON_DEPTH", "load_json", "parse_json_object", "json_object", "json_int", "json_bool", "json_text"]


def _json_label(label: str, path: tuple[str, ...]) -> str:
    return f"{label} {'.'.join(path)}"


def json_object(label: str, obj: dict, *path: str) -> dict:
    """The JSON object at ``path`` in ``obj`` (``{}`` when absent or null).

    Raises:
        InvalidArgumentError: one line naming ``label`` and the key when it is not an object.
    """
    value = obj.get(path[-1]) if isinstance(obj, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail(_json_label(label, path), _shown(value), "allowed a JSON object")
    return value


def json_int(label: str, obj: dict, *path: str, default: int = 0, lo: int = 0, hi: int = INT_SETTING_MAX) -> int:
    """The integer at ``path`` in ``obj``, validated like a command-line integer: a JSON integer
    (``true``, ``1.9``, ``"2"`` and ``2.0`` refused rather than converted) in ``lo..hi``.

    >>> json_int("--speculative-config", {"num_speculative_tokens": 2}, "num_speculative_tokens")
    2
    >>> json_int("--speculative-config", {"num_speculative_tokens": 1.9}, "num_speculative_tokens")
    Traceback (most recent call last):
    ...
    epbuf.errors.InvalidArgumentError: --speculative-config num_speculative_tokens = 1.9: allowed an integer >= 0
    """
    value = obj.get(path[-1]) if isinstance(obj, dict) else None
    if value is None:
        return default
    allowed = f"allowed an integer in {lo}..{hi}" if hi != INT_SETTING_MAX else f"allowed an integer >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        _fail(_json_label(label, path), _shown(value), allowed)
    return value


def json_bool(label: str, obj: dict, *path: str, default: bool = False) -> bool:
    """The switch at ``path`` in ``obj``: ``true``/``false`` (or 0/1, which Python's ``bool()`` and
    the engines' ``in (0, 1)`` checks accept)."""
    value = obj.get(path[-1]) if isinstance(obj, dict) else None
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    _fail(_json_label(label, path), _shown(value), "allowed true or false (or 0 / 1)")
    return False


def json_text(label: str, obj: dict, *path: str) -> str | None:
    """The string at ``path`` in ``obj`` (``None`` when absent or null)."""
    value = obj.get(path[-1]) if isinstance(obj, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        _fail(_json_label(label, path), _shown(value), "allowed a non-empty string")
    return value
