"""DeepEP V1 ("legacy"): normal-mode NVL/RDMA buffers and the low-latency RDMA buffer, exact to the byte.

Upstream: ``github.com/deepseek-ai/DeepEP``. Unless a citation names another commit,
``path:line`` refers to ``main`` at ``dd758caf451848bd150e1046af3d0a73e5fff38d``
(2026-07-14, version string 2.1.0), where V1 lives under ``legacy`` names:

* ``csrc/kernels/legacy/compiled.cuh`` — constants (``CPL``)
* ``csrc/legacy/config.hpp`` — ``Config``, ``LowLatencyLayout``, ``get_low_latency_rdma_size_hint`` (``CFG``)
* ``csrc/legacy/buffer.hpp`` — ``Buffer`` constructor checks, dispatch/combine host checks, bindings (``BUF``)
* ``csrc/kernels/legacy/launch.cuh`` — the ``SWITCH_*`` lists of compiled shapes (``LAUNCH``)
* ``csrc/kernels/legacy/internode_ll.cu`` / ``internode.cu`` — kernels (``LLK`` / ``INK``)
* ``deep_ep/buffers/legacy.py`` — Python ``Buffer``: ``num_sms``, config tables (``PY``)
* ``docs/legacy.md`` — the sizing recipe users copy (``DOC``)

Before EPv2 (``b306af0``, 2026-04-30) the same code sat in ``csrc/config.hpp``,
``csrc/deep_ep.cpp``, ``csrc/kernels/configs.cuh`` and ``deep_ep/buffer.py``; older
versions are cited by those paths at their commit.

What upstream computes
----------------------
*Normal mode* sizes two buffers from a :class:`Config` (SMs and chunk sizes):
``get_nvl_buffer_size_hint`` reserves, per channel (``num_sms / 2``) and NVL peer, a
ring of ``num_max_nvl_chunked_recv_tokens`` token slots of hidden bytes, a source-meta,
128 top-k indices, 128 top-k weights and 128 scales; ``get_rdma_buffer_size_hint`` does
the same per RDMA peer, twice (send and receive halves). The README recipe takes the
max over the default dispatch and combine configs of the rank count. Neither depends
on the number of tokens.

*Low-latency mode* sizes one RDMA buffer from :class:`LowLatencyLayout`: two
(odd/even) sets of signaling, send and receive buffers; the hint is the layout's
``total_bytes`` rounded up to 128 *plus a full block when already aligned*.

Versions
--------
Formulas changed over upstream's history; :data:`VERSIONS` names the commits this
module reproduces (``main`` by default; ``pr434`` is the *unmerged* PR #434).
"""

from __future__ import annotations

from functools import lru_cache
from operator import itemgetter

from .._record import Record
from .._search import largest_true

from ..errors import Checker, InvalidArgumentError
from ..report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report, Summary, summary_of
from ..units import INT32_MAX, MiB, align, format_int

__all__ = [
    "Version",
    "VERSIONS",
    "list_versions",
    "get_version",
    "Config",
    "get_dispatch_config",
    "get_combine_config",
    "get_hidden_bytes",
    "supported_num_ranks",
    "num_bytes_per_dispatch_msg",
    "num_bytes_per_combine_msg",
    "LowLatencyBuffer",
    "Span",
    "LowLatencyLayout",
    "low_latency_buffer",
    "get_low_latency_rdma_size_hint",
    "max_low_latency_tokens",
    "report_normal",
    "report_low_latency",
    "summarize_normal",
    "summarize_low_latency",
]

REPO = "github.com/deepseek-ai/DeepEP"
MAIN_COMMIT = "dd758caf451848bd150e1046af3d0a73e5fff38d"

# Files at main (EPv2 layout) and before b306af0 (V1 layout).
_FILES_MAIN = {
    "CPL": "csrc/kernels/legacy/compiled.cuh",
    "CFG": "csrc/legacy/config.hpp",
    "BUF": "csrc/legacy/buffer.hpp",
    "LAUNCH": "csrc/kernels/legacy/launch.cuh",
    "LLK": "csrc/kernels/legacy/internode_ll.cu",
    "INK": "csrc/kernels/legacy/internode.cu",
    "PY": "deep_ep/buffers/legacy.py",
    "DOC": "docs/legacy.md",
}
_FILES_V1 = {
    "CPL": "csrc/kernels/configs.cuh",
    "CFG": "csrc/config.hpp",
    "BUF": "csrc/deep_ep.cpp",
    "LAUNCH": "csrc/kernels/launch.cuh",
    "LLK": "csrc/kernels/internode_ll.cu",
    "INK": "csrc/kernels/internode.cu",
    "PY": "deep_ep/buffer.py",
    "DOC": "README.md",
}
CPL, CFG, BUF, LAUNCH, LLK, INK, PY, DOC = (_FILES_MAIN[k] for k in _FILES_MAIN)

# --- constants (CPL:5-9, unchanged since ebfe47e, where they lack the LEGACY_ prefix) ---
NUM_MAX_NVL_PEERS = 8  # LEGACY_NUM_MAX_NVL_PEERS (CPL:5): GPUs per NVLink node, hard-coded
NUM_MAX_RDMA_PEERS = 20  # LEGACY_NUM_MAX_RDMA_PEERS (CPL:6): nodes in normal mode
NUM_WORKSPACE_BYTES = 32 * MiB  # LEGACY_NUM_WORKSPACE_BYTES (CPL:7)
NUM_MAX_LOCAL_EXPERTS = 1024  # LEGACY_NUM_MAX_LOCAL_EXPERTS (CPL:8)
NUM_BUFFER_ALIGNMENT_BYTES = 128  # LEGACY_NUM_BUFFER_ALIGNMENT_BYTES (CPL:9)

# --- what the normal-mode hints assume (CFG:56-57, 82-83) ---------------------------
# Local `constexpr`s of the hints, *not* kernel limits: the hint reserves room for 128
# top-k entries and 128 fp32 scales per token whatever the model uses.
HINT_NUM_MAX_TOPK = 128  # kNumMaxTopK in get_{nvl,rdma}_buffer_size_hint
HINT_NUM_MAX_SCALES = 128  # kNumMaxScales in get_{nvl,rdma}_buffer_size_hint

# --- element sizes --------------------------------------------------------------------
INT4_BYTES = 16  # sizeof(int4)
INT_BYTES = 4  # sizeof(int) == sizeof(float)
FLOAT_BYTES = 4
BF16_BYTES = 2  # sizeof(nv_bfloat16)
BF162_BYTES = 4  # sizeof(nv_bfloat162): one LogFMT min/max pair per 128 channels
UINT64_BYTES = 8
SOURCE_META_BYTES = 8  # sizeof(internode::SourceMeta) = two ints (INK:22-45)
DEFAULT_TOPK_IDX_BITS = 64  # topk_idx_t = int64_t unless built with TOPK_IDX_BITS=32 (da6ca24 on)

# --- kernel facts -----------------------------------------------------------------------
NUM_CHANNELS_PER_SM = 2  # a channel is decoupled into 2 SMs: num_channels = num_sms / 2 (CFG:62)
NORMAL_NUM_MAX_TOPK = 32  # EP_DEVICE_ASSERT(num_topk <= 32) in the normal kernels (INK:519, 1754)
FP8_SCALE_BLOCK = 128  # num_scales = hidden / 128 (CFG:132): one fp32 scale per 128 channels
DEFAULT_NUM_SMS = 20  # Buffer.num_sms (PY:31), unchanged in every version
# The Python binding's defaults of Config (BUF:1752-1760).
BINDING_DEFAULT_CONFIG = (20, 6, 256, 6, 256)

# Buffer(...) checks `num_*_bytes / sizeof(int4) < INT_MAX` from 4623c67 (2025-10-15,
# "Fix OOB" #454; BUF:111-112). With the `% 128` rule the largest legal size is
# 2^35 - 128: floor(n / 16) < 2^31 - 1  <=>  n <= 2^35 - 17, rounded down to 128.
MAX_NUM_BYTES_INT4_CHECK = (INT32_MAX * INT4_BYTES - 1) // NUM_BUFFER_ALIGNMENT_BYTES * NUM_BUFFER_ALIGNMENT_BYTES


