"""Name matching shared by the preset tables (``--model``, ``--device``): case, an ``org/``
prefix and the separators ``- _ .`` and spaces do not matter; an unknown name gets the three
closest ones and the command that lists them all.

>>> _fold("deepseek-ai/DeepSeek_V3")
'deepseekv3'
"""

from __future__ import annotations

from .errors import UnknownNameError

__all__ = ["_fold", "_index", "_lookup", "_shown", "_suggest"]


def _fold(name: str) -> str:
    """Matching key of a name: lower case, no ``org/`` prefix, no ``- _ .`` or spaces."""
    text = str(name).strip().rsplit("/", 1)[-1].lower()
    return "".join(ch for ch in text if ch not in "-_. \t")


def _index(table: dict, titles: bool = True) -> dict[str, str]:
    """folded name, alias, Hugging Face id (and title when ``titles``) -> preset key."""
    index: dict[str, str] = {}
    for key, spec in table.items():
        for alias in (key, spec.title if titles else "", *spec.aliases, getattr(spec, "hf_id", "")):
            if not alias:
                continue
            index.setdefault(_fold(alias), key)
    return index


def _lookup(table: dict, index: dict, name: str, argument: str, fallback: str):
    """``table[...]`` for ``name`` or an :class:`UnknownNameError` naming ``argument``, the three
    closest names and the command that lists them all (``epbuf models`` / ``epbuf devices``)."""
    key = index.get(_fold(name))
    if key is not None:
        return table[key]
    raise UnknownNameError(f"--{argument} ({argument}) = {_shown(name)}: unknown; {_suggest(index, name)}"
                           f"`epbuf {argument}s` lists all {len(table)}; {fallback}")


def _shown(value: object) -> str:
    from .errors import shown_value

    return shown_value(value)


def closest(typed: str, names, *, cutoff: float = 0.6) -> str | None:
    """The one name of ``names`` nearest to ``typed`` (a typo), or ``None``: difflib's ratio at
    least ``cutoff``. Every "did you mean" of epbuf asks here."""
    import difflib

    close = difflib.get_close_matches(typed, list(names), n=1, cutoff=cutoff)
    return close[0] if close else None


def _suggest(index: dict, name: str) -> str:
    """``"did you mean a, b, c? "``: names that start with what was typed first, then difflib's nearest."""
    import difflib

    wanted = _fold(name)
    prefixed = [folded for folded in index if wanted and folded.startswith(wanted)]
    close: list[str] = []
    for folded in prefixed + difflib.get_close_matches(wanted, list(index), n=6, cutoff=0.6):
        if index[folded] not in close:
            close.append(index[folded])
    return f"did you mean {', '.join(close[:3])}? " if close else ""