"""The upstream versions DeepEP V1's formulas and limits follow, by id or by commit.

Upstream is ``github.com/deepseek-ai/DeepEP``. Before EPv2 (``b306af0``, 2026-04-30) V1 sat
in ``csrc/config.hpp``, ``csrc/deep_ep.cpp``, ``csrc/kernels/*`` and ``deep_ep/buffer.py``;
from then on under ``legacy`` names. Citations name the file of the version's layout.

A *version* is everything a report reads from upstream: the low-latency layout variant,
the normal-mode hint formula, the default config tables, the compiled shape lists and
the host checks. :data:`VERSIONS` names ten of them; :func:`get_version` also takes any
commit of main's history (7 to 40 hex digits) and answers the version whose formulas
and limits hold at that commit (:mod:`.commits`, a table built from the history).
"""

from __future__ import annotations

from ...errors import Checker
from ..._record import Record

__all__ = ["Version", "VERSIONS", "DEFAULT_VERSION", "list_versions", "get_version", "REPO", "MAIN_COMMIT",
           "CPL", "CFG", "BUF", "LAUNCH", "LLK", "INK", "PY", "DOC"]

REPO = "github.com/deepseek-ai/DeepEP"
MAIN_COMMIT = "dd758caf451848bd150e1046af3d0a73e5fff38d"

# Files at main (EPv2 layout) and before b306af0 (V1 layout).
_FILES_MAIN = {
    "CPL": "csrc/kernels/legacy/compiled.cuh",  # constants
    "CFG": "csrc/legacy/config.hpp",  # Config, LowLatencyLayout, get_low_latency_rdma_size_hint
    "BUF": "csrc/legacy/buffer.hpp",  # Buffer constructor and dispatch/combine host checks, bindings
    "LAUNCH": "csrc/kernels/legacy/launch.cuh",  # SWITCH_* lists of compiled shapes
    "LLK": "csrc/kernels/legacy/internode_ll.cu",  # low-latency kernels
    "INK": "csrc/kernels/legacy/internode.cu",  # normal internode kernels, token records, clean meta
    "INTRA": "csrc/kernels/legacy/intranode.cu",  # normal intranode kernels (their TMA shared memory)
    "PY": "deep_ep/buffers/legacy.py",  # Python Buffer: num_sms, config tables
    "DOC": "docs/legacy.md",  # the sizing recipe users copy
}
_FILES_V1 = {
    "CPL": "csrc/kernels/configs.cuh",
    "CFG": "csrc/config.hpp",
    "BUF": "csrc/deep_ep.cpp",
    "LAUNCH": "csrc/kernels/launch.cuh",
    "LLK": "csrc/kernels/internode_ll.cu",
    "INK": "csrc/kernels/internode.cu",
    "INTRA": "csrc/kernels/intranode.cu",
    "PY": "deep_ep/buffer.py",
    "DOC": "README.md",
}
CPL, CFG, BUF, LAUNCH, LLK, INK, PY, DOC = (_FILES_MAIN[k] for k in ("CPL", "CFG", "BUF", "LAUNCH", "LLK", "INK",
                                                                       "PY", "DOC"))