# ======================================================================================
# Versions
# ======================================================================================
class Version(Record):
    """One upstream state whose formulas and limits this module reproduces.

    Attributes:
        id: the name users pass as ``--deepep-version``.
        commit: the upstream commit (40 hex digits).
        date: its commit date.
        summary: what it is and what differs, for people.
        merged: ``False`` for PR heads that are not in upstream's history.
        size_hint: normal-mode hint formula: ``"released"`` (every released version)
            or ``"pr434"``.
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

    @property
    def short(self) -> str:
        return self.commit[:7]

    @property
    def description(self) -> str:
        state = "" if self.merged else "UNMERGED, "
        return f"{self.id}: {REPO}@{self.short} ({state}{self.date}): {self.summary}"

    def cite(self, file: str, lines: str, what: str = "") -> str:
        """An upstream citation for this version: ``path:lines @ commit`` at main (whose
        line numbers this module was written against), ``path @ commit (what)`` before."""
        if self.commit == MAIN_COMMIT:
            return f"{_FILES_MAIN[file]}:{lines} @ {self.short}"
        return f"{_FILES_V1[file]} @ {self.short}" + (f" ({what})" if what else "")


_HIDDEN_LL0 = (2560, 5120, 7168)  # SWITCH_HIDDEN at ebfe47e
_RDMA_RANKS_LL0 = (2, 3, 4, 8, 16, 18, 20)  # SWITCH_RDMA_RANKS at ebfe47e

_VERSION_LIST: tuple[Version, ...] = (
    Version(
        id="ll0", commit="ebfe47e46fa86a5b41be96c326a92f62ed6721da", date="2025-02-25",
        summary="initial commit (version string 1.0.0). LL0 layout: FP8-only dispatch message, "
                "combine message with a control int4, signaling 4E + 4E/num_ranks bytes (num_ranks "
                "enters the hint), placed after send/recv. Tables: one config for every rank count <= 8.",
        tables="ebfe47e", low_latency=0, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=_HIDDEN_LL0, ll_bf16_dispatch=False, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0,
    ),
    Version(
        id="ll1", commit="6cc3497df8d6d02089fb0a0e3c24bb6f21c333d5", date="2025-03-03",
        summary="LL1 (\"Remove all raw tensors for better P2P overlapping\"): signaling shrinks to 4E bytes, "
                "num_ranks no longer enters the low-latency hint.",
        tables="ebfe47e", low_latency=1, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=_HIDDEN_LL0, ll_bf16_dispatch=False, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0,
    ),
    Version(
        id="ll2", commit="ed7487c15e219161f86656ed6604aa9877bf72bc", date="2025-03-10",
        summary="LL2 (\"Support BF16 for low-latency kernels\"): dispatch slot 16 + max(2H, H + 4H/128). "
                "Tables of 1553fc4 (explicit EP2/4/8 entries).",
        tables="1553fc4", low_latency=2, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=_HIDDEN_LL0, ll_bf16_dispatch=True, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0,
    ),
    Version(
        id="ll3", commit="42494864ba64b6520337a6d084dc209ac6be4905", date="2025-04-07",
        summary="LL3 (\"Remove useless control metadata for low-latency combine\"): combine slot 2H.",
        tables="1553fc4", low_latency=3, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=_HIDDEN_LL0, ll_bf16_dispatch=True, ll_fp8_hidden_512=False, rdma_ranks=_RDMA_RANKS_LL0,
    ),
    Version(
        id="v1.1.0", commit="b8d90fb7531d6ef1d53e36d6c5819030dc633633", date="2025-06-11",
        summary="first commit with version string 1.1.0 (\"Support Ampere architecture\" #204; the string "
                "spans LL3..LL5). LL3 layout, tables of c8dceba, low-latency hidden +4096.",
        tables="c8dceba", low_latency=3, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=(2560, 4096, 5120, 7168), ll_bf16_dispatch=True, ll_fp8_hidden_512=False,
        rdma_ranks=_RDMA_RANKS_LL0,
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
        tables="bdd119f", low_latency=5, int4_count_check=False, ll_num_max_topk=9,
        ll_hidden_sizes=(2048, 2560, 4096, 5120, 6144, 7168, 8192), ll_bf16_dispatch=True, ll_fp8_hidden_512=True,
        rdma_ranks=(2, 4, 8, 16),
    ),
    Version(
        id="v1.2.1", commit="9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee", date="2025-09-15",
        summary="tag v1.2.1, upstream's only git tag (\"support topk10 in low latency kernel\" #403): LL5, "
                "low-latency top-k up to 11, tables of bdd119f, no upper bound on the buffer sizes. "
                "Wheels labelled 1.2.1 also cover later commits up to 2.0.0.",
        tables="bdd119f", low_latency=5, int4_count_check=False, ll_num_max_topk=11,
        ll_hidden_sizes=(2048, 2560, 4096, 5120, 6144, 7168, 8192), ll_bf16_dispatch=True, ll_fp8_hidden_512=True,
        rdma_ranks=(2, 4, 8, 16, 18, 20),
    ),
    Version(
        id="pr434", commit="74cfcc2c19ce599e608511227deb0db3621ff28c", date="2025-09-26",
        summary="PR #434 head, NOT MERGED (\"Fix get_nvl_buffer_size_hint and get_rdma_buffer_size_hint\"), "
                "on e02e4d2: NVL metadata (2R + 2) ints, top-k indices as int, + an int4 per NVL token, "
                "+ u64 head/tail per RDMA channel. Low-latency and tables as at e02e4d2.",
        merged=False, size_hint="pr434", tables="e02e4d2", low_latency=5, int4_count_check=False,
        ll_num_max_topk=11, ll_hidden_sizes=(2048, 2560, 4096, 5120, 6144, 7168, 8192), ll_bf16_dispatch=True,
        ll_fp8_hidden_512=True, rdma_ranks=(2, 3, 4, 6, 8, 12, 16, 18, 20), topk_idx_configurable=True,
    ),
    Version(
        id="main", commit=MAIN_COMMIT, date="2026-07-14",
        summary="newest main (V1 as \"legacy\" since 2.0.0; same arithmetic in 2.0.0 and 2.1.0): LL5, tables of "
                "e02e4d2, Buffer rejects num_*_bytes / 16 >= INT_MAX (from 4623c67), low-latency hidden +3072.",
        tables="e02e4d2", low_latency=5, int4_count_check=True, ll_num_max_topk=11,
        ll_hidden_sizes=(2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192), ll_bf16_dispatch=True,
        ll_fp8_hidden_512=True, rdma_ranks=(2, 3, 4, 6, 8, 12, 16, 18, 20), topk_idx_configurable=True,
    ),
)
_VERSIONS_BY_ID = {v.id: v for v in _VERSION_LIST}
DEFAULT_VERSION = "main"

#: version id -> one line naming the commit and what differs.
VERSIONS: dict[str, str] = {v.id: v.description for v in _VERSION_LIST}


def list_versions() -> tuple[Version, ...]:
    """Every version id this module reproduces, oldest first.

    >>> [v.id for v in list_versions()][-3:]
    ['v1.2.1', 'pr434', 'main']
    """
    return _VERSION_LIST


def get_version(version: str | None = None) -> Version:
    """The :class:`Version` named ``version`` (``None``: newest main).

    Raises:
        InvalidArgumentError: an unknown id; the message lists the allowed ones.
    """
    if version is None:
        return _VERSIONS_BY_ID[DEFAULT_VERSION]
    found = _VERSIONS_BY_ID.get(version) if isinstance(version, str) else None
    if found is None:
        c = Checker()
        c.add("version", version, "unknown DeepEP V1 version; choose one of " + ", ".join(_VERSIONS_BY_ID))
        c.raise_if_any()
    return found


# ======================================================================================
# Normal mode: Config and its size hints
# ======================================================================================
def _check_hint_args(c: Checker, hidden_bytes: object, num_ranks: object, num_sms: int, internode_only: bool) -> bool:
    """The arguments and host asserts of ``get_{nvl,rdma}_buffer_size_hint`` (CFG:58-59, 84-85)."""
    ok = c.int_range("hidden_bytes", hidden_bytes, 1, None, "bytes per token")
    if not c.int_range("num_ranks", num_ranks, 1, INT32_MAX):
        return False
    assert isinstance(num_ranks, int)
    if internode_only and num_ranks <= NUM_MAX_NVL_PEERS:
        return ok  # the RDMA hint returns 0 before its asserts (CFG:77-78)
    if num_ranks > NUM_MAX_NVL_PEERS and num_ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", num_ranks,
              f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
              f"(EP_HOST_ASSERT in the size hints, {CFG}:58, 84)")
        ok = False
    if num_ranks > NUM_MAX_NVL_PEERS and num_sms % 2:
        c.add("num_sms", num_sms,
              f"must be even above {NUM_MAX_NVL_PEERS} ranks (num_ranks = {num_ranks}; {CFG}:59, 85)")
        ok = False
    return ok


def _topk_idx_bytes(c: Checker, num_topk_idx_bits: object, version: Version) -> int:
    """``sizeof(topk_idx_t)``: 8, or 4 in builds with ``TOPK_IDX_BITS=32`` (da6ca24 on)."""
    allowed = (32, 64) if version.topk_idx_configurable else (64,)
    if num_topk_idx_bits not in allowed or isinstance(num_topk_idx_bits, bool):
        c.add("num_topk_idx_bits", num_topk_idx_bits,
              f"allowed {', '.join(map(str, allowed))} at {version.id} "
              "(TOPK_IDX_BITS / EP_NUM_TOPK_IDX_BITS build option, da6ca24 on)")
        return 8
    return num_topk_idx_bits // 8  # type: ignore[operator]


def _padding_region(num_bytes: int, rounded: int, formula: str, source: str) -> list[Region]:
    """The bytes a hint's rounding adds on top of its terms, so regions sum to the buffer."""
    if rounded == num_bytes:
        return []
    return [Region(name="alignment padding", num_bytes=rounded - num_bytes, num_bytes_used=0,
                   formula=formula, source=source)]


