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

from .._record import Record

from ..errors import Checker, InvalidArgumentError
from ..report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report
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
        c.add("deepep_version", version, "unknown DeepEP V1 version; choose one of " + ", ".join(_VERSIONS_BY_ID))
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
                if num_bytes % INT4_BYTES:
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
        t, e = self.num_max_dispatch_tokens_per_rank, self.num_experts
        return max(t * self.num_bytes_per_dispatch_msg, e * t * self.num_bytes_per_combine_msg)

    @property
    def recv_buffer_bytes(self) -> int:
        """``max(E * T * dispatch_msg, E * T * combine_msg)`` (``CFG:155-157``)."""
        t, e = self.num_max_dispatch_tokens_per_rank, self.num_experts
        return max(e * t * self.num_bytes_per_dispatch_msg, e * t * self.num_bytes_per_combine_msg)

    @property
    def signaling_buffer_bytes(self) -> int:
        """``max(dispatch count ints, combine flag ints)`` = ``4E`` (``CFG:162-164``);
        LL0 adds ``E / num_ranks`` atomic token counters to the dispatch side."""
        count = self.num_experts * INT_BYTES
        if self.variant == 0:
            return max(count + (self.num_experts // self.num_ranks) * INT_BYTES, count)
        return count

    @property
    def signaling_buffer_bytes_aligned(self) -> int:
        """``align_up(signaling, 128)`` from LL4 (``CFG:165``); unaligned before."""
        if self.variant >= 4:
            return align(self.signaling_buffer_bytes, NUM_BUFFER_ALIGNMENT_BYTES)
        return self.signaling_buffer_bytes

    def spans(self) -> tuple[Span, ...]:
        """The six buffers in address order (``CFG:171-181``)."""
        send, recv, sig = self.send_buffer_bytes, self.recv_buffer_bytes, self.signaling_buffer_bytes_aligned
        order = [("signaling buffer", sig), ("send buffer", send), ("recv buffer", recv)]
        if self.variant < 4:
            order = order[1:] + order[:1]
        spans: list[Span] = []
        offset = 0
        for name, size in order:
            for i in range(2):
                spans.append(Span(name=f"{name} {i}", offset=offset, num_bytes=size))
                offset += size
        return tuple(spans)

    @property
    def total_bytes(self) -> int:
        """``total_bytes``: the end of the last buffer; the size every LL kernel checks
        (``layout.total_bytes <= num_rdma_bytes``, ``BUF:1503, 1643``)."""
        return self.spans()[-1].end

    def buffers(self) -> tuple[LowLatencyBuffer, LowLatencyBuffer]:
        """``buffers[0]`` and ``buffers[1]`` as offsets (``CFG:171-181``)."""
        by_name = {s.name: s.offset for s in self.spans()}

        def one(i: int) -> LowLatencyBuffer:
            sig = by_name[f"signaling buffer {i}"]
            return LowLatencyBuffer(
                num_clean_int=self.signaling_buffer_bytes // INT_BYTES,
                dispatch_rdma_send_buffer=by_name[f"send buffer {i}"],
                dispatch_rdma_recv_data_buffer=by_name[f"recv buffer {i}"],
                dispatch_rdma_recv_count_buffer=sig,
                combine_rdma_send_buffer=by_name[f"send buffer {i}"],
                combine_rdma_recv_data_buffer=by_name[f"recv buffer {i}"],
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


def low_latency_buffer(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int, *,
                       version: str | None = None) -> Buffer:
    """The low-latency RDMA buffer: :class:`LowLatencyLayout`'s six spans plus the hint's
    rounding block, rule ``"sum"``. ``num_bytes`` is the hint; ``num_bytes_needed`` is
    ``align(total_bytes, 128)``, the smallest size the kernels and ``Buffer`` accept."""
    v = get_version(version)
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                              num_ranks=num_ranks, num_experts=num_experts, variant=v.low_latency)
    t, e = num_max_dispatch_tokens_per_rank, num_experts
    formulas = {
        "send buffer": (f"max({format_int(t)} tokens x {format_int(layout.num_bytes_per_dispatch_msg)} B, "
                        f"{e} experts x {format_int(t)} tokens x {format_int(layout.num_bytes_per_combine_msg)} B)",
                        "147-151"),
        "recv buffer": (f"{e} experts x {format_int(t)} tokens x max({format_int(layout.num_bytes_per_dispatch_msg)}, "
                        f"{format_int(layout.num_bytes_per_combine_msg)}) B", "155-159"),
        "signaling buffer": (
            (f"({e} + {e} / {num_ranks}) ints x 4 B" if v.low_latency == 0 else f"{e} experts x 4 B")
            + (", aligned to 128 B" if v.low_latency >= 4 else ""), "162-166"),
    }
    regions = []
    for span in layout.spans():
        kind = span.name.rsplit(" ", 1)[0]
        formula, lines = formulas[kind]
        regions.append(Region(name=span.name, num_bytes=span.num_bytes, num_bytes_used=span.num_bytes,
                              formula=f"at offset {format_int(span.offset)}: {formula}",
                              source=v.cite("CFG", lines, "LowLatencyLayout")))
    total = layout.total_bytes
    hint = _hint_round_up(total)
    source = v.cite("CFG", "185-188", "get_low_latency_rdma_size_hint")
    regions.append(Region(name="hint rounding block", num_bytes=hint - total, num_bytes_used=0,
                          formula=f"((total {format_int(total)} + 128) / 128) x 128 - total: "
                                  "a full block even when aligned", source=source))
    return Buffer.combine("RDMA buffer", regions, "sum", NUM_BUFFER_ALIGNMENT_BYTES, source=source)


def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                   num_experts: int, *, version: str | None = None) -> int:
    """``get_low_latency_rdma_size_hint`` (``CFG:185-188``; ``Buffer.get_low_latency_rdma_size_hint``,
    ``PY:176-189``): the low-latency RDMA buffer bytes, the sum of :func:`low_latency_buffer`'s regions.

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
    return low_latency_buffer(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts,
                              version=version).num_bytes


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
    ``0 .. INT_MAX`` (the token count is an ``int`` upstream), not an estimate.

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
        c.add("deepep_version", v.id,
              f"{v.id} has no upper bound on num_rdma_bytes (Buffer checks num_rdma_bytes / 16 < INT_MAX "
              "only from 4623c67, i.e. in main); pass a budget")
    c.raise_if_any()
    # One token validates the arguments; send/recv bytes are T times their one-token value,
    # so their multiple-of-16 asserts hold for every T iff they hold for T = 1.
    LowLatencyLayout(num_max_dispatch_tokens_per_rank=1, hidden=hidden, num_ranks=num_ranks,
                     num_experts=num_experts, variant=v.low_latency)

    def fits(num_tokens: int) -> bool:
        hint = get_low_latency_rdma_size_hint(num_tokens, hidden, num_ranks, num_experts, version=v.id)
        if v.int4_count_check and not _passes_int4_check(hint):
            return False
        return budget is None or hint <= budget

    lo, hi = 0, INT32_MAX
    if not fits(0):
        return 0
    if fits(hi):
        return hi
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


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


def _in(name: str, value: int, allowed: tuple[int, ...], source: str, enforced: str) -> LimitCheck:
    """A set-membership limit: ``relation`` "in", ``bound`` the largest member, the set in ``name``."""
    return LimitCheck(name=f"{name} in {{{', '.join(map(str, allowed))}}}", value=value, relation="in",
                      bound=max(allowed), ok=value in allowed, source=source, enforced=enforced)


def _pr434_finding(v: Version) -> list[Finding]:
    if v.merged:
        return []
    return [Finding(severity="warning", code="deepep-v1.unmerged-version",
                    message=f"{v.id} follows an unmerged pull request ({v.short}); no released DeepEP computes this",
                    data={"commit": v.commit})]


def _validate_normal(plan, v: Version) -> Config | None:
    c = Checker()
    ranks = plan.num_ranks
    ranks_ok = False
    if ranks > NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS:
        c.add("num_ranks", ranks, f"allowed 1..{NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS} in normal mode "
                                  f"(NUM_MAX_NVL_PEERS x NUM_MAX_RDMA_PEERS, Buffer constructor, {BUF}:113)")
    elif ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                  f"(Buffer constructor, {BUF}:114)")
    else:
        ranks_ok = True
    if plan.num_topk > NORMAL_NUM_MAX_TOPK:
        c.add("num_topk", plan.num_topk, f"allowed 0..{NORMAL_NUM_MAX_TOPK} (EP_DEVICE_ASSERT(num_topk <= 32) in the "
                                         f"normal kernels, {INK}:519, 1754)")
    if plan.num_total_experts % ranks:
        c.add("num_experts", plan.num_total_experts,
              f"experts seen by the library (routed {plan.num_experts} + redundant {plan.num_redundant_experts}) "
              f"must be divisible by num_ranks = {ranks} ({BUF}:468)")
    config = plan.deepep_config
    if config is None:
        # The default tables: Buffer.set_num_sms(n) asserts an even n; the rank count must be listed.
        if plan.num_sms is not None and plan.num_sms % 2:
            c.add("num_sms", plan.num_sms, f"must be even (Buffer.set_num_sms asserts it, {PY}:162)")
        elif ranks_ok:
            try:
                get_dispatch_config(ranks, plan.num_sms or DEFAULT_NUM_SMS, version=v.id)
            except InvalidArgumentError as error:
                c.problems.extend(error.problems)
    elif not isinstance(config, Config):
        c.add("deepep_config", config, "must be an epbuf.backends.deepep_v1.Config")
        config = None
    elif ranks_ok:
        _check_hint_args(c, 1, ranks, config.num_sms, internode_only=False)
    c.raise_if_any()
    return config


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
    v = get_version(plan.deepep_version)
    override = _validate_normal(plan, v)
    ranks = plan.num_ranks
    hidden_bytes = get_hidden_bytes(plan.hidden, plan.use_fp8_dispatch)
    num_sms = plan.num_sms or DEFAULT_NUM_SMS
    if override is not None:
        configs = {"deepep_config": override}
    else:
        configs = {"dispatch": get_dispatch_config(ranks, num_sms, version=v.id),
                   "combine": get_combine_config(ranks, num_sms, version=v.id)}
    nvl = {k: cfg.nvl_buffer(hidden_bytes, ranks, version=v.id) for k, cfg in configs.items()}
    rdma = {k: cfg.rdma_buffer(hidden_bytes, ranks, version=v.id) for k, cfg in configs.items()}
    # The recipe keeps the larger hint of each kind; the first config wins a tie.
    nvl_key = max(nvl, key=lambda k: nvl[k].num_bytes)
    rdma_key = max(rdma, key=lambda k: rdma[k].num_bytes)
    nvl_buffer, rdma_buffer = nvl[nvl_key], rdma[rdma_key]
    num_nvl_bytes, num_rdma_bytes = nvl_buffer.num_bytes, rdma_buffer.num_bytes
    internode = ranks > NUM_MAX_NVL_PEERS

    records = _hint_slot_records("NVL hint slot", nvl_buffer)
    if internode:
        records += _hint_slot_records("RDMA hint slot", rdma_buffer)
        records += _internode_records(plan.hidden, plan.use_fp8_dispatch, plan.num_topk)

    # --- limits ---
    ctor = v.cite("BUF", "107-116", "Buffer constructor")
    num_rdma_ranks = max(ranks // NUM_MAX_NVL_PEERS, 1)
    # The hints multiply channels x ranks x tokens x kNumMaxTopK in C++ `int` before widening.
    int_product = max(
        cfg.num_channels * max(min(ranks, NUM_MAX_NVL_PEERS) * cfg.num_max_nvl_chunked_recv_tokens,
                               num_rdma_ranks * cfg.num_max_rdma_chunked_recv_tokens if internode else 0)
        * HINT_NUM_MAX_TOPK
        for cfg in configs.values())
    element_size = 1 if plan.use_fp8_dispatch else BF16_BYTES
    limits = [
        LimitCheck(name="num_ranks", value=ranks, relation="<=", bound=NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS,
                   ok=True, source=v.cite("BUF", "113", "Buffer constructor"), enforced="host"),
        LimitCheck(name="num_topk", value=plan.num_topk, relation="<=", bound=NORMAL_NUM_MAX_TOPK, ok=True,
                   source=v.cite("INK", "519, 1754", "EP_DEVICE_ASSERT(num_topk <= 32)"), enforced="kernel"),
        LimitCheck(name="num_ranks_per_node (NUM_MAX_NVL_PEERS)", value=plan.ranks_per_node, relation="==",
                   bound=min(ranks, NUM_MAX_NVL_PEERS), ok=plan.ranks_per_node == min(ranks, NUM_MAX_NVL_PEERS),
                   source=v.cite("CPL", "5", "NUM_MAX_NVL_PEERS"), enforced="assumed"),
    ]
    if internode:
        limits.append(_in("num_rdma_ranks (SWITCH_RDMA_RANKS)", num_rdma_ranks, v.rdma_ranks,
                          v.cite("LAUNCH", "66-89", "SWITCH_RDMA_RANKS"), "host"))
    else:
        limits.append(_in("num_ranks (SWITCH_RANKS)", ranks, v.intranode_ranks,
                          v.cite("LAUNCH", "53-64", "SWITCH_RANKS"), "host"))
    limits += [
        LimitCheck(name="num_local_experts", value=plan.num_total_experts // ranks, relation="<=",
                   bound=NUM_MAX_LOCAL_EXPERTS, ok=plan.num_total_experts // ranks <= NUM_MAX_LOCAL_EXPERTS,
                   source=v.cite("BUF", "469", "NUM_MAX_LOCAL_EXPERTS"), enforced="host"),
        LimitCheck(name="hidden x element size % 16", value=plan.hidden * element_size % INT4_BYTES, relation="==",
                   bound=0, ok=plan.hidden * element_size % INT4_BYTES == 0,
                   source=v.cite("BUF", "458, 930", "dispatch"), enforced="host"),
        LimitCheck(name="num_nvl_bytes (when num_rdma_bytes > 0)", value=num_nvl_bytes if num_rdma_bytes else 0,
                   relation="<=", bound=INT32_MAX, ok=num_nvl_bytes <= INT32_MAX or num_rdma_bytes == 0,
                   source=ctor, enforced="host"),
        LimitCheck(name="num_rdma_bytes", value=num_rdma_bytes, relation="<=", bound=INT32_MAX,
                   ok=num_rdma_bytes <= INT32_MAX, source=ctor, enforced="host"),
    ]
    if v.int4_count_check:
        for what, num_bytes, line in (("num_nvl_bytes", num_nvl_bytes, "111"),
                                      ("num_rdma_bytes", num_rdma_bytes, "112")):
            limits.append(LimitCheck(name=f"{what} / sizeof(int4)", value=num_bytes // INT4_BYTES, relation="<",
                                     bound=INT32_MAX, ok=_passes_int4_check(num_bytes), source=v.cite("BUF", line),
                                     enforced="host"))
    limits.append(LimitCheck(name="channels x tokens x ranks x kNumMaxTopK (int product in the hints)",
                             value=int_product, relation="<=", bound=INT32_MAX, ok=int_product <= INT32_MAX,
                             source=v.cite("CFG", "68, 93", "size hints"), enforced="assumed"))

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
        "deepep_version": v.id, "num_ranks": ranks, "num_ranks_per_node": plan.ranks_per_node,
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


def _validate_low_latency(plan, v: Version) -> None:
    c = Checker()
    ranks = plan.num_ranks
    if ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                  f"(Buffer constructor, also in low-latency mode, {BUF}:114)")
    if plan.num_total_experts % ranks:
        c.add("num_experts", plan.num_total_experts,
              f"experts seen by the library (routed {plan.num_experts} + redundant {plan.num_redundant_experts}) "
              f"must be divisible by num_ranks = {ranks} (low_latency_dispatch, {BUF}:1483)")
    if plan.num_topk > v.ll_num_max_topk:
        c.add("num_topk", plan.num_topk,
              f"allowed 0..{v.ll_num_max_topk} at {v.id} (kNumMaxTopK of the low-latency kernels, "
              f"{v.cite('LLK', '493, 501', 'kNumMaxTopK')})")
    try:
        LowLatencyLayout(num_max_dispatch_tokens_per_rank=plan.num_max_tokens_per_rank, hidden=plan.hidden,
                         num_ranks=ranks, num_experts=plan.num_total_experts, variant=v.low_latency)
    except InvalidArgumentError as error:
        c.problems.extend(error.problems)
    c.raise_if_any()


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
    v = get_version(plan.deepep_version)
    _validate_low_latency(plan, v)
    tokens, hidden, ranks = plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks
    experts = plan.num_total_experts
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=tokens, hidden=hidden, num_ranks=ranks,
                              num_experts=experts, variant=v.low_latency)
    buffer = low_latency_buffer(tokens, hidden, ranks, experts, version=v.id)
    hint = buffer.num_bytes
    fp8 = plan.use_fp8_dispatch
    records = [_ll_dispatch_record(hidden, fp8 or not v.ll_bf16_dispatch, v.low_latency,
                                   layout.num_bytes_per_dispatch_msg),
               _ll_combine_record(hidden, v.low_latency)]

    # --- limits ---
    limits = [
        LimitCheck(name="num_topk", value=plan.num_topk, relation="<=", bound=v.ll_num_max_topk, ok=True,
                   source=v.cite("LLK", "501, 1179", "kNumMaxTopK"), enforced="host"),
        LimitCheck(name="num_experts % num_ranks", value=experts % ranks, relation="==", bound=0, ok=True,
                   source=v.cite("BUF", "1483", "low_latency_dispatch"), enforced="host"),
    ]
    if v.int4_count_check:
        limits.append(LimitCheck(
            name="num_rdma_bytes / sizeof(int4) (hint <= 2^35 - 128 B, the 32 GiB ceiling)",
            value=hint // INT4_BYTES, relation="<", bound=INT32_MAX, ok=_passes_int4_check(hint),
            source=v.cite("BUF", "112"), enforced="host"))
    limits.append(_in("hidden (SWITCH_HIDDEN)", hidden, v.ll_hidden_sizes,
                      v.cite("LAUNCH", "113-135", "SWITCH_HIDDEN"), "host"))
    if fp8 and v.ll_fp8_hidden_512:
        limits.append(LimitCheck(name="hidden % 512 (FP8 dispatch)", value=hidden % 512, relation="==", bound=0,
                                 ok=hidden % 512 == 0, source=v.cite("BUF", "1530", "low_latency_dispatch"),
                                 enforced="host"))
    tma = ranks * tokens
    limits += [
        LimitCheck(name="num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)", value=tma % 4, relation="==",
                   bound=0, ok=tma % 4 == 0, source=v.cite("BUF", "1526", "low_latency_dispatch"), enforced="host"),
        LimitCheck(name="num_experts x 2 ints (workspace)", value=experts * INT_BYTES * 2, relation="<=",
                   bound=NUM_WORKSPACE_BYTES, ok=experts * INT_BYTES * 2 <= NUM_WORKSPACE_BYTES,
                   source=v.cite("LLK", "506", "dispatch workspace"), enforced="host"),
        LimitCheck(name="num_experts x num_max_dispatch_tokens_per_rank (int product in the layout)",
                   value=experts * tokens, relation="<=", bound=INT32_MAX, ok=experts * tokens <= INT32_MAX,
                   source=v.cite("CFG", "148, 155", "LowLatencyLayout"), enforced="assumed"),
    ]

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
    if v.int4_count_check:
        best = max_low_latency_tokens(hidden, ranks, experts, version=v.id)
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
        quantities.append(Quantity(name="max_num_max_dispatch_tokens_per_rank",
                                   value=next(f.data["max_tokens"] for f in findings
                                              if f.code == "deepep-ll.max-tokens")))
    inputs = {
        "deepep_version": v.id, "num_max_dispatch_tokens_per_rank": tokens, "hidden": hidden, "num_ranks": ranks,
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