class Version(Record):
    """One upstream state whose formulas and limits epbuf reproduces.

    Attributes:
        id: the name users pass as ``version=`` / ``--backend-version`` (a commit's short id
            for states between the named versions).
        commit: the upstream commit (40 hex digits).
        date: its commit date.
        summary: what it is and what differs, for people.
        merged: ``False`` for PR heads that are not in upstream's history.
        size_hint: normal-mode hint formula: ``"released"`` (every released version) or ``"pr434"``.
        tables: the commit whose ``get_dispatch_config`` / ``get_combine_config`` tables apply.
        low_latency: ``LowLatencyLayout`` variant 0..5 (``LL0`` .. ``LL5``).
        int4_count_check: ``Buffer`` checks ``num_*_bytes / sizeof(int4) < INT_MAX`` (4623c67 on).
        ll_num_max_topk: ``kNumMaxTopK`` of the low-latency kernels (9, 11 from 9af0e0d).
        ll_hidden_sizes: the hidden sizes ``SWITCH_HIDDEN`` compiles for low-latency kernels.
        ll_bf16_dispatch: low-latency dispatch accepts BF16 (ed7487c on; before, FP8 only).
        ll_fp8_hidden_512: FP8 low-latency dispatch asserts ``hidden % 512 == 0`` (21efbe9 on).
        intranode_ranks: ``SWITCH_RANKS`` (normal intranode kernels).
        rdma_ranks: ``SWITCH_RDMA_RANKS`` (normal internode kernels, nodes).
        topk_idx_configurable: ``topk_idx_t`` can be built 32-bit (da6ca24 on).
        nvl_clean_meta: ``get_nvl_clean_meta``'s bytes per token: 0 = the unaligned sum of the
            fields (ebfe47e), 1 = ``get_num_bytes_per_token`` for dispatch only (a2fa3b7),
            2 = ``get_num_bytes_per_token`` always (06f417d on).
        legacy_paths: the commit has the EPv2 file layout (``csrc/legacy/...``, b306af0 on).
        nvl_barrier_signals: the constructor appends ``NUM_MAX_NVL_PEERS`` barrier signal ints to
            the NVL allocation (8da2d7b on); before, a task FIFO of ``NUM_MAX_FIFO_SLOTS`` ints
            (:mod:`.memory`).
    """

    id: str
    commit: str
    date: str
    summary: str
    merged: bool = True
    size_hint: str = "released"
    tables: str
    low_latency: int
    int4_count_check: bool
    ll_num_max_topk: int
    ll_hidden_sizes: tuple[int, ...]
    ll_bf16_dispatch: bool
    ll_fp8_hidden_512: bool
    intranode_ranks: tuple[int, ...] = (2, 4, 8)
    rdma_ranks: tuple[int, ...]
    topk_idx_configurable: bool = False
    nvl_clean_meta: int = 2
    legacy_paths: bool = False
    nvl_barrier_signals: bool = True

    def __init__(self, **values) -> None:
        # Record's generic initialiser: the ten versions are built at import, where compiling a
        # class-specific __init__ (Record's default) would cost more than building them (cold start).
        self._generic_init(**values)

    @property
    def short(self) -> str:
        return self.commit[:7]

    @property
    def description(self) -> str:
        state = "" if self.merged else "UNMERGED, "
        return f"{self.id}: {REPO}@{self.short} ({state}{self.date}): {self.summary}"

    def cite(self, file: str, lines: str, what: str = "") -> str:
        """An upstream citation for this version: ``path:lines @ commit`` at main (whose line
        numbers this package was written against), ``path @ commit (what)`` elsewhere."""
        if self.commit == MAIN_COMMIT:
            return f"{_FILES_MAIN[file]}:{lines} @ {self.short}"
        path = (_FILES_MAIN if self.legacy_paths else _FILES_V1)[file]
        return f"{path} @ {self.short}" + (f" ({what})" if what else "")

    def state(self) -> tuple:
        """What the formulas and limits read (a row of :mod:`.commits`), without names or paths."""
        return (self.low_latency, self.tables, self.ll_num_max_topk, self.ll_hidden_sizes, self.rdma_ranks,
                self.ll_fp8_hidden_512, self.int4_count_check, self.topk_idx_configurable, self.nvl_clean_meta,
                self.size_hint == "pr434", self.nvl_barrier_signals)


_HIDDEN_LL0 = (2560, 5120, 7168)  # SWITCH_HIDDEN at ebfe47e
_RDMA_RANKS_LL0 = (2, 3, 4, 8, 16, 18, 20)  # SWITCH_RDMA_RANKS at ebfe47e
_HIDDEN_LL5 = (2048, 2560, 4096, 5120, 6144, 7168, 8192)
_RDMA_RANKS_E02E4D2 = (2, 3, 4, 6, 8, 12, 16, 18, 20)