class Config(Record):
    """``deep_ep::legacy::Config`` (``CFG:24-51``): SMs and chunk sizes of the normal kernels.

    Defaults are the Python binding's (``BUF:1752-1760``). The constructor applies
    upstream's rules: every count positive, NVL send < recv, and the RDMA receive count
    rounded *up* to a multiple of the send count before checking send < recv and
    send <= recv / 2 (``CFG:41-50``). The rounded value is what the attribute holds::

        >>> Config().num_max_rdma_chunked_recv_tokens      # align_up(256, 6)
        258
        >>> Config(num_sms=24, num_max_nvl_chunked_send_tokens=8, num_max_nvl_chunked_recv_tokens=512,
        ...        num_max_rdma_chunked_send_tokens=16, num_max_rdma_chunked_recv_tokens=128
        ...        ).get_nvl_buffer_size_hint(7168, 16)
        453380736

    Before 1fc40d5 (2025-03-06) send < recv was checked before the rounding and there was
    no ``recv / 2`` rule; both orders accept exactly the same configs (once rounded,
    ``recv = k * send`` and ``send < recv`` means ``k >= 2``, hence ``send <= recv / 2``),
    so one constructor serves every version.

    Raises:
        InvalidArgumentError: every broken rule at once, naming field, value and rule.
    """

    num_sms: int = BINDING_DEFAULT_CONFIG[0]
    num_max_nvl_chunked_send_tokens: int = BINDING_DEFAULT_CONFIG[1]
    num_max_nvl_chunked_recv_tokens: int = BINDING_DEFAULT_CONFIG[2]
    num_max_rdma_chunked_send_tokens: int = BINDING_DEFAULT_CONFIG[3]
    num_max_rdma_chunked_recv_tokens: int = BINDING_DEFAULT_CONFIG[4]

    def __post_init__(self) -> None:
        c = Checker()
        where = f"Config constructor, {CFG}"
        c.int_range("num_sms", self.num_sms, 0, INT32_MAX, f"{where}:41")
        nvl_send_ok = c.int_range("num_max_nvl_chunked_send_tokens", self.num_max_nvl_chunked_send_tokens,
                                  1, INT32_MAX, f"{where}:42")
        nvl_recv_ok = c.int_range("num_max_nvl_chunked_recv_tokens", self.num_max_nvl_chunked_recv_tokens,
                                  1, INT32_MAX, f"{where}:42")
        if nvl_send_ok and nvl_recv_ok and self.num_max_nvl_chunked_send_tokens >= self.num_max_nvl_chunked_recv_tokens:
            c.add("num_max_nvl_chunked_send_tokens", self.num_max_nvl_chunked_send_tokens,
                  f"must be < num_max_nvl_chunked_recv_tokens = {self.num_max_nvl_chunked_recv_tokens} ({where}:43)")
        send = self.num_max_rdma_chunked_send_tokens
        rdma_send_ok = c.int_range("num_max_rdma_chunked_send_tokens", send, 1, INT32_MAX, f"{where}:44")
        rdma_recv_ok = c.int_range("num_max_rdma_chunked_recv_tokens", self.num_max_rdma_chunked_recv_tokens,
                                   1, INT32_MAX, f"{where}:44")
        if rdma_send_ok and rdma_recv_ok:
            # "Ceil up RDMA buffer size" (CFG:46-47): the receive ring holds whole send chunks.
            recv = align(self.num_max_rdma_chunked_recv_tokens, send)
            if recv > INT32_MAX:
                c.add("num_max_rdma_chunked_recv_tokens", self.num_max_rdma_chunked_recv_tokens,
                      f"rounded up to a multiple of num_max_rdma_chunked_send_tokens = {send} it is {recv}, "
                      f"beyond int32 ({where}:47)")
            elif not send < recv:
                c.add("num_max_rdma_chunked_send_tokens", send,
                      f"must be < num_max_rdma_chunked_recv_tokens rounded up to a multiple of it "
                      f"(align_up({self.num_max_rdma_chunked_recv_tokens}, {send}) = {recv}) ({where}:48)")
            elif not send <= recv // 2:  # implied by the line above; kept as upstream states it
                c.add("num_max_rdma_chunked_send_tokens", send,
                      f"must be <= num_max_rdma_chunked_recv_tokens / 2 = {recv // 2} "
                      f"(RDMA lazy head update, {where}:49-50)")
            else:
                object.__setattr__(self, "num_max_rdma_chunked_recv_tokens", recv)
        c.raise_if_any()

    @property
    def num_channels(self) -> int:
        """``num_sms / 2`` (C++ ``int`` division, ``CFG:62``)."""
        return self.num_sms // NUM_CHANNELS_PER_SM

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        """``(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv)`` with the rounded RDMA receive count."""
        return (self.num_sms, self.num_max_nvl_chunked_send_tokens, self.num_max_nvl_chunked_recv_tokens,
                self.num_max_rdma_chunked_send_tokens, self.num_max_rdma_chunked_recv_tokens)

    # --- NVL ---------------------------------------------------------------------------
    def nvl_buffer(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                   num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> Buffer:
        """The terms of ``get_nvl_buffer_size_hint`` (``CFG:53-73``) as named regions.

        With ``C = num_sms / 2`` channels, ``N = min(num_ranks, 8)`` NVL peers,
        ``R = max(num_ranks / 8, 1)`` RDMA peers and ``T = num_max_nvl_chunked_recv_tokens``:
        ``C*N*(2R + 3)`` ints of channel metadata, then per token slot ``C*N*T`` x
        (``hidden_bytes`` + 8 B source meta + 128 top-k indices + 128 fp32 weights + 128
        fp32 scales). The sum is rounded up to 128 B. ``pr434``: ``(2R + 2)`` ints, top-k
        indices as ``int``, and an extra ``int4`` per token slot.

        Args:
            hidden_bytes: bytes per token (the recipe passes :func:`get_hidden_bytes`).
            num_ranks: expert-parallel ranks.
            version: a :data:`VERSIONS` id (``None``: main).
            num_topk_idx_bits: ``topk_idx_t`` width of the build (64, or 32 from da6ca24).

        Returns:
            Buffer "NVL buffer": rule ``"sum"``, regions ending with the rounding padding.

        Raises:
            InvalidArgumentError: upstream's asserts (ranks not below or a multiple of 8,
                odd ``num_sms`` above 8 ranks), non-positive sizes, unknown version.
        """
        v = get_version(version)
        c = Checker()
        _check_hint_args(c, hidden_bytes, num_ranks, self.num_sms, internode_only=False)
        idx_bytes = _topk_idx_bytes(c, num_topk_idx_bits, v)
        c.raise_if_any()
        pr434 = v.size_hint == "pr434"
        num_rdma_ranks = max(num_ranks // NUM_MAX_NVL_PEERS, 1)
        num_nvl_ranks = min(num_ranks, NUM_MAX_NVL_PEERS)
        ch, n, r = self.num_channels, num_nvl_ranks, num_rdma_ranks
        t = self.num_max_nvl_chunked_recv_tokens
        slots = ch * n * t
        slot_text = f"{ch} channels x {n} NVL ranks x {format_int(t)} tokens"

        def cite(lines: str) -> str:
            return v.cite("CFG", lines, "get_nvl_buffer_size_hint")

        # PR #434 drops the metadata int whose purpose it could not find, and stores top-k
        # indices as the kernels do (int), not as topk_idx_t.
        num_meta_ints = 2 * r + (2 if pr434 else 3)
        idx_bytes = INT_BYTES if pr434 else idx_bytes
        regions = [
            Region(name="channel metadata", num_bytes=ch * n * num_meta_ints * INT_BYTES,
                   num_bytes_used=ch * n * num_meta_ints * INT_BYTES,
                   formula=f"{ch} channels x {n} NVL ranks x (2 x {r} + {num_meta_ints - 2 * r}) ints x 4 B",
                   source=cite("65")),
            Region(name="hidden data", num_bytes=slots * hidden_bytes, num_bytes_used=slots * hidden_bytes,
                   formula=f"{slot_text} x {format_int(hidden_bytes)} B", source=cite("66")),
            Region(name="source meta", num_bytes=slots * SOURCE_META_BYTES, num_bytes_used=slots * SOURCE_META_BYTES,
                   formula=f"{slot_text} x {SOURCE_META_BYTES} B (SourceMeta)", source=cite("67")),
            Region(name="top-k indices", num_bytes=slots * HINT_NUM_MAX_TOPK * idx_bytes,
                   num_bytes_used=slots * HINT_NUM_MAX_TOPK * idx_bytes,
                   formula=f"{slot_text} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x {idx_bytes} B", source=cite("68")),
            Region(name="top-k weights", num_bytes=slots * HINT_NUM_MAX_TOPK * FLOAT_BYTES,
                   num_bytes_used=slots * HINT_NUM_MAX_TOPK * FLOAT_BYTES,
                   formula=f"{slot_text} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x 4 B", source=cite("69")),
            Region(name="scales", num_bytes=slots * HINT_NUM_MAX_SCALES * FLOAT_BYTES,
                   num_bytes_used=slots * HINT_NUM_MAX_SCALES * FLOAT_BYTES,
                   formula=f"{slot_text} x {HINT_NUM_MAX_SCALES} (kNumMaxScales) x 4 B", source=cite("70")),
        ]
        if pr434:
            regions.append(Region(name="int4 alignment per token", num_bytes=slots * INT4_BYTES,
                                  num_bytes_used=slots * INT4_BYTES, formula=f"{slot_text} x 16 B",
                                  source=cite("70")))
        return _hint_buffer("NVL buffer", regions, cite("71"))

    def get_nvl_buffer_size_hint(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                                 num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> int:
        """``Config::get_nvl_buffer_size_hint`` (``CFG:53-73``): the NVL buffer bytes.

        The sum of :meth:`nvl_buffer`'s regions (arguments as there).

        >>> Config(num_sms=24, num_max_nvl_chunked_send_tokens=8, num_max_nvl_chunked_recv_tokens=512,
        ...        num_max_rdma_chunked_send_tokens=16, num_max_rdma_chunked_recv_tokens=128
        ...        ).get_nvl_buffer_size_hint(7168, 16, version="pr434")
        429000960
        """
        return self.nvl_buffer(hidden_bytes, num_ranks, version=version, num_topk_idx_bits=num_topk_idx_bits).num_bytes

    # --- RDMA --------------------------------------------------------------------------
    def rdma_buffer(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                    num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> Buffer:
        """The terms of ``get_rdma_buffer_size_hint`` (``CFG:75-99``) as named regions.

        Empty (0 bytes) for ``num_ranks <= 8`` ("Legacy mode": intranode needs no RDMA
        buffer). Otherwise, with ``C`` channels, ``R = num_ranks / 8`` RDMA peers and
        ``T`` the *rounded* ``num_max_rdma_chunked_recv_tokens``, everything twice (send
        and receive halves): ``C*R*(8*2 + 2)`` ints of metadata, and per token slot
        ``C*R*T`` x (``hidden_bytes`` + 8 B source meta + 128 top-k indices + 128 weights
        + 128 scales + 16 B). ``pr434`` stores indices as ``int`` and adds ``C*R*2`` u64
        head/tail counters, twice.

        Arguments, returns and raises as :meth:`nvl_buffer` (buffer "RDMA buffer").
        """
        v = get_version(version)
        c = Checker()
        _check_hint_args(c, hidden_bytes, num_ranks, self.num_sms, internode_only=True)
        idx_bytes = _topk_idx_bytes(c, num_topk_idx_bits, v)
        c.raise_if_any()

        def cite(lines: str) -> str:
            return v.cite("CFG", lines, "get_rdma_buffer_size_hint")

        if num_ranks <= NUM_MAX_NVL_PEERS:
            return Buffer.combine("RDMA buffer", [], "sum", NUM_BUFFER_ALIGNMENT_BYTES, source=cite("76-78"))
        pr434 = v.size_hint == "pr434"
        idx_bytes = INT_BYTES if pr434 else idx_bytes
        ch, r = self.num_channels, num_ranks // NUM_MAX_NVL_PEERS
        t = self.num_max_rdma_chunked_recv_tokens
        slots = ch * r * t * 2
        slot_text = f"{ch} channels x {r} RDMA ranks x {format_int(t)} tokens x 2 (send + recv)"
        meta = ch * r * (NUM_MAX_NVL_PEERS * 2 + 2) * 2 * INT_BYTES
        regions = [
            Region(name="channel metadata", num_bytes=meta, num_bytes_used=meta,
                   formula=f"{ch} channels x {r} RDMA ranks x (8 x 2 + 2) ints x 2 x 4 B", source=cite("90")),
            Region(name="hidden data", num_bytes=slots * hidden_bytes, num_bytes_used=slots * hidden_bytes,
                   formula=f"{slot_text} x {format_int(hidden_bytes)} B", source=cite("91")),
            Region(name="source meta", num_bytes=slots * SOURCE_META_BYTES, num_bytes_used=slots * SOURCE_META_BYTES,
                   formula=f"{slot_text} x {SOURCE_META_BYTES} B (SourceMeta)", source=cite("92")),
            Region(name="top-k indices", num_bytes=slots * HINT_NUM_MAX_TOPK * idx_bytes,
                   num_bytes_used=slots * HINT_NUM_MAX_TOPK * idx_bytes,
                   formula=f"{slot_text} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x {idx_bytes} B", source=cite("93")),
            Region(name="top-k weights", num_bytes=slots * HINT_NUM_MAX_TOPK * FLOAT_BYTES,
                   num_bytes_used=slots * HINT_NUM_MAX_TOPK * FLOAT_BYTES,
                   formula=f"{slot_text} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x 4 B", source=cite("94")),
            Region(name="scales", num_bytes=slots * HINT_NUM_MAX_SCALES * FLOAT_BYTES,
                   num_bytes_used=slots * HINT_NUM_MAX_SCALES * FLOAT_BYTES,
                   formula=f"{slot_text} x {HINT_NUM_MAX_SCALES} (kNumMaxScales) x 4 B", source=cite("95")),
            Region(name="int4 per token", num_bytes=slots * INT4_BYTES, num_bytes_used=slots * INT4_BYTES,
                   formula=f"{slot_text} x 16 B", source=cite("96")),
        ]
        if pr434:
            head_tail = ch * r * 2 * UINT64_BYTES * 2
            regions.append(Region(name="head/tail counters", num_bytes=head_tail, num_bytes_used=head_tail,
                                  formula=f"{ch} channels x {r} RDMA ranks x 2 x 8 B (u64) x 2", source=cite("96")))
        return _hint_buffer("RDMA buffer", regions, cite("97"))

    def get_rdma_buffer_size_hint(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                                  num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> int:
        """``Config::get_rdma_buffer_size_hint`` (``CFG:75-99``): the RDMA buffer bytes
        (0 for ``num_ranks <= 8``); the sum of :meth:`rdma_buffer`'s regions.

        >>> Config(num_sms=24, num_max_nvl_chunked_send_tokens=8, num_max_nvl_chunked_recv_tokens=512,
        ...        num_max_rdma_chunked_send_tokens=16, num_max_rdma_chunked_recv_tokens=128
        ...        ).get_rdma_buffer_size_hint(7168, 16)
        56774016
        """
        return self.rdma_buffer(hidden_bytes, num_ranks, version=version,
                                num_topk_idx_bits=num_topk_idx_bits).num_bytes


def _hint_buffer(name: str, regions: list[Region], source: str) -> Buffer:
    """``num_bytes = ((num_bytes + 127) / 128) * 128`` (``CFG:71, 97``): a true round-up."""
    total = sum(r.num_bytes for r in regions)
    rounded = align(total, NUM_BUFFER_ALIGNMENT_BYTES)
    padding = _padding_region(total, rounded, f"round {format_int(total)} B up to a multiple of 128", source)
    return Buffer.combine(name, regions + padding, "sum", NUM_BUFFER_ALIGNMENT_BYTES, source=source)


# --- default config tables (PY:233-290) ------------------------------------------------
# (nvl_send, nvl_recv, rdma_send, rdma_recv) per rank count, as upstream lists them (the
# RDMA receive count before rounding). Each era is the previous one plus the rows that
# commit changed, exactly as upstream's history reads; "ebfe47e" answers every rank count
# <= 8 with one config (its `if num_ranks <= 8: return Config(num_sms, 6, 256, 6, 128)`).
_Row = tuple[int, int, int, int]
_INTRANODE_FALLBACK: _Row = (6, 256, 6, 128)  # ebfe47e:deep_ep/buffer.py:162-163, 190-191
_T_EBFE47E: tuple[dict[int, _Row], dict[int, _Row]] = (
    {16: (16, 288, 20, 128), 24: (8, 288, 32, 128), 32: (8, 288, 32, 128), 64: (20, 288, 28, 128),
     128: (20, 560, 32, 128), 144: (32, 720, 12, 128), 160: (28, 720, 12, 128)},
    {16: (2, 288, 28, 128), 24: (1, 288, 20, 128), 32: (1, 288, 20, 128), 64: (1, 288, 20, 128),
     128: (1, 560, 12, 128), 144: (2, 720, 8, 128), 160: (2, 720, 8, 128)},
)


def _era(base: tuple[dict[int, _Row], dict[int, _Row]], dispatch: dict[int, _Row],
         combine: dict[int, _Row]) -> tuple[dict[int, _Row], dict[int, _Row]]:
    return {**base[0], **dispatch}, {**base[1], **combine}


_T_1553FC4 = _era(_T_EBFE47E,  # "Improve EP2/4 performance" (2025-03-04): explicit EP2/4/8 rows
                  {2: (16, 256, 6, 128), 4: (16, 256, 6, 128), 8: (6, 256, 6, 128)},
                  {2: (6, 256, 6, 128), 4: (6, 256, 6, 128), 8: (6, 256, 6, 128)})
_T_C8DCEBA = _era(_T_1553FC4,  # TMA intranode kernels (#191, 2025-06-06); the table at 1.1.0
                  {2: (24, 256, 6, 128), 4: (6, 256, 6, 128)},
                  {2: (10, 256, 6, 128), 4: (9, 256, 6, 128), 8: (4, 256, 6, 128)})
_T_BDD119F = _era(  # e6d61fc (2025-07-04) dispatch + 06f417d (07-10) and bdd119f (07-22) combine
    _T_C8DCEBA,
    {16: (36, 288, 20, 128), 32: (32, 288, 32, 128)},
    {16: (4, 288, 12, 128), 24: (1, 288, 8, 128), 32: (1, 288, 8, 128)})
_T_E02E4D2 = _era(  # c939644 (EP48/96, #421, 2025-09-22) + e02e4d2 (EP24, #432, 2025-09-26); main
    _T_BDD119F,
    {24: (32, 288, 8, 128), 32: (32, 288, 8, 128), 48: (32, 288, 8, 128), 64: (32, 288, 8, 128),
     96: (20, 480, 12, 128), 128: (20, 560, 12, 128)},
    {48: (1, 288, 8, 128), 64: (1, 288, 8, 128), 96: (1, 480, 8, 128), 128: (1, 560, 8, 128)})
_TABLES = {"ebfe47e": _T_EBFE47E, "1553fc4": _T_1553FC4, "c8dceba": _T_C8DCEBA, "bdd119f": _T_BDD119F,
           "e02e4d2": _T_E02E4D2}


def supported_num_ranks(version: str | None = None) -> tuple[int, ...]:
    """Rank counts the default config tables of ``version`` answer (``1..8`` at ebfe47e).

    >>> supported_num_ranks()
    (2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144, 160)
    """
    v = get_version(version)
    dispatch, _ = _TABLES[v.tables]
    low = tuple(range(1, NUM_MAX_NVL_PEERS + 1)) if v.tables == "ebfe47e" else ()
    return low + tuple(sorted(dispatch))


def _table_config(kind: int, num_ranks: int, num_sms: int, version: str | None) -> Config:
    v = get_version(version)
    name = ("get_dispatch_config", "get_combine_config")[kind]
    c = Checker()
    if not c.integer("num_ranks", num_ranks):
        c.raise_if_any()
    row = _TABLES[v.tables][kind].get(num_ranks)
    if row is None and v.tables == "ebfe47e" and 1 <= num_ranks <= NUM_MAX_NVL_PEERS:
        row = _INTRANODE_FALLBACK
    if row is None:
        c.add("num_ranks", num_ranks,
              f"Buffer.{name} at {v.id} knows {', '.join(map(str, supported_num_ranks(v.id)))} "
              f"(\"Unsupported number of EP ranks\", {v.cite('PY', '259' if kind == 0 else '289', name)}); "
              "pass a Config instead")
        c.raise_if_any()
    nvl_send, nvl_recv, rdma_send, rdma_recv = row  # type: ignore[misc]
    return Config(num_sms=num_sms, num_max_nvl_chunked_send_tokens=nvl_send, num_max_nvl_chunked_recv_tokens=nvl_recv,
                  num_max_rdma_chunked_send_tokens=rdma_send, num_max_rdma_chunked_recv_tokens=rdma_recv)


def get_dispatch_config(num_ranks: int, num_sms: int = DEFAULT_NUM_SMS, *, version: str | None = None) -> Config:
    """``Buffer.get_dispatch_config`` (``PY:233-260``): the recommended dispatch config.

    Args:
        num_ranks: expert-parallel ranks (a key of the table; :func:`supported_num_ranks`).
        num_sms: ``Buffer.num_sms`` (20 unless ``Buffer.set_num_sms`` changed it).
        version: a :data:`VERSIONS` id; tables changed over time.

    >>> get_dispatch_config(16).as_tuple()
    (20, 36, 288, 20, 140)

    Raises:
        InvalidArgumentError: a rank count the table does not list.
    """
    return _table_config(0, num_ranks, num_sms, version)


def get_combine_config(num_ranks: int, num_sms: int = DEFAULT_NUM_SMS, *, version: str | None = None) -> Config:
    """``Buffer.get_combine_config`` (``PY:263-290``): the recommended combine config.

    >>> get_combine_config(16).as_tuple()
    (20, 4, 288, 12, 132)
    """
    return _table_config(1, num_ranks, num_sms, version)


def get_hidden_bytes(hidden: int, use_fp8_dispatch: bool) -> int:
    """``get_hidden_bytes`` of the recipe (``DOC:151-153``): ``hidden * max(element_size, 2)``.

    FP8 inputs count as 2 bytes per element, so FP8 and BF16 size the same buffers.

    >>> get_hidden_bytes(7168, True), get_hidden_bytes(7168, False)
    (14336, 14336)
    """
    element_size = 1 if use_fp8_dispatch else BF16_BYTES
    return hidden * max(element_size, BF16_BYTES)


# ======================================================================================
# Low-latency mode: LowLatencyLayout
# ======================================================================================
def _num_scales(hidden: int) -> int:
    return hidden // FP8_SCALE_BLOCK


def num_bytes_per_dispatch_msg(hidden: int, variant: int = 5) -> int:
    """Dispatch slot of the layout (``CFG:143``).

    LL0/LL1: ``H + 4 * H/128 + 16`` (FP8 only). LL2 on (BF16 support): ``16 + max(2H,
    H + 4 * H/128)``, which is ``16 + 2H`` for every ``H``.
    """
    if variant <= 1:
        return hidden + _num_scales(hidden) * FLOAT_BYTES + INT4_BYTES
    return INT4_BYTES + max(hidden * BF16_BYTES, hidden + _num_scales(hidden) * FLOAT_BYTES)


def num_bytes_per_combine_msg(hidden: int, variant: int = 5) -> int:
    """Combine slot of the layout (``CFG:144``).

    LL0-LL2: ``16 + 2H`` (a control ``int4``); LL3/LL4: ``2H``; LL5: ``4 * H/128 + 2H``
    (room for LogFMT's per-128-channel min/max, reserved even when LogFMT is off).
    """
    if variant <= 2:
        return INT4_BYTES + hidden * BF16_BYTES
    if variant <= 4:
        return hidden * BF16_BYTES
    return _num_scales(hidden) * BF162_BYTES + hidden * BF16_BYTES


# The layout's arithmetic, one function per upstream formula: LowLatencyLayout's properties
# (and so the reports) and the summaries / token ceiling (integers only, no records) call these.
_LL_NUM_BUFFER_SETS = 2  # buffers[0] / buffers[1]: odd and even calls alternate (CFG:171-181)
_LL_SPAN_NAMES = {kind: tuple(f"{kind} {i}" for i in range(_LL_NUM_BUFFER_SETS))
                  for kind in ("signaling buffer", "send buffer", "recv buffer")}
_LL_ROUNDING_BLOCK = "hint rounding block"  # the hint's extra bytes, last region of the buffer


def _ll_send_buffer_bytes(tokens: int, experts: int, dispatch_msg: int, combine_msg: int) -> int:
    """``send_buffer_bytes = max(T * dispatch_msg, E * T * combine_msg)`` (``CFG:147-149``)."""
    return max(tokens * dispatch_msg, experts * tokens * combine_msg)


def _ll_recv_buffer_bytes(tokens: int, experts: int, dispatch_msg: int, combine_msg: int) -> int:
    """``recv_buffer_bytes = max(E * T * dispatch_msg, E * T * combine_msg)`` (``CFG:155-157``)."""
    return max(experts * tokens * dispatch_msg, experts * tokens * combine_msg)


def _ll_signaling_buffer_bytes(experts: int, num_ranks: int, variant: int) -> int:
    """``max(dispatch count ints, combine flag ints)`` = ``4E`` (``CFG:162-164``); LL0 adds
    ``E / num_ranks`` atomic token counters to the dispatch side."""
    count = experts * INT_BYTES
    if variant == 0:
        return max(count + (experts // num_ranks) * INT_BYTES, count)
    return count


def _ll_signaling_buffer_bytes_aligned(experts: int, num_ranks: int, variant: int) -> int:
    """``align_up(signaling, 128)`` from LL4 (``CFG:165``); unaligned before."""
    signaling = _ll_signaling_buffer_bytes(experts, num_ranks, variant)
    return align(signaling, NUM_BUFFER_ALIGNMENT_BYTES) if variant >= 4 else signaling


def _is_int4_multiple(num_bytes: int) -> bool:
    """``EP_HOST_ASSERT(bytes % sizeof(int4) == 0)`` on the send / receive buffers (``CFG:150, 158``)."""
    return num_bytes % INT4_BYTES == 0


def _ll_kind_sizes(variant: int, send: int, recv: int, signaling_aligned: int) -> tuple[tuple[str, int], ...]:
    """The three kinds of buffer in address order (``CFG:171-181``): from LL4 (#313) the
    signaling buffers come first, before they came after send and receive."""
    if variant >= 4:
        return (("signaling buffer", signaling_aligned), ("send buffer", send), ("recv buffer", recv))
    return (("send buffer", send), ("recv buffer", recv), ("signaling buffer", signaling_aligned))


def _ll_span_rows(kind_sizes: tuple[tuple[str, int], ...]) -> list[tuple[str, int, int]]:
    """``(name, offset, num_bytes)`` of the six buffers: each kind once per buffer set, back to back."""
    rows = []
    offset = 0
    for kind, size in kind_sizes:
        for name in _LL_SPAN_NAMES[kind]:
            rows.append((name, offset, size))
            offset += size
    return rows


def _ll_end(span_rows: list[tuple[str, int, int]]) -> int:
    """``total_bytes``: the end of the last buffer."""
    _, offset, size = span_rows[-1]
    return offset + size


class Span(Record):
    """A named byte range of the low-latency RDMA buffer."""

    name: str
    offset: int
    num_bytes: int

    @property
    def end(self) -> int:
        return self.offset + self.num_bytes


class LowLatencyBuffer(Record):
    """``LowLatencyBuffer`` (``CFG:102-120``): one of the two (odd/even) buffer sets, as
    byte offsets into the RDMA buffer. Dispatch and combine share the same memory.

    ``dispatch_rdma_atomic_token_counter`` exists only in LL0 (after the count buffer).
    """

    num_clean_int: int
    dispatch_rdma_send_buffer: int
    dispatch_rdma_recv_data_buffer: int
    dispatch_rdma_recv_count_buffer: int
    combine_rdma_send_buffer: int
    combine_rdma_recv_data_buffer: int
    combine_rdma_recv_flag_buffer: int
    dispatch_rdma_atomic_token_counter: int | None = None


class LowLatencyLayout(Record):
    """``LowLatencyLayout`` (``CFG:122-183``): double-buffered send, receive and signaling.

    Each of the two buffer sets has a send buffer ``max(T * dispatch_msg, E * T *
    combine_msg)``, a receive buffer ``max(E * T * dispatch_msg, E * T * combine_msg)``
    and a signaling buffer of ``E`` ints (LL0: ``E + E / num_ranks`` ints). From LL4 on
    the signaling buffers are aligned up to 128 B and come first; before, they came last.
    ``total_bytes`` is the end of the last span, i.e. their sum.

    Attributes:
        num_max_dispatch_tokens_per_rank: ``T``.
        hidden: ``H`` (elements; the layout sizes BF16 slots).
        num_ranks: only LL0 reads it.
        num_experts: ``E``, every expert the library sees (EPLB redundant ones included).
        variant: 0..5 (``LL0`` .. ``LL5``, see :data:`VERSIONS`).

    >>> layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16, num_experts=288)
    >>> layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg, layout.total_bytes
    (14352, 14560, 2146961664)

    Raises:
        InvalidArgumentError: negative or non-integer inputs, and upstream's
            ``send/recv_buffer_bytes % sizeof(int4) == 0`` asserts (``CFG:150, 158``).
    """

    num_max_dispatch_tokens_per_rank: int
    hidden: int
    num_ranks: int
    num_experts: int
    variant: int = 5

    def __post_init__(self) -> None:
        c = Checker()
        c.int_range("num_max_tokens_per_rank", self.num_max_dispatch_tokens_per_rank, 0, INT32_MAX,
                    "num_max_dispatch_tokens_per_rank, an int upstream")
        c.int_range("hidden", self.hidden, 1, INT32_MAX)
        c.int_range("num_ranks", self.num_ranks, 1, INT32_MAX)
        c.int_range("num_experts", self.num_experts, 0, INT32_MAX)
        c.int_range("variant", self.variant, 0, 5, "LL0..LL5")
        if not c.problems:
            for what, num_bytes, line in (("send", self.send_buffer_bytes, "150"),
                                          ("receive", self.recv_buffer_bytes, "158")):
                if not _is_int4_multiple(num_bytes):
                    c.add("hidden", self.hidden,
                          f"the low-latency {what} buffer ({format_int(num_bytes)} B) must be a multiple of 16 B "
                          f"(EP_HOST_ASSERT, {CFG}:{line}); use hidden % 8 == 0")
        c.raise_if_any()

    @property
    def num_scales(self) -> int:
        """``hidden / 128`` (``CFG:132``)."""
        return _num_scales(self.hidden)

    @property
    def num_bytes_per_dispatch_msg(self) -> int:
        return num_bytes_per_dispatch_msg(self.hidden, self.variant)

    @property
    def num_bytes_per_combine_msg(self) -> int:
        return num_bytes_per_combine_msg(self.hidden, self.variant)

    @property
    def send_buffer_bytes(self) -> int:
        """``max(T * dispatch_msg, E * T * combine_msg)`` (``CFG:147-149``)."""
        return _ll_send_buffer_bytes(self.num_max_dispatch_tokens_per_rank, self.num_experts,
                                     self.num_bytes_per_dispatch_msg, self.num_bytes_per_combine_msg)

    @property
    def recv_buffer_bytes(self) -> int:
        """``max(E * T * dispatch_msg, E * T * combine_msg)`` (``CFG:155-157``)."""
        return _ll_recv_buffer_bytes(self.num_max_dispatch_tokens_per_rank, self.num_experts,
                                     self.num_bytes_per_dispatch_msg, self.num_bytes_per_combine_msg)

    @property
    def signaling_buffer_bytes(self) -> int:
        """``max(dispatch count ints, combine flag ints)`` = ``4E`` (``CFG:162-164``);
        LL0 adds ``E / num_ranks`` atomic token counters to the dispatch side."""
        return _ll_signaling_buffer_bytes(self.num_experts, self.num_ranks, self.variant)

    @property
    def signaling_buffer_bytes_aligned(self) -> int:
        """``align_up(signaling, 128)`` from LL4 (``CFG:165``); unaligned before."""
        return _ll_signaling_buffer_bytes_aligned(self.num_experts, self.num_ranks, self.variant)

    def _span_rows(self) -> list[tuple[str, int, int]]:
        """``(name, offset, num_bytes)`` of :meth:`spans`, without records."""
        return _ll_span_rows_for(self.num_max_dispatch_tokens_per_rank, self.num_experts,
                                 self.num_bytes_per_dispatch_msg, self.num_bytes_per_combine_msg,
                                 self.signaling_buffer_bytes_aligned, self.variant)[2]

    def spans(self) -> tuple[Span, ...]:
        """The six buffers in address order (``CFG:171-181``)."""
        return tuple(Span(name=name, offset=offset, num_bytes=size) for name, offset, size in self._span_rows())

    @property
    def total_bytes(self) -> int:
        """``total_bytes``: the end of the last buffer; the size every LL kernel checks
        (``layout.total_bytes <= num_rdma_bytes``, ``BUF:1503, 1643``)."""
        return _ll_end(self._span_rows())

    def buffers(self) -> tuple[LowLatencyBuffer, LowLatencyBuffer]:
        """``buffers[0]`` and ``buffers[1]`` as offsets (``CFG:171-181``)."""
        by_name = {s.name: s.offset for s in self.spans()}

        def one(i: int) -> LowLatencyBuffer:
            sig = by_name[_LL_SPAN_NAMES["signaling buffer"][i]]
            send = by_name[_LL_SPAN_NAMES["send buffer"][i]]
            recv = by_name[_LL_SPAN_NAMES["recv buffer"][i]]
            return LowLatencyBuffer(
                num_clean_int=self.signaling_buffer_bytes // INT_BYTES,
                dispatch_rdma_send_buffer=send,
                dispatch_rdma_recv_data_buffer=recv,
                dispatch_rdma_recv_count_buffer=sig,
                combine_rdma_send_buffer=send,
                combine_rdma_recv_data_buffer=recv,
                combine_rdma_recv_flag_buffer=sig,
                dispatch_rdma_atomic_token_counter=sig + self.num_experts * INT_BYTES if self.variant == 0 else None,
            )

        return one(0), one(1)


def _hint_round_up(total_bytes: int) -> int:
    """``((num_bytes + 128) / 128) * 128`` (``CFG:187``; the same since ebfe47e).

    Upstream's quirk: not a round-up but "next multiple of 128 strictly above", so an
    already aligned ``total_bytes`` gets a whole extra 128-byte block.
    """
    return (total_bytes + NUM_BUFFER_ALIGNMENT_BYTES) // NUM_BUFFER_ALIGNMENT_BYTES * NUM_BUFFER_ALIGNMENT_BYTES


def _ll_span_rows_for(tokens: int, experts: int, dispatch_msg: int, combine_msg: int, signaling_aligned: int,
                      variant: int) -> tuple[int, int, list[tuple[str, int, int]]]:
    """``(send_buffer_bytes, recv_buffer_bytes, span rows)`` for ``T = tokens``: the layout
    from its token-independent parts (message slots and the aligned signaling buffer)."""
    send = _ll_send_buffer_bytes(tokens, experts, dispatch_msg, combine_msg)
    recv = _ll_recv_buffer_bytes(tokens, experts, dispatch_msg, combine_msg)
    return send, recv, _ll_span_rows(_ll_kind_sizes(variant, send, recv, signaling_aligned))


def _ll_rounding_row(span_rows: list[tuple[str, int, int]]) -> tuple[str, int, int]:
    """The hint's rounding block as a row ``(name, offset, num_bytes)`` after the six buffers:
    from ``total_bytes`` to :func:`_hint_round_up` of it (``CFG:185-188``)."""
    total = _ll_end(span_rows)
    return _LL_ROUNDING_BLOCK, total, _hint_round_up(total) - total


@lru_cache(maxsize=4096)
def _ll_slots(hidden: int, num_ranks: int, num_experts: int, variant: int) -> tuple[int, int, int]:
    """The token-independent parts of the layout: ``(num_bytes_per_dispatch_msg,
    num_bytes_per_combine_msg, signaling_buffer_bytes_aligned)``."""
    return (num_bytes_per_dispatch_msg(hidden, variant), num_bytes_per_combine_msg(hidden, variant),
            _ll_signaling_buffer_bytes_aligned(num_experts, num_ranks, variant))


def low_latency_buffer(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int, *,
                       version: str | None = None) -> Buffer:
    """The low-latency RDMA buffer: :class:`LowLatencyLayout`'s six spans plus the hint's
    rounding block, rule ``"sum"``. ``num_bytes`` is the hint; ``num_bytes_needed`` is
    ``align(total_bytes, 128)``, the smallest size the kernels and ``Buffer`` accept."""
    v = get_version(version)
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                              num_ranks=num_ranks, num_experts=num_experts, variant=v.low_latency)
    return _ll_rdma_buffer(layout, v)


def _ll_rdma_buffer(layout: LowLatencyLayout, v: Version) -> Buffer:
    """:func:`low_latency_buffer` of a checked ``layout``: the regions are the layout's span
    rows and the rounding row (the rows :func:`summarize_low_latency` reads), with formulas."""
    t, e, num_ranks = layout.num_max_dispatch_tokens_per_rank, layout.num_experts, layout.num_ranks
    dispatch_msg, combine_msg = layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg
    formulas = {
        "send buffer": (f"max({format_int(t)} tokens x {format_int(dispatch_msg)} B, "
                        f"{e} experts x {format_int(t)} tokens x {format_int(combine_msg)} B)",
                        "147-151"),
        "recv buffer": (f"{e} experts x {format_int(t)} tokens x max({format_int(dispatch_msg)}, "
                        f"{format_int(combine_msg)}) B", "155-159"),
        "signaling buffer": (
            (f"({e} + {e} / {num_ranks}) ints x 4 B" if v.low_latency == 0 else f"{e} experts x 4 B")
            + (", aligned to 128 B" if v.low_latency >= 4 else ""), "162-166"),
    }
    span_rows = layout._span_rows()
    regions = []
    for name, offset, size in span_rows:
        formula, lines = formulas[name.rsplit(" ", 1)[0]]
        regions.append(Region(name=name, num_bytes=size, num_bytes_used=size,
                              formula=f"at offset {format_int(offset)}: {formula}",
                              source=v.cite("CFG", lines, "LowLatencyLayout")))
    name, total, block = _ll_rounding_row(span_rows)
    source = v.cite("CFG", "185-188", "get_low_latency_rdma_size_hint")
    regions.append(Region(name=name, num_bytes=block, num_bytes_used=0,
                          formula=f"((total {format_int(total)} + 128) / 128) x 128 - total: "
                                  "a full block even when aligned", source=source))
    return Buffer.combine("RDMA buffer", regions, "sum", NUM_BUFFER_ALIGNMENT_BYTES, source=source)


def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                   num_experts: int, *, version: str | None = None) -> int:
    """``get_low_latency_rdma_size_hint`` (``CFG:185-188``; ``Buffer.get_low_latency_rdma_size_hint``,
    ``PY:176-189``): the low-latency RDMA buffer bytes, the sum of :func:`low_latency_buffer`'s regions
    (computed from the same layout without building them).

    Args:
        num_max_dispatch_tokens_per_rank: most tokens one rank dispatches per call.
        hidden: hidden size in elements (the size is computed for BF16 slots).
        num_ranks: expert-parallel ranks (only LL0 reads it).
        num_experts: experts the library sees, EPLB redundant experts included.
        version: a :data:`VERSIONS` id (``None``: main).

    Returns:
        Bytes, a multiple of 128, always more than the layout's ``total_bytes``.

    The vLLM #57894 shape (hidden 5120, 16 ranks, 384 + 64 redundant experts):

    >>> get_low_latency_rdma_size_hint(2048, 5120, 16, 448)
    38168170112
    """
    v = get_version(version)
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                              num_ranks=num_ranks, num_experts=num_experts, variant=v.low_latency)
    return _hint_round_up(layout.total_bytes)


def _passes_int4_check(num_bytes: int) -> bool:
    """``num_bytes / sizeof(int4) < std::numeric_limits<int>::max()`` (``BUF:111-112``)."""
    return num_bytes // INT4_BYTES < INT32_MAX


def max_low_latency_tokens(hidden: int, num_ranks: int, num_experts: int, *, version: str | None = None,
                           budget: int | None = None) -> int:
    """The largest ``num_max_dispatch_tokens_per_rank`` whose hint ``Buffer`` accepts.

    "Accepts" means, for versions that have it (4623c67 on: ``main``), the constructor
    check ``num_rdma_bytes / sizeof(int4) < INT_MAX`` (``BUF:112``), i.e. a hint of at
    most 2^35 - 128 bytes; and, when ``budget`` is given, ``hint <= budget``. The hint is
    non-decreasing in the token count, so this is an exact binary search over
    ``0 .. INT_MAX`` (the token count is an ``int`` upstream), not an estimate. The
    result is cached per argument set (none of them is a token count).

    Args:
        hidden, num_ranks, num_experts, version: as :func:`get_low_latency_rdma_size_hint`.
        budget: bytes the RDMA buffer may take (``None``: no budget).

    Returns:
        The token count; 0 when not even one token fits.

    >>> max_low_latency_tokens(5120, 16, 448)
    1843

    Raises:
        InvalidArgumentError: a version without the size check and no ``budget`` (no
            upper bound exists), a negative budget, or arguments the layout rejects.
    """
    v = get_version(version)
    c = Checker()
    if budget is not None:
        c.int_range("budget", budget, 0, None, "bytes")
    elif not v.int4_count_check:
        c.add("version", v.id,
              f"{v.id} has no upper bound on num_rdma_bytes (Buffer checks num_rdma_bytes / 16 < INT_MAX "
              "only from 4623c67, i.e. in main); pass a budget")
    c.raise_if_any()
    # One token validates the arguments. Send/recv bytes are T times their one-token value,
    # so when their multiple-of-16 asserts hold for T = 1 they hold for every T (the search
    # below then needs no alignment check). The converse fails: with a message size that is
    # not a multiple of 16 (only for hidden sizes the kernels do not support) some larger T
    # still pass; this function rejects such shapes rather than search a non-monotone set.
    LowLatencyLayout(num_max_dispatch_tokens_per_rank=1, hidden=hidden, num_ranks=num_ranks,
                     num_experts=num_experts, variant=v.low_latency)
    return _ll_max_tokens(v.id, hidden, num_ranks, num_experts, budget)


@lru_cache(maxsize=4096)
def _ll_max_tokens(version: str, hidden: int, num_ranks: int, num_experts: int, budget: int | None) -> int:
    """:func:`max_low_latency_tokens` of checked arguments: the binary search, each step
    the hint of :func:`get_low_latency_rdma_size_hint` from the layout's integer parts
    (:func:`_ll_span_rows_for`, no records), cached (reports ask for it every time)."""
    v = get_version(version)
    variant = v.low_latency
    dispatch_msg, combine_msg, signaling = _ll_slots(hidden, num_ranks, num_experts, variant)

    def fits(num_tokens: int) -> bool:
        span_rows = _ll_span_rows_for(num_tokens, num_experts, dispatch_msg, combine_msg, signaling, variant)[2]
        hint = _hint_round_up(_ll_end(span_rows))
        if v.int4_count_check and not _passes_int4_check(hint):
            return False
        return budget is None or hint <= budget

    best = largest_true(0, INT32_MAX, fits)
    return 0 if best is None else best


# ======================================================================================
# Token records
# ======================================================================================
def _ll_dispatch_record(hidden: int, use_fp8: bool, variant: int, slot_bytes: int) -> RecordLayout:
    """The dispatch message as the LL kernel sends it (``LLK:176-182``): an ``int4`` whose
    first int is the source token index, then FP8 data + fp32 scales or BF16 data.
    LL0/LL1 (FP8 only) put the data first and the source index after the scales."""
    scales = _num_scales(hidden) if use_fp8 else 0
    data_bytes = hidden if use_fp8 else hidden * BF16_BYTES
    num_bytes = INT4_BYTES + data_bytes + scales * FLOAT_BYTES
    if variant <= 1:
        fields = [Field(name="hidden", offset=0, num_bytes=hidden, dtype="float8_e4m3", count=hidden),
                  Field(name="scales", offset=hidden, num_bytes=scales * FLOAT_BYTES, dtype="float32", count=scales),
                  Field(name="src_idx", offset=hidden + scales * FLOAT_BYTES, num_bytes=INT_BYTES, dtype="int32",
                        count=1)]
    else:
        fields = [Field(name="src_idx", offset=0, num_bytes=INT_BYTES, dtype="int32", count=1),
                  Field(name="hidden", offset=INT4_BYTES, num_bytes=data_bytes,
                        dtype="float8_e4m3" if use_fp8 else "bfloat16", count=hidden),
                  Field(name="scales", offset=INT4_BYTES + data_bytes, num_bytes=scales * FLOAT_BYTES,
                        dtype="float32", count=scales)]
    return RecordLayout.from_fields(
        "low-latency dispatch message", num_bytes, fields,
        view=f"as sent ({'FP8' if use_fp8 else 'BF16'}); the layout reserves {format_int(slot_bytes)} B per slot")


def _ll_combine_record(hidden: int, variant: int) -> RecordLayout:
    """The combine slot (``LLK:766-770``): BF16 data; LL0-LL2 behind a control ``int4``;
    LL5 reserves ``4 * H/128`` bytes of LogFMT min/max (used only with ``use_logfmt``)."""
    num_bytes = num_bytes_per_combine_msg(hidden, variant)
    data = hidden * BF16_BYTES
    fields = []
    offset = 0
    if variant <= 2:
        fields.append(Field(name="control", offset=0, num_bytes=INT4_BYTES, dtype="int32", count=4))
        offset = INT4_BYTES
    fields.append(Field(name="hidden", offset=offset, num_bytes=data, dtype="bfloat16", count=hidden))
    view = "BF16 (use_logfmt=False); with LogFMT the first 4 x hidden/128 B hold min/max" if variant >= 5 else "BF16"
    return RecordLayout.from_fields("low-latency combine message", num_bytes, fields, view=view)


def _internode_records(hidden: int, use_fp8: bool, num_topk: int) -> list[RecordLayout]:
    """Internode token records, ``get_num_bytes_per_token`` (``INK:47-51``, same formula
    since ebfe47e): ``align16(hidden + scales + SourceMeta + top-k int32 indices + fp32
    weights)``. Dispatch writes them in that order (``INK:688-727``); combine sends
    hidden (BF16), SourceMeta and the weights (``INK:1757-1758, 1906-1910``)."""
    scales = _num_scales(hidden) if use_fp8 else 0
    hidden_bytes = hidden * (1 if use_fp8 else BF16_BYTES)
    offset = hidden_bytes + scales * FLOAT_BYTES
    dispatch_fields = [
        Field(name="hidden", offset=0, num_bytes=hidden_bytes, dtype="float8_e4m3" if use_fp8 else "bfloat16",
              count=hidden),
        Field(name="scales", offset=hidden_bytes, num_bytes=scales * FLOAT_BYTES, dtype="float32", count=scales),
        Field(name="source_meta", offset=offset, num_bytes=SOURCE_META_BYTES, dtype="int32", count=2),
        Field(name="topk_idx", offset=offset + SOURCE_META_BYTES, num_bytes=num_topk * INT_BYTES, dtype="int32",
              count=num_topk),
        Field(name="topk_weights", offset=offset + SOURCE_META_BYTES + num_topk * INT_BYTES,
              num_bytes=num_topk * FLOAT_BYTES, dtype="float32", count=num_topk),
    ]
    dispatch_end = offset + SOURCE_META_BYTES + 2 * num_topk * INT_BYTES
    combine_hidden = hidden * BF16_BYTES
    combine_fields = [
        Field(name="hidden", offset=0, num_bytes=combine_hidden, dtype="bfloat16", count=hidden),
        Field(name="source_meta", offset=combine_hidden, num_bytes=SOURCE_META_BYTES, dtype="int32", count=2),
        Field(name="topk_weights", offset=combine_hidden + SOURCE_META_BYTES, num_bytes=num_topk * FLOAT_BYTES,
              dtype="float32", count=num_topk),
    ]
    combine_end = combine_hidden + SOURCE_META_BYTES + num_topk * FLOAT_BYTES
    return [
        RecordLayout.from_fields("internode dispatch token", align(dispatch_end, INT4_BYTES), dispatch_fields,
                                 view="RDMA/NVL channel slot, as the kernel writes it"),
        RecordLayout.from_fields("internode combine token", align(combine_end, INT4_BYTES), combine_fields,
                                 view="RDMA/NVL channel slot, as the kernel writes it"),
    ]


# Per-token regions of the normal-mode hints -> (field name, element count per slot or 0
# for "one byte each", element type by element size).
_PER_SLOT_REGIONS = {
    "hidden data": ("hidden", 0), "source meta": ("source_meta", 2), "top-k indices": ("topk_idx", HINT_NUM_MAX_TOPK),
    "top-k weights": ("topk_weights", HINT_NUM_MAX_TOPK), "scales": ("scales", HINT_NUM_MAX_SCALES),
    "int4 alignment per token": ("int4", 4), "int4 per token": ("int4", 4),
}
_DTYPES = {("topk_idx", 8): "int64", ("topk_idx", 4): "int32", ("topk_weights", 4): "float32",
           ("scales", 4): "float32", ("source_meta", 4): "int32", ("int4", 4): "int32"}


def _hint_slot_records(name: str, buffer: Buffer) -> list[RecordLayout]:
    """What the hint reserves per token slot: each per-token region divided by the slot
    count (the source-meta region holds 8 B per slot). None when there are no slots."""
    by_name = {r.name: r for r in buffer.regions}
    slots = by_name["source meta"].num_bytes // SOURCE_META_BYTES if "source meta" in by_name else 0
    if slots == 0:
        return []
    fields = []
    offset = 0
    for r in buffer.regions:
        if r.name in _PER_SLOT_REGIONS:
            field_name, count = _PER_SLOT_REGIONS[r.name]
            size = r.num_bytes // slots
            count = count or size
            fields.append(Field(name=field_name, offset=offset, num_bytes=size, count=count,
                                dtype=_DTYPES.get((field_name, size // count), "uint8")))
            offset += size
    return [RecordLayout.from_fields(name, offset, fields, view="hint budget per token slot, not a memory layout")]


# ======================================================================================
# Reports
# ======================================================================================
def _upstream(v: Version) -> str:
    state = "" if v.merged else " — UNMERGED pull request"
    return f"DeepEP {v.id} @ {v.commit} ({v.date}){state}"


def _limit_findings(prefix: str, limits: list[LimitCheck]) -> list[Finding]:
    return [
        Finding(severity="error", code=f"{prefix}.limit",
                message=f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)} "
                        f"({lim.source})",
                data={"limit": lim.name, "value": lim.value, "bound": lim.bound})
        for lim in limits if not lim.ok
    ]


# Limits are defined once, as rows ``(name, value, relation, bound, ok, source, enforced)``:
# the reports turn them into LimitCheck records, the summaries read the names of the failed ones.
_LimitRow = tuple[str, int, str, int, bool, str, str]


def _limit_checks(rows: list[_LimitRow] | tuple[_LimitRow, ...]) -> list[LimitCheck]:
    return [LimitCheck(name=n, value=value, relation=r, bound=b, ok=ok, source=src, enforced=e)
            for n, value, r, b, ok, src, e in rows]


def _set_name(name: str, allowed: tuple[int, ...]) -> str:
    """The name of a set-membership limit: the set is part of it."""
    return f"{name} in {{{', '.join(map(str, allowed))}}}"


def _in_row(name: str, value: int, allowed: tuple[int, ...], source: str, enforced: str) -> _LimitRow:
    """A set-membership limit (``name`` from :func:`_set_name`): ``relation`` "in", ``bound``
    the largest member."""
    return (name, value, "in", max(allowed), value in allowed, source, enforced)


def _pr434_finding(v: Version) -> list[Finding]:
    if v.merged:
        return []
    return [Finding(severity="warning", code="deepep-v1.unmerged-version",
                    message=f"{v.id} follows an unmerged pull request ({v.short}); no released DeepEP computes this",
                    data={"commit": v.commit})]


# --------------------------------------------------------------------------------------
# Normal mode
# --------------------------------------------------------------------------------------
def _validate_normal(v: Version, ranks: int, topk: int, experts: int, routed: int, redundant: int,
                     num_sms: int | None, config: object) -> Config | None:
    """The checks of :func:`report_normal` (``experts`` = routed + redundant); the override
    config, if any."""
    c = Checker()
    ranks_ok = False
    if ranks > NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS:
        c.add("num_ranks", ranks, f"allowed 1..{NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS} in normal mode "
                                  f"(NUM_MAX_NVL_PEERS x NUM_MAX_RDMA_PEERS, Buffer constructor, {BUF}:113)")
    elif ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                  f"(Buffer constructor, {BUF}:114)")
    else:
        ranks_ok = True
    if topk > NORMAL_NUM_MAX_TOPK:
        c.add("num_topk", topk, f"allowed 0..{NORMAL_NUM_MAX_TOPK} (EP_DEVICE_ASSERT(num_topk <= 32) in the "
                                f"normal kernels, {INK}:519, 1754)")
    if experts % ranks:
        c.add("num_experts", experts,
              f"experts seen by the library (routed {routed} + redundant {redundant}) "
              f"must be divisible by num_ranks = {ranks} ({BUF}:468)")
    if config is None:
        # The default tables: Buffer.set_num_sms(n) asserts an even n; the rank count must be listed.
        if num_sms is not None and num_sms % 2:
            c.add("num_sms", num_sms, f"must be even (Buffer.set_num_sms asserts it, {PY}:162)")
        elif ranks_ok:
            try:
                get_dispatch_config(ranks, num_sms or DEFAULT_NUM_SMS, version=v.id)
            except InvalidArgumentError as error:
                c.problems.extend(error.problems)
    elif not isinstance(config, Config):
        c.add("deepep_config", config, "must be an epbuf.backends.deepep_v1.Config")
        config = None
    elif ranks_ok:
        _check_hint_args(c, 1, ranks, config.num_sms, internode_only=False)
    c.raise_if_any()
    return config


def _normal_limit_rows(v: Version, ranks: int, ranks_per_node: int, topk: int, experts: int, hidden: int,
                       fp8: bool, configs: dict[str, Config], num_nvl_bytes: int,
                       num_rdma_bytes: int) -> list[_LimitRow]:
    """Every normal-mode limit, in report order."""
    internode = ranks > NUM_MAX_NVL_PEERS
    ctor = v.cite("BUF", "107-116", "Buffer constructor")
    num_rdma_ranks = max(ranks // NUM_MAX_NVL_PEERS, 1)
    # The hints multiply channels x ranks x tokens x kNumMaxTopK in C++ `int` before widening.
    int_product = max(
        cfg.num_channels * max(min(ranks, NUM_MAX_NVL_PEERS) * cfg.num_max_nvl_chunked_recv_tokens,
                               num_rdma_ranks * cfg.num_max_rdma_chunked_recv_tokens if internode else 0)
        * HINT_NUM_MAX_TOPK
        for cfg in configs.values())
    element_size = 1 if fp8 else BF16_BYTES
    rows: list[_LimitRow] = [
        ("num_ranks", ranks, "<=", NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS, True,
         v.cite("BUF", "113", "Buffer constructor"), "host"),
        ("num_topk", topk, "<=", NORMAL_NUM_MAX_TOPK, True,
         v.cite("INK", "519, 1754", "EP_DEVICE_ASSERT(num_topk <= 32)"), "kernel"),
        ("num_ranks_per_node (NUM_MAX_NVL_PEERS)", ranks_per_node, "==", min(ranks, NUM_MAX_NVL_PEERS),
         ranks_per_node == min(ranks, NUM_MAX_NVL_PEERS), v.cite("CPL", "5", "NUM_MAX_NVL_PEERS"), "assumed"),
    ]
    if internode:
        rows.append(_in_row(_set_name("num_rdma_ranks (SWITCH_RDMA_RANKS)", v.rdma_ranks), num_rdma_ranks,
                            v.rdma_ranks, v.cite("LAUNCH", "66-89", "SWITCH_RDMA_RANKS"), "host"))
    else:
        rows.append(_in_row(_set_name("num_ranks (SWITCH_RANKS)", v.intranode_ranks), ranks, v.intranode_ranks,
                            v.cite("LAUNCH", "53-64", "SWITCH_RANKS"), "host"))
    rows += [
        ("num_local_experts", experts // ranks, "<=", NUM_MAX_LOCAL_EXPERTS,
         experts // ranks <= NUM_MAX_LOCAL_EXPERTS, v.cite("BUF", "469", "NUM_MAX_LOCAL_EXPERTS"), "host"),
        ("hidden x element size % 16", hidden * element_size % INT4_BYTES, "==", 0,
         hidden * element_size % INT4_BYTES == 0, v.cite("BUF", "458, 930", "dispatch"), "host"),
        ("num_nvl_bytes (when num_rdma_bytes > 0)", num_nvl_bytes if num_rdma_bytes else 0, "<=", INT32_MAX,
         num_nvl_bytes <= INT32_MAX or num_rdma_bytes == 0, ctor, "host"),
        ("num_rdma_bytes", num_rdma_bytes, "<=", INT32_MAX, num_rdma_bytes <= INT32_MAX, ctor, "host"),
    ]
    if v.int4_count_check:
        for what, num_bytes, line in (("num_nvl_bytes", num_nvl_bytes, "111"),
                                      ("num_rdma_bytes", num_rdma_bytes, "112")):
            rows.append((f"{what} / sizeof(int4)", num_bytes // INT4_BYTES, "<", INT32_MAX,
                         _passes_int4_check(num_bytes), v.cite("BUF", line), "host"))
    rows.append(("channels x tokens x ranks x kNumMaxTopK (int product in the hints)", int_product, "<=",
                 INT32_MAX, int_product <= INT32_MAX, v.cite("CFG", "68, 93", "size hints"), "assumed"))
    return rows


class _Normal(Record):
    """Everything of :func:`report_normal` that is shared between plans differing only in
    the token count (which normal mode does not read), cached by :func:`_normal_core`.
    Read-only: the dicts are never mutated, the records are immutable."""

    version: Version
    override: Config | None
    hidden_bytes: int
    configs: dict  # "dispatch"/"combine" (or "deepep_config") -> Config
    nvl: dict  # same keys -> NVL Buffer
    rdma: dict  # same keys -> RDMA Buffer
    nvl_key: str
    rdma_key: str
    records: tuple
    limits: tuple  # LimitCheck records, from _normal_limit_rows
    summary: Summary


@lru_cache(maxsize=256)  # buffers with their formulas, records, limits: a few tens of kB each
def _normal_core(version: str | None, ranks: int, num_ranks_per_node: int | None, hidden: int, fp8: bool,
                 num_sms: int | None, deepep_config: object, topk: int, routed: int,
                 redundant: int) -> _Normal | InvalidArgumentError:
    """The token-independent part of :func:`report_normal`, keyed on the plan fields it
    reads (:func:`_normal_key`); a rejected plan gives its error (re-raised by the caller)."""
    try:
        v = get_version(version)
        experts = routed + redundant
        override = _validate_normal(v, ranks, topk, experts, routed, redundant, num_sms, deepep_config)
    except InvalidArgumentError as error:
        return error
    hidden_bytes = get_hidden_bytes(hidden, fp8)
    if override is not None:
        configs = {"deepep_config": override}
    else:
        sms = num_sms or DEFAULT_NUM_SMS
        configs = {"dispatch": get_dispatch_config(ranks, sms, version=v.id),
                   "combine": get_combine_config(ranks, sms, version=v.id)}
    nvl = {k: cfg.nvl_buffer(hidden_bytes, ranks, version=v.id) for k, cfg in configs.items()}
    rdma = {k: cfg.rdma_buffer(hidden_bytes, ranks, version=v.id) for k, cfg in configs.items()}
    # The recipe keeps the larger hint of each kind; the first config wins a tie.
    nvl_key = max(nvl, key=lambda k: nvl[k].num_bytes)
    rdma_key = max(rdma, key=lambda k: rdma[k].num_bytes)
    nvl_buffer, rdma_buffer = nvl[nvl_key], rdma[rdma_key]

    records = _hint_slot_records("NVL hint slot", nvl_buffer)
    if ranks > NUM_MAX_NVL_PEERS:
        records += _hint_slot_records("RDMA hint slot", rdma_buffer)
        records += _internode_records(hidden, fp8, topk)
    ranks_per_node = num_ranks_per_node if num_ranks_per_node is not None else min(ranks, NUM_MAX_NVL_PEERS)
    limits = tuple(_limit_checks(_normal_limit_rows(v, ranks, ranks_per_node, topk, experts, hidden, fp8, configs,
                                                    nvl_buffer.num_bytes, rdma_buffer.num_bytes)))
    # summary_of reads the buffers and the limits only, the parts computed here.
    summary = summary_of(Report(backend="deepep-v1", title="", upstream="", inputs={},
                                buffers=(nvl_buffer, rdma_buffer), limits=limits))
    return _Normal(version=v, override=override, hidden_bytes=hidden_bytes, configs=configs, nvl=nvl, rdma=rdma,
                   nvl_key=nvl_key, rdma_key=rdma_key, records=tuple(records), limits=limits, summary=summary)


@lru_cache(maxsize=16384)
def _normal_summary(*key) -> Summary | InvalidArgumentError:
    """The summary of :func:`_normal_core` (or its error), kept longer than the core."""
    core = _normal_core(*key)
    return core.summary if isinstance(core, _Normal) else core


def _normal_key(plan) -> tuple:
    """The plan fields normal mode reads, in :func:`_normal_core`'s order (no token count)."""
    return (plan.version, plan.num_ranks, plan.num_ranks_per_node, plan.hidden, plan.use_fp8_dispatch,
            plan.num_sms, plan.deepep_config, plan.num_topk, plan.num_experts, plan.num_redundant_experts)


def _normal(plan, cached=_normal_core):
    """``cached(*_normal_key(plan))`` (:func:`_normal_core` or :func:`_normal_summary`);
    raises the plan's InvalidArgumentError."""
    key = _normal_key(plan)
    try:
        result = cached(*key)
    except TypeError:  # an unhashable version / deepep_config, which the checks reject: not cached
        result = _normal_core.__wrapped__(*key)
        if isinstance(result, _Normal) and cached is _normal_summary:
            result = result.summary
    if isinstance(result, InvalidArgumentError):
        raise InvalidArgumentError(result.problems)
    return result


def report_normal(plan) -> Report:
    """Size DeepEP V1's normal-mode ``Buffer`` (NVL and RDMA buffers) for ``plan``, as
    upstream's recipe does (``DOC:132-148``): ``hidden_bytes = hidden * max(element size,
    2)``; for the dispatch and the combine config of the rank count (or ``plan.deepep_config``),
    the max of each hint. The token count does not enter.

    Raises:
        InvalidArgumentError: an unknown version; ranks above 160 or not below/a multiple
            of 8; a rank count the tables lack; top-k above 32; experts not divisible by
            ranks; odd ``num_sms``; a ``deepep_config`` that is not a :class:`Config`.
    """
    core = _normal(plan)
    v, override, configs, nvl, rdma = core.version, core.override, core.configs, core.nvl, core.rdma
    nvl_key, rdma_key, hidden_bytes, limits = core.nvl_key, core.rdma_key, core.hidden_bytes, core.limits
    records = core.records
    nvl_buffer, rdma_buffer = nvl[nvl_key], rdma[rdma_key]
    num_nvl_bytes, num_rdma_bytes = nvl_buffer.num_bytes, rdma_buffer.num_bytes
    ranks = plan.num_ranks
    num_sms = plan.num_sms or DEFAULT_NUM_SMS
    internode = ranks > NUM_MAX_NVL_PEERS
    num_rdma_ranks = max(ranks // NUM_MAX_NVL_PEERS, 1)

    # --- findings ---
    findings = [
        Finding(severity="info", code="deepep-v1.token-independent",
                message=f"normal-mode buffers do not depend on the token count (num_max_tokens_per_rank = "
                        f"{format_int(plan.num_max_tokens_per_rank)} is not used): they hold per-channel rings of "
                        "chunked tokens",
                data={"num_max_tokens_per_rank": plan.num_max_tokens_per_rank}),
        Finding(severity="info", code="deepep-v1.hidden-bytes",
                message=f"the recipe sizes with hidden_bytes = hidden x max(element size, 2) = "
                        f"{format_int(hidden_bytes)}, so FP8 and BF16 dispatch get the same buffers",
                data={"hidden_bytes": hidden_bytes, "source": v.cite("DOC", "151-153", "get_hidden_bytes")}),
        Finding(severity="info", code="deepep-v1.hint-assumptions",
                message=f"the hints reserve {HINT_NUM_MAX_TOPK} top-k entries and {HINT_NUM_MAX_SCALES} fp32 scales "
                        "per token slot whatever the model uses; the kernels check the real sizes at run time "
                        "(not modelled here, so 'real need' equals the hint)",
                data={"kNumMaxTopK": HINT_NUM_MAX_TOPK, "kNumMaxScales": HINT_NUM_MAX_SCALES}),
    ]
    if override is None:
        findings.append(Finding(
            severity="info", code="deepep-v1.binding-config",
            message=f"NVL buffer set by the {nvl_key} config, RDMA buffer by the {rdma_key} config "
                    f"(dispatch {configs['dispatch'].as_tuple()}, combine {configs['combine'].as_tuple()}; "
                    "RDMA receive counts rounded up to their send chunk)",
            data={"nvl": nvl_key, "rdma": rdma_key}))
    elif plan.num_sms is not None and plan.num_sms != override.num_sms:
        findings.append(Finding(severity="info", code="deepep-v1.num-sms-ignored",
                                message=f"num_sms = {plan.num_sms} is ignored: deepep_config brings num_sms = "
                                        f"{override.num_sms}", data={}))
    if not internode:
        findings.append(Finding(severity="info", code="deepep-v1.intranode",
                                message=f"{ranks} ranks fit one NVLink node: get_rdma_buffer_size_hint returns 0",
                                data={"source": v.cite("CFG", "76-78", "get_rdma_buffer_size_hint")}))
    if internode and plan.num_topk == 0:
        findings.append(Finding(severity="info", code="deepep-v1.topk-unspecified",
                                message="num_topk = 0 (unspecified): the internode token records show no top-k fields",
                                data={}))
    findings += _pr434_finding(v)
    findings += _limit_findings("deepep-v1", limits)

    quantities = [
        Quantity(name="hidden_bytes", value=hidden_bytes, unit="B", source=v.cite("DOC", "151-153")),
        Quantity(name="num_sms", value=next(iter(configs.values())).num_sms),
        Quantity(name="num_channels", value=next(iter(configs.values())).num_channels, source=v.cite("CFG", "62")),
        Quantity(name="num_nvl_ranks", value=min(ranks, NUM_MAX_NVL_PEERS)),
        Quantity(name="num_rdma_ranks", value=num_rdma_ranks),
    ]
    for key in configs:
        quantities.append(Quantity(name=f"{key}_num_nvl_bytes", value=nvl[key].num_bytes, unit="B"))
        quantities.append(Quantity(name=f"{key}_num_rdma_bytes", value=rdma[key].num_bytes, unit="B"))
    quantities.append(Quantity(name="num_nvl_bytes", value=num_nvl_bytes, unit="B"))
    quantities.append(Quantity(name="num_rdma_bytes", value=num_rdma_bytes, unit="B"))
    for record in records:
        quantities.append(Quantity(name=record.name.replace(" ", "_") + "_num_bytes", value=record.num_bytes, unit="B"))

    inputs = {
        "version": v.id, "deepep_version": v.id, "num_ranks": ranks, "num_ranks_per_node": plan.ranks_per_node,
        "hidden": plan.hidden, "use_fp8_dispatch": plan.use_fp8_dispatch, "hidden_bytes": hidden_bytes,
        "num_topk": plan.num_topk, "num_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts,
    }
    if override is None:
        inputs["num_sms"] = num_sms
        inputs["dispatch_config"] = list(configs["dispatch"].as_tuple())
        inputs["combine_config"] = list(configs["combine"].as_tuple())
    else:
        inputs["deepep_config"] = list(override.as_tuple())
    return Report(
        backend="deepep-v1",
        title="DeepEP V1 normal-mode Buffer (NVL + RDMA)",
        upstream=_upstream(v),
        inputs=inputs,
        buffers=(nvl_buffer, rdma_buffer),
        records=tuple(records),
        quantities=tuple(quantities),
        findings=tuple(findings),
        limits=tuple(limits),
    )


def summarize_normal(plan) -> Summary:
    """``summary_of(report_normal(plan))`` without building the report: the summary is
    computed once per token-independent plan shape, from the same buffers and limit rows.

    Raises:
        InvalidArgumentError: as :func:`report_normal`.
    """
    return _normal(plan, _normal_summary)


# --------------------------------------------------------------------------------------
# Low-latency mode
# --------------------------------------------------------------------------------------
def _low_latency_problems(v: Version, hidden: int, ranks: int, experts: int, routed: int, redundant: int,
                          topk: int, tokens: int) -> list:
    """The problems :func:`report_low_latency` raises (``experts`` = routed + redundant)."""
    c = Checker()
    if ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                  f"(Buffer constructor, also in low-latency mode, {BUF}:114)")
    if experts % ranks:
        c.add("num_experts", experts,
              f"experts seen by the library (routed {routed} + redundant {redundant}) "
              f"must be divisible by num_ranks = {ranks} (low_latency_dispatch, {BUF}:1483)")
    if topk > v.ll_num_max_topk:
        c.add("num_topk", topk,
              f"allowed 0..{v.ll_num_max_topk} at {v.id} (kNumMaxTopK of the low-latency kernels, "
              f"{v.cite('LLK', '493, 501', 'kNumMaxTopK')})")
    try:
        LowLatencyLayout(num_max_dispatch_tokens_per_rank=tokens, hidden=hidden, num_ranks=ranks,
                         num_experts=experts, variant=v.low_latency)
    except InvalidArgumentError as error:
        c.problems.extend(error.problems)
    return c.problems


def _validate_low_latency(plan, v: Version) -> None:
    problems = _low_latency_problems(v, plan.hidden, plan.num_ranks, plan.num_total_experts, plan.num_experts,
                                     plan.num_redundant_experts, plan.num_topk, plan.num_max_tokens_per_rank)
    if problems:
        raise InvalidArgumentError(problems)


_LL_INT4_LIMIT = "num_rdma_bytes / sizeof(int4) (hint <= 2^35 - 128 B, the 32 GiB ceiling)"


@lru_cache(maxsize=None)
def _ll_limit_texts(version: str) -> tuple[str, ...]:
    """The version-dependent names and sources of the low-latency limits, in the order
    :func:`_ll_limit_rows` unpacks them (built once per version)."""
    v = get_version(version)
    return (v.cite("LLK", "501, 1179", "kNumMaxTopK"), v.cite("BUF", "1483", "low_latency_dispatch"),
            v.cite("BUF", "112"), _set_name("hidden (SWITCH_HIDDEN)", v.ll_hidden_sizes),
            v.cite("LAUNCH", "113-135", "SWITCH_HIDDEN"), v.cite("BUF", "1530", "low_latency_dispatch"),
            v.cite("BUF", "1526", "low_latency_dispatch"), v.cite("LLK", "506", "dispatch workspace"),
            v.cite("CFG", "148, 155", "LowLatencyLayout"))


def _ll_limit_rows(v: Version, texts: tuple[str, ...], topk: int, experts: int, ranks: int, hidden: int,
                   fp8: bool, tokens: int, hint: int) -> list[_LimitRow]:
    """Every low-latency limit, in report order (``texts``: :func:`_ll_limit_texts` of ``v``)."""
    src_topk, src_experts, src_int4, hidden_name, src_hidden, src_fp8, src_tma, src_workspace, src_product = texts
    rows: list[_LimitRow] = [
        ("num_topk", topk, "<=", v.ll_num_max_topk, True, src_topk, "host"),
        ("num_experts % num_ranks", experts % ranks, "==", 0, True, src_experts, "host"),
    ]
    if v.int4_count_check:
        rows.append((_LL_INT4_LIMIT, hint // INT4_BYTES, "<", INT32_MAX, _passes_int4_check(hint), src_int4, "host"))
    rows.append(_in_row(hidden_name, hidden, v.ll_hidden_sizes, src_hidden, "host"))
    if fp8 and v.ll_fp8_hidden_512:
        rows.append(("hidden % 512 (FP8 dispatch)", hidden % 512, "==", 0, hidden % 512 == 0, src_fp8, "host"))
    tma = ranks * tokens
    workspace = experts * INT_BYTES * 2
    product = experts * tokens
    rows += [
        ("num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)", tma % 4, "==", 0, tma % 4 == 0, src_tma, "host"),
        ("num_experts x 2 ints (workspace)", workspace, "<=", NUM_WORKSPACE_BYTES, workspace <= NUM_WORKSPACE_BYTES,
         src_workspace, "host"),
        ("num_experts x num_max_dispatch_tokens_per_rank (int product in the layout)", product, "<=", INT32_MAX,
         product <= INT32_MAX, src_product, "assumed"),
    ]
    return rows


def report_low_latency(plan) -> Report:
    """Size DeepEP V1's low-latency RDMA buffer for ``plan``: the layout's six buffers,
    the hint (``Buffer.get_low_latency_rdma_size_hint(num_max_tokens_per_rank, hidden,
    num_ranks, num_experts + redundant)``, ``DOC:250-256``), message byte maps, the
    constructor's size ceiling and kernel limits.

    Raises:
        InvalidArgumentError: an unknown version; ranks not below/a multiple of 8;
            experts not divisible by ranks; top-k above ``kNumMaxTopK`` (9, or 11 from
            v1.2.1); a hidden size whose buffers are not multiples of 16 B.
    """
    v = get_version(plan.version)
    _validate_low_latency(plan, v)
    tokens, hidden, ranks = plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks
    experts = plan.num_total_experts
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=tokens, hidden=hidden, num_ranks=ranks,
                              num_experts=experts, variant=v.low_latency)
    buffer = _ll_rdma_buffer(layout, v)
    hint = buffer.num_bytes
    fp8 = plan.use_fp8_dispatch
    records = [_ll_dispatch_record(hidden, fp8 or not v.ll_bf16_dispatch, v.low_latency,
                                   layout.num_bytes_per_dispatch_msg),
               _ll_combine_record(hidden, v.low_latency)]

    # --- limits ---
    limits = _limit_checks(_ll_limit_rows(v, _ll_limit_texts(v.id), plan.num_topk, experts, ranks, hidden, fp8,
                                          tokens, hint))

    # --- findings ---
    needed = buffer.num_bytes_needed
    findings = [
        Finding(severity="info", code="deepep-ll.hint-extra-block",
                message=f"the hint rounds total_bytes = {format_int(layout.total_bytes)} to the next multiple of 128 "
                        f"strictly above it ({format_int(hint)}); {format_int(needed)} B "
                        "(total_bytes aligned to 128) is the least a run accepts",
                data={"total_bytes": layout.total_bytes, "hint": hint, "needed": needed}),
    ]
    if v.low_latency == 0:
        findings.append(Finding(severity="info", code="deepep-ll.num-ranks-used",
                                message=f"{v.id} reserves E / num_ranks = {experts // ranks} atomic token counters "
                                        "per signaling buffer, so num_ranks enters the hint", data={}))
    else:
        findings.append(Finding(severity="info", code="deepep-ll.num-ranks-unused",
                                message="num_ranks does not enter the low-latency hint (only num_experts does)",
                                data={}))
    if plan.num_redundant_experts:
        findings.append(Finding(
            severity="info", code="deepep-ll.eplb",
            message=f"EPLB: the library sees {experts} experts ({plan.num_experts} routed + "
                    f"{plan.num_redundant_experts} redundant); send and receive buffers grow linearly with them",
            data={"num_experts": experts}))
    if not fp8:
        if v.ll_bf16_dispatch:
            findings.append(Finding(severity="info", code="deepep-ll.bf16-slots",
                                    message="BF16 dispatch: the layout always sizes BF16 slots (FP8 uses less of them)",
                                    data={}))
        else:
            findings.append(Finding(severity="error", code="deepep-ll.bf16-unsupported",
                                    message=f"{v.id} dispatches FP8 only (BF16 low-latency dispatch arrived with "
                                            "ed7487c, ll2); the record shows the FP8 message", data={}))
    if v.low_latency >= 5:
        findings.append(Finding(
            severity="info", code="deepep-ll.logfmt-space",
            message=f"combine slots reserve {layout.num_scales * BF162_BYTES} B of LogFMT min/max per message "
                    "even when LogFMT is off", data={"num_bytes": layout.num_scales * BF162_BYTES}))
    try:
        best = max_low_latency_tokens(hidden, ranks, experts, version=v.id) if v.int4_count_check else None
    except InvalidArgumentError:  # a shape one token cannot have, though this token count can
        best = None
    if best is not None:
        findings.append(Finding(
            severity="info", code="deepep-ll.max-tokens",
            message=f"the largest num_max_dispatch_tokens_per_rank whose hint Buffer accepts here is "
                    f"{format_int(best)} (hint <= {format_int(MAX_NUM_BYTES_INT4_CHECK)} B)",
            data={"max_tokens": best}))
    elif not _passes_int4_check(hint):
        findings.append(Finding(
            severity="warning", code="deepep-ll.newer-ceiling",
            message=f"{v.id} accepts this {format_int(hint)} B buffer, but from 4623c67 on (main, 2.x) Buffer "
                    f"rejects more than {format_int(MAX_NUM_BYTES_INT4_CHECK)} B (num_rdma_bytes / 16 < INT_MAX)",
            data={"limit": MAX_NUM_BYTES_INT4_CHECK}))
    findings += _pr434_finding(v)
    findings += _limit_findings("deepep-ll", limits)

    quantities = [
        Quantity(name="num_scales", value=layout.num_scales, source=v.cite("CFG", "132")),
        Quantity(name="num_bytes_per_dispatch_msg", value=layout.num_bytes_per_dispatch_msg, unit="B",
                 source=v.cite("CFG", "143")),
        Quantity(name="num_bytes_per_combine_msg", value=layout.num_bytes_per_combine_msg, unit="B",
                 source=v.cite("CFG", "144")),
        Quantity(name="dispatch_message_num_bytes", value=records[0].num_bytes, unit="B", source=v.cite("LLK", "180")),
        Quantity(name="send_buffer_bytes", value=layout.send_buffer_bytes, unit="B"),
        Quantity(name="recv_buffer_bytes", value=layout.recv_buffer_bytes, unit="B"),
        Quantity(name="signaling_buffer_bytes", value=layout.signaling_buffer_bytes, unit="B"),
        Quantity(name="signaling_buffer_bytes_aligned", value=layout.signaling_buffer_bytes_aligned, unit="B"),
        Quantity(name="total_bytes", value=layout.total_bytes, unit="B"),
        Quantity(name="num_rdma_bytes", value=hint, unit="B", source=v.cite("CFG", "187")),
    ]
    if v.int4_count_check:
        quantities.append(Quantity(name="max_num_rdma_bytes", value=MAX_NUM_BYTES_INT4_CHECK, unit="B",
                                   source=v.cite("BUF", "112")))
    if best is not None:
        quantities.append(Quantity(name="max_num_max_dispatch_tokens_per_rank", value=best))
    inputs = {
        "version": v.id, "deepep_version": v.id, "num_max_dispatch_tokens_per_rank": tokens, "hidden": hidden, "num_ranks": ranks,
        "num_experts": experts, "num_routed_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "num_topk": plan.num_topk, "use_fp8_dispatch": fp8,
    }
    return Report(
        backend="deepep-ll",
        title="DeepEP V1 low-latency RDMA buffer",
        upstream=_upstream(v),
        inputs=inputs,
        buffers=(buffer,),
        records=tuple(records),
        quantities=tuple(quantities),
        findings=tuple(findings),
        limits=tuple(limits),
    )


@lru_cache(maxsize=4096)
def _ll_static(version: str | None, hidden: int, ranks: int, routed: int, redundant: int,
               topk: int) -> tuple | None:
    """The token-independent part of :func:`summarize_low_latency`: ``(version, experts,
    num_bytes_per_dispatch_msg, num_bytes_per_combine_msg, signaling_buffer_bytes_aligned,
    limit texts)``, or ``None`` when the report rejects the plan whatever its token count
    (:func:`_low_latency_problems` at ``T = 0``, where the layout's size asserts hold)."""
    try:
        v = get_version(version)
    except InvalidArgumentError:
        return None
    experts = routed + redundant
    if _low_latency_problems(v, hidden, ranks, experts, routed, redundant, topk, 0):
        return None
    return (v, experts) + _ll_slots(hidden, ranks, experts, v.low_latency) + (_ll_limit_texts(v.id),)


_SIZE = itemgetter(2)


def summarize_low_latency(plan) -> Summary:
    """``summary_of(report_low_latency(plan))`` without building the report: the token-
    independent parts are cached (:func:`_ll_static`); per call, the layout's span rows and
    rounding row (the regions of the RDMA buffer) and the limit rows, as integers.

    Relies on ``plan`` holding a valid token count (``Plan`` checks 1..INT_MAX).

    Raises:
        InvalidArgumentError: as :func:`report_low_latency`.
    """
    try:
        static = _ll_static(plan.version, plan.hidden, plan.num_ranks, plan.num_experts,
                            plan.num_redundant_experts, plan.num_topk)
    except TypeError:  # an unhashable version: rejected below
        static = None
    if static is not None:
        v, experts, dispatch_msg, combine_msg, signaling, texts = static
        tokens = plan.num_max_tokens_per_rank
        send, recv, rows = _ll_span_rows_for(tokens, experts, dispatch_msg, combine_msg, signaling, v.low_latency)
        # The layout's size asserts, the only check that involves the token count.
        if _is_int4_multiple(send) and _is_int4_multiple(recv):
            rows.append(_ll_rounding_row(rows))
            _, total, block = rows[-1]
            hint = total + block
            broken = tuple([row[0] for row in _ll_limit_rows(v, texts, plan.num_topk, experts, plan.num_ranks,
                                                             plan.hidden, plan.use_fp8_dispatch, tokens, hint)
                            if not row[4]])
            # One buffer; its binding region is the first largest, as Buffer.binding_region picks it.
            return Summary(num_bytes=hint, num_bytes_needed=align(total, NUM_BUFFER_ALIGNMENT_BYTES),
                           binding=max(rows, key=_SIZE)[0], broken=broken)
    # A rejected plan: the report raises its error (from its checks or its ceiling search).
    return summary_of(report_low_latency(plan))
