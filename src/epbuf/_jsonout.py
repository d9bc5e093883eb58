"""``--json`` output without importing :mod:`json`: :func:`dumps` gives exactly what
``json.dumps(data, indent=2)`` gives for dicts, lists, tuples, strings, ints, floats, booleans
and ``None`` (tests/test_jsonout.py checks it on generated data).

Why: cold start. Importing ``json`` loads its decoder and scanner, compiling their patterns,
about 1 ms of ``epbuf hint --json`` (``benchmarks/cold_start.py``); the command only writes.

>>> print(dumps({"a": [1, 2.5, None], "b": "\u00e9"}))
{
  "a": [
    1,
    2.5,
    null
  ],
  "b": "\\u00e9"
}
"""

from __future__ import annotations

__all__ = ["dumps"]

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
for _code in (*range(0x20), 0x7F):
    _ESCAPES.setdefault(chr(_code), f"\\u{_code:04x}")
_TABLE = str.maketrans(_ESCAPES)


def _string(text: str) -> str:
    """``json.encoder.py_encode_basestring_ascii``: ASCII out, everything else ``\\uXXXX``."""
    escaped = text.translate(_TABLE)
    if escaped.isascii():
        return f'"{escaped}"'
    out = []
    for ch in escaped:
        code = ord(ch)
        if code < 0x80:
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:  # a surrogate pair, as json writes it
            code -= 0x10000
            out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
    return '"' + "".join(out) + '"'


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key(key: object) -> str:
    if isinstance(key, str):
        return _string(key)
    if key is True or key is False or key is None:
        return '"' + {True: "true", False: "false", None: "null"}[key] + '"'
    if isinstance(key, int):
        return f'"{int.__repr__(key)}"'
    if isinstance(key, float):
        return f'"{_float(key)}"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _write(value: object, level: int, out: list) -> None:
    if isinstance(value, str):
        out.append(_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = "\n" + "  " * (level + 1)
        out.append("{")
        first = True
        for key, item in value.items():
            out.append(inner if first else "," + inner)
            first = False
            out.append(_key(key) + ": ")
            _write(item, level + 1, out)
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = "\n" + "  " * (level + 1)
        out.append("[")
        for i, item in enumerate(value):
            out.append(inner if i == 0 else "," + inner)
            _write(item, level + 1, out)
        out.append("\n" + "  " * level + "]")
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(data: object) -> str:
    """``json.dumps(data, indent=2)``, byte for byte."""
    out: list[str] = []
    _write(data, 0, out)
    return "".join(out)
