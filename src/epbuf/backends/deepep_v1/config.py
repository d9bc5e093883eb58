"""``deep_ep::legacy::Config`` and its two normal-mode size hints, NVL and RDMA.

Upstream: ``csrc/legacy/config.hpp:24-99 @ dd758ca`` (``CFG``; ``csrc/config.hpp`` before
2.0.0). A :class:`Config` holds the SM count and the chunk sizes of the normal kernels;
``get_nvl_buffer_size_hint`` reserves, per channel (``num_sms / 2``) and NVL peer, a ring of
``num_max_nvl_chunked_recv_tokens`` token slots of hidden bytes, a source meta, 128 top-k
indices, 128 top-k weights and 128 scales; ``get_rdma_buffer_size_hint`` does the same per
RDMA peer, twice (send and receive halves). Each hint is the sum of its terms rounded up to
128 B. The terms are computed once (:func:`_nvl_terms`, :func:`_rdma_terms`): the integer
hints add them up, :meth:`Config.nvl_buffer` / :meth:`Config.rdma_buffer` name them as regions.
"""

from __future__ import annotations

from ...errors import Checker, check_int
from ..._record import Record
from ...report import Buffer, Field, RecordLayout, Region
from ...units import INT32_MAX, INT64_MAX, align, format_int
from .constants import (BINDING_DEFAULT_CONFIG, DEFAULT_TOPK_IDX_BITS, FLOAT_BYTES, HINT_NUM_MAX_SCALES,
                        HINT_NUM_MAX_TOPK, INT4_BYTES, INT_BYTES, NUM_BUFFER_ALIGNMENT_BYTES, NUM_CHANNELS_PER_SM,
                        NUM_MAX_NVL_PEERS, SOURCE_META_BYTES, UINT64_BYTES, UINT64_MAX)
from .versions import _DEFAULT, CFG, Version, get_version, topk_idx_bytes

__all__ = ["Config"]

_SUM_NAMES = ("channel metadata", "hidden data", "source meta", "top-k indices", "top-k weights", "scales")