_VERSION_LIST: tuple[Version, ...] = (
    Version(
        id="ll0", commit="ebfe47e46fa86a5b41be96c326a92f62ed6721da", date="2025-02-25",
        summary="initial commit (version string 1.0.0). LL0 layout: FP8-only dispatch message, "
                "combine message with a control int4, signaling 4E + 4E/num_ranks bytes (num_ranks "
                "enters the hint), placed after send/recv. Tables: one config for every rank count <= 8.",
        tables="ebfe47e", low_latency=0, int4_count_check=False, ll_num_max_topk=9, ll_hidden_sizes=_HIDDEN_LL0,
        ll_bf16_dispatch=False, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0, nvl_clean_meta=0,
        nvl_barrier_signals=False,
    ),
    Version(
        id="ll1", commit="6cc3497df8d6d02089fb0a0e3c24bb6f21c333d5", date="2025-03-03",
        summary="LL1 (\"Remove all raw tensors for better P2P overlapping\"): signaling shrinks to 4E bytes, "
                "num_ranks no longer enters the low-latency hint.",
        tables="ebfe47e", low_latency=1, int4_count_check=False, ll_num_max_topk=9, ll_hidden_sizes=_HIDDEN_LL0,
        ll_bf16_dispatch=False, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0, nvl_clean_meta=0,
        nvl_barrier_signals=False,
    ),
    Version(
        id="ll2", commit="ed7487c15e219161f86656ed6604aa9877bf72bc", date="2025-03-10",
        summary="LL2 (\"Support BF16 for low-latency kernels\"): dispatch slot 16 + max(2H, H + 4H/128). "
                "Tables of 1553fc4 (explicit EP2/4/8 entries).",
        tables="1553fc4", low_latency=2, int4_count_check=False, ll_num_max_topk=9, ll_hidden_sizes=_HIDDEN_LL0,
        ll_bf16_dispatch=True, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0, nvl_clean_meta=0,
        nvl_barrier_signals=False,
    ),
    Version(
        id="ll3", commit="42494864ba64b6520337a6d084dc209ac6be4905", date="2025-04-07",
        summary="LL3 (\"Remove useless control metadata for low-latency combine\"): combine slot 2H.",
        tables="1553fc4", low_latency=3, int4_count_check=False, ll_num_max_topk=9, ll_hidden_sizes=_HIDDEN_LL0,
        ll_bf16_dispatch=True, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0, nvl_clean_meta=0,
        nvl_barrier_signals=False,
    ),
    Version(
        id="v1.1.0", commit="b8d90fb7531d6ef1d53e36d6c5819030dc633633", date="2025-06-11",
        summary="first commit with version string 1.1.0 (\"Support Ampere architecture\" #204; the string "
                "spans LL3..LL5). LL3 layout, tables of c8dceba, low-latency hidden +4096.",
        tables="c8dceba", low_latency=3, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=(2560, 4096, 5120, 7168), ll_bf16_dispatch=True, ll_fp8_hidden_512=False,
        rdma_ranks=_RDMA_RANKS_LL0, nvl_clean_meta=0,
    ),
    Version(
        id="ll4", commit="42253d084685fc7c265e98b1be782566f0cfac1f", date="2025-07-29",
        summary="LL4 (#313): signaling aligned up to 128 B and placed first. Tables of bdd119f.",
        tables="bdd119f", low_latency=4, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=(2048, 2560, 4096, 5120, 7168, 8192), ll_bf16_dispatch=True, ll_fp8_hidden_512=True,
        rdma_ranks=(2, 4, 8, 16),
    ),
    Version(
        id="ll5", commit="c5facf5c6fef042e56627c33817feebaf97aee26", date="2025-08-07",
        summary="LL5 (\"Support 10-bit LogFMT Combine\" #345): combine slot 4 x H/128 + 2H. "
                "The layout of every later version.",
        tables="bdd119f", low_latency=5, int4_count_check=False, ll_num_max_topk=9, ll_hidden_sizes=_HIDDEN_LL5,
        ll_bf16_dispatch=True, ll_fp8_hidden_512=True, rdma_ranks=(2, 4, 8, 16),
    ),
    Version(
        id="v1.2.1", commit="9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee", date="2025-09-15",
        summary="tag v1.2.1, upstream's only git tag (\"support topk10 in low latency kernel\" #403): LL5, "
                "low-latency top-k up to 11, tables of bdd119f, no upper bound on the buffer sizes. "
                "Wheels labelled 1.2.1 also cover later commits up to 2.0.0.",
        tables="bdd119f", low_latency=5, int4_count_check=False, ll_num_max_topk=11, ll_hidden_sizes=_HIDDEN_LL5,
        ll_bf16_dispatch=True, ll_fp8_hidden_512=True, rdma_ranks=(2, 4, 8, 16, 18, 20),
    ),
    Version(
        id="pr434", commit="74cfcc2c19ce599e608511227deb0db3621ff28c", date="2025-09-26",
        summary="PR #434 head, NOT MERGED (\"Fix get_nvl_buffer_size_hint and get_rdma_buffer_size_hint\"), "
                "on e02e4d2: NVL metadata (2R + 2) ints, top-k indices as int, + an int4 per NVL token, "
                "+ u64 head/tail per RDMA channel. Low-latency and tables as at e02e4d2.",
        merged=False, size_hint="pr434", tables="e02e4d2", low_latency=5, int4_count_check=False,
        ll_num_max_topk=11, ll_hidden_sizes=_HIDDEN_LL5, ll_bf16_dispatch=True, ll_fp8_hidden_512=True,
        rdma_ranks=_RDMA_RANKS_E02E4D2, topk_idx_configurable=True,
    ),
    Version(
        id="main", commit=MAIN_COMMIT, date="2026-07-14",
        summary="newest main (V1 as \"legacy\" since 2.0.0; same arithmetic in 2.0.0 and 2.1.0): LL5, tables of "
                "e02e4d2, Buffer rejects num_*_bytes / 16 >= INT_MAX (from 4623c67), low-latency hidden +3072.",
        tables="e02e4d2", low_latency=5, int4_count_check=True, ll_num_max_topk=11,
        ll_hidden_sizes=(2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192), ll_bf16_dispatch=True,
        ll_fp8_hidden_512=True, rdma_ranks=_RDMA_RANKS_E02E4D2, topk_idx_configurable=True, legacy_paths=True,
    ),
)
_VERSIONS_BY_ID = {v.id: v for v in _VERSION_LIST}
DEFAULT_VERSION = "main"
_DEFAULT = _VERSIONS_BY_ID[DEFAULT_VERSION]

