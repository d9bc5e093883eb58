"""Versions of a library epbuf follows at a single commit (MORI-EP, pplx-kernels): one version
id (the short commit), its aliases, the check every report runs on ``plan.version``, and the
citation form ``path:lines @<short>`` of every region, limit and finding.

>>> versions, aliases = version_table("12cecfd", "12cecfda252e4e646417ac263d96e994d476ee5d", "pplx-kernels")
>>> sorted(aliases)
['12cecfda', '12cecfda252e4e646417ac263d96e994d476ee5d', 'latest']
>>> check = version_check("pplx-kernels", versions, aliases, "12cecfd")
>>> check(None), check("latest"), check("12cecfda")
('12cecfd', '12cecfd', '12cecfd')
>>> citation("12cecfd")("csrc/core/utils.h", "10-12")
'csrc/core/utils.h:10-12 @12cecfd'
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import InvalidArgumentError, Problem

__all__ = ["version_table", "version_check", "citation"]


def version_table(short: str, commit: str, description: str) -> tuple[dict[str, str], dict[str, str]]:
    """``(VERSIONS, ALIASES)``: the one id ``short`` and what it stands for; the full commit, its
    first 8 characters and ``latest`` as aliases of it."""
    return {short: description}, {commit: short, commit[:8]: short, "latest": short}


def version_check(library: str, versions: dict[str, str], aliases: dict[str, str], default: str):
    """The ``check_version(version) -> id`` of ``library``: ``None`` is ``default``; an id or an
    alias is its id; anything else raises :class:`~epbuf.errors.InvalidArgumentError`."""

    def check_version(version: object) -> str:
        if version is None:
            return default
        if isinstance(version, str) and (version in versions or version in aliases):
            return aliases.get(version, version)
        raise InvalidArgumentError([Problem(
            "version", version, f"unknown {library} version; choose {', '.join(versions)} (aliases: "
                                f"{', '.join(a for a in aliases if len(a) < 40)}, or the full commit)")])

    check_version.__doc__ = f"""The {library} version id for ``version`` (``None``: the newest).

    Raises:
        InvalidArgumentError: an id that is neither in ``VERSIONS`` nor in ``ALIASES``.
    """
    return check_version


def citation(short: str):
    """The ``src(path, lines) -> "path:lines @<short>"`` of a library at commit ``short``, cached:
    sweeps build every allocation row, each with its citation, for every configuration."""

    @lru_cache(maxsize=None)
    def src(path: str, lines: str) -> str:
        return f"{path}:{lines} @{short}"

    src.__doc__ = f"""``path:lines @{short}`` — the citation form every region, limit and finding uses."""
    return src