class Config(Record):
    """``deep_ep::legacy::Config`` (``CFG:24-51``): SMs and chunk sizes of the normal kernels.

    Arguments in upstream's order, positional or by keyword; defaults are the Python
    binding's (``BUF:1752-1760``). The constructor applies upstream's rules: every count
    positive, NVL send < recv, and the RDMA receive count rounded *up* to a multiple of the
    send count before checking send < recv and send <= recv / 2 (``CFG:41-50``). The rounded
    value is what the attribute holds::

        >>> Config().num_max_rdma_chunked_recv_tokens      # align_up(256, 6)
        258
        >>> Config(24, 8, 512, 16, 128).get_nvl_buffer_size_hint(7168, 16)
        453380736

    Before 1fc40d5 (2025-03-06) send < recv was checked before the rounding and there was
    no ``recv / 2`` rule; both orders accept exactly the same configs (once rounded,
    ``recv = k * send`` and ``send < recv`` means ``k >= 2``, hence ``send <= recv / 2``),
    so one constructor serves every version.

    Raises:
        InvalidArgumentError: every broken rule at once, naming field, value and rule.
    """

    num_sms: int
    num_max_nvl_chunked_send_tokens: int
    num_max_nvl_chunked_recv_tokens: int
    num_max_rdma_chunked_send_tokens: int
    num_max_rdma_chunked_recv_tokens: int

    def __init__(self, num_sms: int = BINDING_DEFAULT_CONFIG[0],
                 num_max_nvl_chunked_send_tokens: int = BINDING_DEFAULT_CONFIG[1],
                 num_max_nvl_chunked_recv_tokens: int = BINDING_DEFAULT_CONFIG[2],
                 num_max_rdma_chunked_send_tokens: int = BINDING_DEFAULT_CONFIG[3],
                 num_max_rdma_chunked_recv_tokens: int = BINDING_DEFAULT_CONFIG[4]) -> None:
        d = self.__dict__
        d["num_sms"] = num_sms
        d["num_max_nvl_chunked_send_tokens"] = num_max_nvl_chunked_send_tokens
        d["num_max_nvl_chunked_recv_tokens"] = num_max_nvl_chunked_recv_tokens
        d["num_max_rdma_chunked_send_tokens"] = num_max_rdma_chunked_send_tokens
        d["num_max_rdma_chunked_recv_tokens"] = num_max_rdma_chunked_recv_tokens
        self._check()

    def _check(self) -> None:
        c = Checker()
        where = f"Config constructor, {CFG}"
        c.int_range("num_sms", self.num_sms, 0, INT32_MAX, f"{where}:41")
        nvl_send, nvl_recv = self.num_max_nvl_chunked_send_tokens, self.num_max_nvl_chunked_recv_tokens
        nvl_send_ok = c.int_range("num_max_nvl_chunked_send_tokens", nvl_send, 1, INT32_MAX, f"{where}:42")
        nvl_recv_ok = c.int_range("num_max_nvl_chunked_recv_tokens", nvl_recv, 1, INT32_MAX, f"{where}:42")
        if nvl_send_ok and nvl_recv_ok and nvl_send >= nvl_recv:
            c.add("num_max_nvl_chunked_send_tokens", nvl_send,
                  f"must be < num_max_nvl_chunked_recv_tokens = {nvl_recv} ({where}:43)")
        send, given = self.num_max_rdma_chunked_send_tokens, self.num_max_rdma_chunked_recv_tokens
        rdma_send_ok = c.int_range("num_max_rdma_chunked_send_tokens", send, 1, INT32_MAX, f"{where}:44")
        rdma_recv_ok = c.int_range("num_max_rdma_chunked_recv_tokens", given, 1, INT32_MAX, f"{where}:44")
        if rdma_send_ok and rdma_recv_ok:
            # "Ceil up RDMA buffer size" (CFG:46-47): the receive ring holds whole send chunks.
            recv = align(given, send)
            if recv > INT32_MAX:
                c.add("num_max_rdma_chunked_recv_tokens", given,
                      f"rounded up to a multiple of num_max_rdma_chunked_send_tokens = {send} it is {recv}, "
                      f"beyond int32 ({where}:47)")
            elif not send < recv:
                c.add("num_max_rdma_chunked_send_tokens", send,
                      f"must be < num_max_rdma_chunked_recv_tokens rounded up to a multiple of it "
                      f"(align_up({given}, {send}) = {recv}) ({where}:48)")
            elif not send <= recv // 2:  # implied by the line above; kept as upstream states it
                c.add("num_max_rdma_chunked_send_tokens", send,
                      f"must be <= num_max_rdma_chunked_recv_tokens / 2 = {recv // 2} "
                      f"(RDMA lazy head update, {where}:49-50)")
            else:
                self.__dict__["num_max_rdma_chunked_recv_tokens"] = recv
        c.raise_if_any()

    @property
    def num_channels(self) -> int:
        """``num_sms / 2`` (C++ ``int`` division, ``CFG:62``)."""
        return self.num_sms // NUM_CHANNELS_PER_SM

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        """``(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv)`` with the rounded RDMA receive count."""
        return (self.num_sms, self.num_max_nvl_chunked_send_tokens, self.num_max_nvl_chunked_recv_tokens,
                self.num_max_rdma_chunked_send_tokens, self.num_max_rdma_chunked_recv_tokens)

    # --- the integer hints: upstream's names and arguments ------------------------------
    def get_nvl_buffer_size_hint(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                                 num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> int:
        """``Config::get_nvl_buffer_size_hint(hidden_bytes, num_ranks)`` (``CFG:53-73``): NVL buffer bytes.

        A method of the kernel config, independent of the token count and top-k: unlike DeepEP
        V2's and DeepEP-Ascend's ``calculate_buffer_size(num_ranks, num_max_tokens_per_rank,
        hidden, num_topk, ...)``, which size records for a token count from the hidden *size*.

        Args:
            hidden_bytes: bytes per token (the recipe passes :func:`.tables.get_hidden_bytes`);
                ``size_t`` upstream.
            num_ranks: expert-parallel ranks.
            version: a version id or commit (:func:`.versions.get_version`; ``None``: main).
            num_topk_idx_bits: ``topk_idx_t`` width of the build (64, or 32 from da6ca24).

        >>> Config(24, 8, 512, 16, 128).get_nvl_buffer_size_hint(7168, 16, version="pr434")
        429000960

        Raises:
            InvalidArgumentError: upstream's asserts in the hint (ranks not below or a multiple
                of 8, odd ``num_sms`` above 8 ranks), a product beyond C++ ``int``, non-positive
                or non-integer arguments, an unknown version.
        """
        v, terms, _, _ = _nvl_terms(self, hidden_bytes, num_ranks, version, num_topk_idx_bits)
        return _round_up(sum(terms), hidden_bytes, v)

    def get_rdma_buffer_size_hint(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                                  num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> int:
        """``Config::get_rdma_buffer_size_hint(hidden_bytes, num_ranks)`` (``CFG:75-99``): RDMA buffer
        bytes, 0 for ``num_ranks <= 8``. Arguments as :meth:`get_nvl_buffer_size_hint` (``hidden_bytes``
        is ``int64_t`` upstream).

        >>> Config(24, 8, 512, 16, 128).get_rdma_buffer_size_hint(7168, 16)
        56774016
        """
        v, terms, _, _ = _rdma_terms(self, hidden_bytes, num_ranks, version, num_topk_idx_bits)
        return _round_up(sum(terms), hidden_bytes, v)

    # --- the same terms as named regions ------------------------------------------------
    def nvl_buffer(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                   num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> Buffer:
        """The terms of :meth:`get_nvl_buffer_size_hint` as named regions (rule ``"sum"``).

        With ``C = num_sms / 2`` channels, ``N = min(num_ranks, 8)`` NVL peers, ``R =
        max(num_ranks / 8, 1)`` RDMA peers and ``T = num_max_nvl_chunked_recv_tokens``:
        ``C*N*(2R + 3)`` ints of channel metadata, then per token slot ``C*N*T`` x
        (``hidden_bytes`` + 8 B source meta + 128 top-k indices + 128 fp32 weights + 128 fp32
        scales), the sum rounded up to 128 B (the last region). ``pr434``: ``(2R + 2)`` ints,
        top-k indices as ``int``, and an extra ``int4`` per token slot.
        """
        v, terms, idx_bytes, meta_ints = _nvl_terms(self, hidden_bytes, num_ranks, version, num_topk_idx_bits)
        ch, n, r = self.num_channels, min(num_ranks, NUM_MAX_NVL_PEERS), max(num_ranks // NUM_MAX_NVL_PEERS, 1)
        slot = f"{ch} channels x {n} NVL ranks x {format_int(self.num_max_nvl_chunked_recv_tokens)} tokens"
        formulas = (f"{ch} channels x {n} NVL ranks x (2 x {r} + {meta_ints}) ints x 4 B",
                    f"{slot} x {format_int(hidden_bytes)} B", f"{slot} x {SOURCE_META_BYTES} B (SourceMeta)",
                    f"{slot} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x {idx_bytes} B",
                    f"{slot} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x 4 B",
                    f"{slot} x {HINT_NUM_MAX_SCALES} (kNumMaxScales) x 4 B", f"{slot} x 16 B")
        names = _SUM_NAMES + ("int4 alignment per token",)
        # Every term but the metadata is one field per token slot of the ring (channel, NVL rank).
        shape = (ch * n, self.num_max_nvl_chunked_recv_tokens)
        return _hint_buffer("NVL buffer", v, "get_nvl_buffer_size_hint", terms, names, formulas,
                            ("65", "66", "67", "68", "69", "70", "70"), "71", ((),) + (shape,) * (len(terms) - 1))

    def rdma_buffer(self, hidden_bytes: int, num_ranks: int, *, version: str | None = None,
                    num_topk_idx_bits: int = DEFAULT_TOPK_IDX_BITS) -> Buffer:
        """The terms of :meth:`get_rdma_buffer_size_hint` as named regions (rule ``"sum"``).

        Empty (0 bytes) for ``num_ranks <= 8`` ("Legacy mode": intranode needs no RDMA buffer).
        Otherwise, with ``C`` channels, ``R = num_ranks / 8`` RDMA peers and ``T`` the *rounded*
        ``num_max_rdma_chunked_recv_tokens``, everything twice (send and receive halves):
        ``C*R*(8*2 + 2)`` ints of metadata, and per token slot ``C*R*T`` x (``hidden_bytes`` +
        8 B source meta + 128 top-k indices + 128 weights + 128 scales + 16 B). ``pr434`` stores
        indices as ``int`` and adds ``C*R*2`` u64 head/tail counters, twice.
        """
        v, terms, idx_bytes, _ = _rdma_terms(self, hidden_bytes, num_ranks, version, num_topk_idx_bits)
        if not terms:
            return Buffer.combine("RDMA buffer", [], "sum", NUM_BUFFER_ALIGNMENT_BYTES,
                                  source=v.cite("CFG", "76-78", "get_rdma_buffer_size_hint"))
        ch, r = self.num_channels, num_ranks // NUM_MAX_NVL_PEERS
        slot = (f"{ch} channels x {r} RDMA ranks x {format_int(self.num_max_rdma_chunked_recv_tokens)} tokens "
                "x 2 (send + recv)")
        formulas = (f"{ch} channels x {r} RDMA ranks x (8 x 2 + 2) ints x 2 x 4 B",
                    f"{slot} x {format_int(hidden_bytes)} B", f"{slot} x {SOURCE_META_BYTES} B (SourceMeta)",
                    f"{slot} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x {idx_bytes} B",
                    f"{slot} x {HINT_NUM_MAX_TOPK} (kNumMaxTopK) x 4 B",
                    f"{slot} x {HINT_NUM_MAX_SCALES} (kNumMaxScales) x 4 B", f"{slot} x 16 B",
                    f"{ch} channels x {r} RDMA ranks x 2 x 8 B (u64) x 2")
        names = _SUM_NAMES + ("int4 per token", "head/tail counters")
        # Per token slot of the ring (channel, RDMA rank, send or receive half): one field per term.
        shape = (ch * r * 2, self.num_max_rdma_chunked_recv_tokens)
        return _hint_buffer("RDMA buffer", v, "get_rdma_buffer_size_hint", terms, names, formulas,
                            ("90", "91", "92", "93", "94", "95", "96", "96"), "97", ((),) + (shape,) * 6 + ((),))


def _checked(cfg: Config, hidden_bytes: object, num_ranks: object, version: object, bits: object,
             max_hidden_bytes: int) -> tuple[Version, int]:
    """The version and ``sizeof(topk_idx_t)`` after the hints' argument checks and host asserts
    (``CFG:58-59, 84-85``; the RDMA hint returns 0 for ``num_ranks <= 8`` before its asserts,
    which then hold anyway). One comparison chain on the good path: validation must not cost
    more than the arithmetic (benchmarks/api_speed.py)."""
    v = _DEFAULT if version is None else get_version(version)
    if not (type(hidden_bytes) is int and 0 < hidden_bytes <= max_hidden_bytes and type(num_ranks) is int
            and 0 < num_ranks <= INT32_MAX and (num_ranks <= NUM_MAX_NVL_PEERS
                                                or not (num_ranks % NUM_MAX_NVL_PEERS or cfg.num_sms % 2))):
        check_int("hidden_bytes", hidden_bytes, 1, None, "bytes per token")
        check_int("num_ranks", num_ranks, 1, INT32_MAX)
        if hidden_bytes > max_hidden_bytes:  # type: ignore[operator]
            _overflow("hidden_bytes", hidden_bytes, "beyond the hint's argument type", v)
        c = Checker()
        if num_ranks % NUM_MAX_NVL_PEERS:  # type: ignore[operator]
            c.add("num_ranks", num_ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                          f"(EP_HOST_ASSERT in the size hints, {v.cite('CFG', '58, 84')})")
        if cfg.num_sms % 2:
            c.add("num_sms", cfg.num_sms, f"must be even above {NUM_MAX_NVL_PEERS} ranks (num_ranks = {num_ranks}; "
                                          f"{v.cite('CFG', '59, 85')})")
        c.raise_if_any()
    return v, (8 if bits == 64 and type(bits) is int else topk_idx_bytes(v, bits))


def _overflow(name: str, value: object, why: str, v: Version, lines: str = "53-99") -> None:
    """Raise: upstream's size function cannot hold this value (the rule for such plans)."""
    c = Checker()
    c.add(name, value, f"{why} ({v.cite('CFG', lines)}); upstream cannot compute this size")
    c.raise_if_any()


def _nvl_terms(cfg: Config, hidden_bytes: int, num_ranks: int, version: object,
               bits: object) -> tuple[Version, tuple[int, ...], int, int]:
    """The version, the terms of ``get_nvl_buffer_size_hint`` (``CFG:65-70``) before rounding,
    the top-k index bytes and the ``+ 3`` (``pr434``: ``+ 2``) of the metadata ints."""
    v, idx_bytes = _checked(cfg, hidden_bytes, num_ranks, version, bits, UINT64_MAX)
    ch, t = cfg.num_sms // NUM_CHANNELS_PER_SM, cfg.num_max_nvl_chunked_recv_tokens
    n, r = min(num_ranks, NUM_MAX_NVL_PEERS), max(num_ranks // NUM_MAX_NVL_PEERS, 1)
    slots = ch * n * t
    if slots * HINT_NUM_MAX_TOPK > INT32_MAX:  # channels x ranks x tokens x 128 in C++ int (CFG:68)
        _overflow("num_max_nvl_chunked_recv_tokens", t, f"num_channels x num_nvl_ranks x tokens x kNumMaxTopK = "
                  f"{format_int(slots * HINT_NUM_MAX_TOPK)} overflows the C++ int the hint multiplies in", v, "68")
    if v.size_hint == "pr434":  # PR #434: one metadata int less, indices as int, an int4 per slot
        meta_ints, idx_bytes = 2, INT_BYTES
        terms: tuple[int, ...] = (ch * n * (2 * r + 2) * INT_BYTES, slots * hidden_bytes, slots * SOURCE_META_BYTES,
                                  slots * HINT_NUM_MAX_TOPK * INT_BYTES, slots * _TOPK_WEIGHT_BYTES,
                                  slots * _SCALE_BYTES, slots * INT4_BYTES)
    else:
        meta_ints = 3
        terms = (ch * n * (2 * r + 3) * INT_BYTES, slots * hidden_bytes, slots * SOURCE_META_BYTES,
                 slots * HINT_NUM_MAX_TOPK * idx_bytes, slots * _TOPK_WEIGHT_BYTES, slots * _SCALE_BYTES)
    return v, terms, idx_bytes, meta_ints


def _rdma_terms(cfg: Config, hidden_bytes: int, num_ranks: int, version: object,
                bits: object) -> tuple[Version, tuple[int, ...], int, int]:
    """As :func:`_nvl_terms` for ``get_rdma_buffer_size_hint`` (``CFG:90-96``); no terms for
    ``num_ranks <= 8`` (``CFG:77-78``)."""
    v, idx_bytes = _checked(cfg, hidden_bytes, num_ranks, version, bits, INT64_MAX)
    if num_ranks <= NUM_MAX_NVL_PEERS:
        return v, (), idx_bytes, 2
    ch, r, t = cfg.num_sms // NUM_CHANNELS_PER_SM, num_ranks // NUM_MAX_NVL_PEERS, cfg.num_max_rdma_chunked_recv_tokens
    slots = ch * r * t
    if slots * HINT_NUM_MAX_TOPK > INT32_MAX:  # CFG:93
        _overflow("num_max_rdma_chunked_recv_tokens", t, f"num_channels x num_rdma_ranks x tokens x kNumMaxTopK = "
                  f"{format_int(slots * HINT_NUM_MAX_TOPK)} overflows the C++ int the hint multiplies in", v, "93")
    if slots * hidden_bytes * 2 > INT64_MAX:  # int x int64_t hidden_bytes (CFG:91)
        _overflow("hidden_bytes", hidden_bytes, "the RDMA hint's hidden term would overflow int64", v, "91")
    terms, idx_bytes = rdma_terms(v, ch, r, t, hidden_bytes, idx_bytes)
    return v, terms, idx_bytes, 2


def _round_up(total: int, hidden_bytes: int, v: Version) -> int:
    """``((num_bytes + 127) / 128) * 128`` (``CFG:71, 97``): a true round-up, in ``size_t``."""
    if total > UINT64_MAX - 127:
        _overflow("hidden_bytes", hidden_bytes, "the hint would overflow size_t", v, "71, 97")
    return (total + 127) // NUM_BUFFER_ALIGNMENT_BYTES * NUM_BUFFER_ALIGNMENT_BYTES


def rdma_terms(v: Version, ch: int, r: int, t: int, hidden_bytes: int, idx_bytes: int) -> tuple[tuple[int, ...], int]:
    """The terms of ``get_rdma_buffer_size_hint`` (``CFG:90-96``) for ``ch`` channels, ``r`` RDMA
    ranks and ``t`` (rounded) receive tokens, unchecked; and the index bytes used. Every term
    counts the send and the receive half."""
    halves = ch * r * t * 2
    pr434 = v.size_hint == "pr434"  # PR #434: indices as int, u64 head and tail per channel
    idx_bytes = INT_BYTES if pr434 else idx_bytes
    terms = (ch * r * _RDMA_META_BYTES, halves * hidden_bytes, halves * SOURCE_META_BYTES,
             halves * HINT_NUM_MAX_TOPK * idx_bytes, halves * _TOPK_WEIGHT_BYTES, halves * _SCALE_BYTES,
             halves * INT4_BYTES)
    return (terms + (ch * r * 2 * UINT64_BYTES * 2,) if pr434 else terms), idx_bytes


# Per-slot constants of the hints (Python does not fold module constants).
_RDMA_META_BYTES = (NUM_MAX_NVL_PEERS * 2 + 2) * 2 * INT_BYTES  # (8 x 2 + 2) ints, twice (CFG:90)
_TOPK_WEIGHT_BYTES = HINT_NUM_MAX_TOPK * FLOAT_BYTES  # kNumMaxTopK fp32 weights per slot (CFG:69, 94)
_SCALE_BYTES = HINT_NUM_MAX_SCALES * FLOAT_BYTES  # kNumMaxScales fp32 scales per slot (CFG:70, 95)


def _hint_buffer(name: str, v: Version, function: str, terms: tuple[int, ...], names: tuple[str, ...],
                 formulas: tuple[str, ...], lines: tuple[str, ...], round_line: str,
                 shapes: tuple[tuple, ...]) -> Buffer:
    """The regions of a hint, then ``((num_bytes + 127) / 128) * 128`` (a true round-up) as
    an "alignment padding" region when it adds bytes. ``shapes``: each term's ``(rows, slots)``
    when it is one field per token slot (``()`` otherwise; Region.record stays empty: a slot of
    such a region holds one field, not a record)."""
    regions = [Region(name=names[i], num_bytes=b, num_bytes_used=b, formula=formulas[i],
                      source=v.cite("CFG", lines[i], function), shape=shapes[i]) for i, b in enumerate(terms)]
    total = sum(terms)
    rounded = align(total, NUM_BUFFER_ALIGNMENT_BYTES)
    source = v.cite("CFG", round_line, function)
    if rounded != total:
        regions.append(Region(name="alignment padding", num_bytes=rounded - total, num_bytes_used=0,
                              formula=f"round {format_int(total)} B up to a multiple of 128", source=source))
    return Buffer.combine(name, regions, "sum", NUM_BUFFER_ALIGNMENT_BYTES, source=source)


# Per-token regions of the hints -> (field name, element count per slot or 0 for "one byte
# each"); element type by (field, element size).
_PER_SLOT_REGIONS = {
    "hidden data": ("hidden", 0), "source meta": ("source_meta", 2), "top-k indices": ("topk_idx", HINT_NUM_MAX_TOPK),
    "top-k weights": ("topk_weights", HINT_NUM_MAX_TOPK), "scales": ("scales", HINT_NUM_MAX_SCALES),
    "int4 alignment per token": ("int4", 4), "int4 per token": ("int4", 4),
}
_DTYPES = {("topk_idx", 8): "int64", ("topk_idx", 4): "int32", ("topk_weights", 4): "float32",
           ("scales", 4): "float32", ("source_meta", 4): "int32", ("int4", 4): "int32"}


def hint_slot_records(name: str, buffer: Buffer) -> list[RecordLayout]:
    """What a hint (:meth:`Config.nvl_buffer` / :meth:`Config.rdma_buffer`) reserves per token slot:
    each per-token region divided by the slot count (the source-meta region holds 8 B per slot);
    ``[]`` when there are no slots. Not a memory layout: the kernels keep the fields in separate
    arrays per channel. UCCL-EP's hints are these (its report reads this through ``_deepep``)."""
    by_name = {r.name: r for r in buffer.regions}
    slots = by_name["source meta"].num_bytes // SOURCE_META_BYTES if "source meta" in by_name else 0
    if slots == 0:
        return []
    fields, offset = [], 0
    for r in buffer.regions:
        if r.name in _PER_SLOT_REGIONS:
            field_name, count = _PER_SLOT_REGIONS[r.name]
            size = r.num_bytes // slots
            count = count or size
            fields.append(Field(name=field_name, offset=offset, num_bytes=size, count=count,
                                dtype=_DTYPES.get((field_name, size // count), "uint8")))
            offset += size
    return [RecordLayout.from_fields(name, offset, fields, view="hint budget per token slot, not a memory layout")]
