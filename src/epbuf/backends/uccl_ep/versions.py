"""The UCCL-EP commits whose arithmetic and limits this package reproduces.

Upstream: ``github.com/uccl-project/uccl``, directory ``ep/``. Two states are supported,
because users run both: the newest release and the newest ``main``.

* ``v0.1.1`` — tag ``v0.1.1`` @ ``73ee4f1`` (2026-05-10), the release on PyPI
  (``uccl/__init__.py: __version__ = "0.1.1"``).
* ``main`` — ``da914a2`` (2026-08-19), the default.

The buffer arithmetic (``ep/include/ep_config.hpp``), the default config tables
(``ep/bench/buffer.py``), the allocations (``ep/src/uccl_ep.cc``, ``ep/src/uccl_proxy.cpp``)
and the constants (``ep/include/common.hpp``, ``ep/include/ep_configs.cuh``) are the same
in both. What differs is two launch limits:

* the low-latency kernels' ``kNumMaxTopK``: 9 at ``v0.1.1``, 16 from ``66170bc``
  (2026-07-13, "raise low-latency kNumMaxTopK from 9 to 16", ``ep/src/internode_ll.cu:670, 1237``);
* the internode TMA staging buffer per warp, ``kNumTMABytesPerWarp``: 16,384 B at ``v0.1.1``,
  20,480 B from ``822a8fc`` (2026-08-12, "size internode TMA sender buffer for hidden up to
  8192", ``ep/src/internode.cu:54-71``).

Citations in this package read ``ep/<path>:<lines> @da914a2``; the ``v0.1.1`` text differs
only as listed here.
"""

from __future__ import annotations

from ..._record import Record
from ...errors import Checker

__all__ = ["Version", "VERSIONS", "DEFAULT_VERSION", "UPSTREAM", "REPO", "MAIN_COMMIT", "get_version",
           "list_versions", "cite"]

REPO = "github.com/uccl-project/uccl"
MAIN_COMMIT = "da914a2054c29725464803e379bb3b98de90dfa1"
MAIN_SHORT = MAIN_COMMIT[:7]


def cite(path: str, lines: str) -> str:
    """``ep/<path>:<lines> @da914a2`` — a citation of UCCL-EP at the pinned ``main``."""
    return f"ep/{path}:{lines} @{MAIN_SHORT}"


class Version(Record):
    """One UCCL-EP state.

    Attributes:
        id: what users pass as ``--backend-version``.
        commit: the upstream commit (40 hex digits).
        date: its commit date.
        summary: for people.
        ll_num_max_topk: ``kNumMaxTopK`` of the low-latency dispatch and combine launchers.
        internode_tma_bytes_per_warp: ``kNumTMABytesPerWarp`` of the internode normal kernels.
    """

    id: str
    commit: str
    date: str
    summary: str
    ll_num_max_topk: int
    internode_tma_bytes_per_warp: int

    @property
    def short(self) -> str:
        return self.commit[:7]

    @property
    def description(self) -> str:
        return f"{self.id}: {REPO}@{self.short} ({self.date}): {self.summary}"


_VERSION_LIST: tuple[Version, ...] = (
    Version(
        id="v0.1.1", commit="73ee4f12ba71717d6de34ba06806e1baaabe3f42", date="2026-05-10",
        summary="tag v0.1.1, the PyPI release: low-latency top-k <= 9, internode TMA staging 16,384 B per warp "
                "(BF16 hidden 8192 does not fit). Sizes as main.",
        ll_num_max_topk=9, internode_tma_bytes_per_warp=16384,
    ),
    Version(
        id="main", commit=MAIN_COMMIT, date="2026-08-19",
        summary="newest main: low-latency top-k <= 16 (66170bc), internode TMA staging 20,480 B per warp (822a8fc).",
        ll_num_max_topk=16, internode_tma_bytes_per_warp=20480,
    ),
)
_BY_ID = {v.id: v for v in _VERSION_LIST}
DEFAULT_VERSION = "main"

#: version id -> one line naming the commit and what differs.
VERSIONS: dict[str, str] = {v.id: v.description for v in _VERSION_LIST}

#: The upstream this backend follows, for reports and ``epbuf versions``.
UPSTREAM = f"UCCL-EP ({REPO}, ep/) @ {MAIN_SHORT} (2026-08-19) and v0.1.1"


def list_versions() -> tuple[Version, ...]:
    """Every supported version, oldest first.

    >>> [v.id for v in list_versions()]
    ['v0.1.1', 'main']
    """
    return _VERSION_LIST


def get_version(version: str | None = None) -> Version:
    """The :class:`Version` named by an id (``"v0.1.1"``, ``"main"``) or by a prefix of at
    least 7 hex digits of its commit (``"da914a2"``); ``None`` is ``main``.

    >>> get_version("73ee4f1").id
    'v0.1.1'

    Raises:
        InvalidArgumentError: anything else; the message lists the ids.
    """
    if version is None:
        return _BY_ID[DEFAULT_VERSION]
    if isinstance(version, str):
        if version in _BY_ID:
            return _BY_ID[version]
        text = version.lower()
        if len(text) >= 7:
            for v in _VERSION_LIST:
                if v.commit.startswith(text):
                    return v
    c = Checker()
    c.add("version", version, "unknown UCCL-EP version; choose one of "
          + ", ".join(f"{v.id} ({v.short})" for v in _VERSION_LIST))
    c.raise_if_any()
    raise AssertionError("unreachable")  # pragma: no cover