#: version id -> one line naming the commit and what differs.
VERSIONS: dict[str, str] = {v.id: v.description for v in _VERSION_LIST}


def list_versions() -> tuple[Version, ...]:
    """Every named version, oldest first.

    >>> [v.id for v in list_versions()][-3:]
    ['v1.2.1', 'pr434', 'main']
    """
    return _VERSION_LIST


def get_version(version: str | None = None) -> Version:
    """The :class:`Version` named ``version``: a version id, or a commit id of upstream's main
    history (7 to 40 hex digits), which answers the version whose formulas and limits hold at
    that commit (``None``: newest main).

    >>> get_version("dd758ca").id, get_version("9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee").id
    ('main', 'v1.2.1')
    >>> get_version("e6d61fc").tables   # between v1.1.0 and ll4: a state no named version has
    'e6d61fc'

    Raises:
        InvalidArgumentError: an unknown id or commit; the message lists the ids.
    """
    if version is None:
        return _DEFAULT
    found = _VERSIONS_BY_ID.get(version) if type(version) is str else None
    if found is not None:
        return found
    if type(version) is str:
        from .commits import find_commit  # only commit ids pay for the history table

        row = find_commit(version)
        if row is not None:
            return _at_commit(*row)
    c = Checker()
    c.add("version", version, "unknown DeepEP V1 version; choose one of " + ", ".join(_VERSIONS_BY_ID)
          + ", or a commit of DeepEP's main history (7 to 40 hex digits, ebfe47e .. dd758ca)")
    c.raise_if_any()
    return _DEFAULT  # unreachable  # pragma: no cover


def topk_idx_bytes(v: Version, num_topk_idx_bits: object) -> int:
    """``sizeof(topk_idx_t)`` of a build of ``v``: 8, or 4 with 32-bit indices (``TOPK_IDX_BITS=32``
    from da6ca24, ``EP_NUM_TOPK_IDX_BITS=32`` from 2.0.0); earlier versions have no such build.
    ``None`` means the default, 64 bits."""
    if num_topk_idx_bits is None or (num_topk_idx_bits == 64 and type(num_topk_idx_bits) is int):
        return 8
    if num_topk_idx_bits == 32 and type(num_topk_idx_bits) is int and v.topk_idx_configurable:
        return 4
    c = Checker()
    c.add("num_topk_idx_bits", num_topk_idx_bits,
          f"allowed {'32, 64' if v.topk_idx_configurable else '64'} at {v.id} "
          "(TOPK_IDX_BITS / EP_NUM_TOPK_IDX_BITS build option, da6ca24 on)")
    c.raise_if_any()
    return 8  # unreachable  # pragma: no cover


_AT_COMMIT: dict[str, Version] = {}


def _at_commit(commit: str, date: str, row: tuple) -> Version:
    """The named version whose state is ``row`` (a :mod:`.commits` row), else a version named
    by the commit's short id with that state."""
    found = next((v for v in _VERSION_LIST if v.state() == row[:-1]), None) or _AT_COMMIT.get(commit)
    if found is not None:
        return found
    ll, tables, topk, hidden, rdma, fp8_512, int4, bits, nvl_clean, pr434, barrier, legacy = row
    summary = (f"a commit between named versions: LL{ll} layout, tables of {tables}, low-latency top-k <= {topk}, "
               f"SWITCH_HIDDEN {', '.join(map(str, hidden))}, SWITCH_RDMA_RANKS {', '.join(map(str, rdma))}"
               + ("" if fp8_512 else ", no FP8 hidden % 512 assert") + (", 32-bit topk_idx_t builds" if bits else "")
               + (", Buffer checks num_*_bytes / 16 < INT_MAX" if int4 else "") + f", NVL clean meta {nvl_clean}"
               + ("" if barrier else ", task FIFO in the NVL allocation"))
    found = Version(id=commit[:7], commit=commit, date=date, summary=summary, size_hint="pr434" if pr434 else "released",
                    tables=tables, low_latency=ll, int4_count_check=int4, ll_num_max_topk=topk, ll_hidden_sizes=hidden,
                    ll_bf16_dispatch=ll >= 2, ll_fp8_hidden_512=fp8_512, rdma_ranks=rdma,
                    topk_idx_configurable=bits, nvl_clean_meta=nvl_clean, legacy_paths=legacy,
                    nvl_barrier_signals=barrier)
    _AT_COMMIT[commit] = found
    return found
