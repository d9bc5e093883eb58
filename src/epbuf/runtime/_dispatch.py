"""The dispatch steps of one rank (``refs.py:10-123 @dd758ca``): validate and route, pack the
records for the peers and for itself, then move each peer's records to its row ``(source
rank, t)`` and read every received record back in ``src_token_global_idx`` order."""

from __future__ import annotations

from functools import lru_cache

from ..codec._arrays import describe, numpy_ops
from ..codec.record_slots import RecordSlots
from ..errors import ArgumentProblem, InvalidArgumentError
from ._rank import RankBase, argument_error
from ._results import DispatchResult, DispatchSend, Handle

__all__ = ["DispatchSteps"]


class DispatchSteps(RankBase):
    """:class:`RankBase` with the steps of dispatch around the exchange."""

    def check_dispatch(self, x, topk_idx, topk_weights):
        """Every input problem, before any communication. Returns ``(x, sf)``."""
        lay, ops = self.layout, self.ops
        problems: list[ArgumentProblem] = []
        hidden_field = lay.dispatch.record.field("hidden")
        fp8 = lay.num_sf_bytes > 0
        sf = None
        if isinstance(x, tuple):
            if not fp8 or len(x) != 2:
                problems.append(ArgumentProblem("x", "a tuple", "BF16 dispatch takes one [num_tokens, hidden] tensor"
                                                if not fp8 else "FP8 dispatch takes (x, sf)"))
                x = x[0] if x else None
            else:
                x, sf = x
        elif fp8:
            problems.append(ArgumentProblem("x", "one tensor", "the plan dispatches FP8: give (x, sf) with the "
                                                               "e4m3fn codes and their fp32 scales"))
        for name, value in (("x", x), ("sf", sf), ("topk_idx", topk_idx), ("topk_weights", topk_weights)):
            if value is not None and not ops.is_array(value):
                raise argument_error(name, type(value).__name__, f"must be a {ops.kind} array like the buffer")
        if x is None or topk_idx is None:
            raise InvalidArgumentError(problems or [ArgumentProblem("x", None, "required")])
        # A misshapen x still has a token count to hold the others to, unless it has no dimension.
        num_tokens = int(x.shape[0]) if x.ndim >= 1 else None
        tokens_text = "num_tokens" if num_tokens is None else f"num_tokens = {num_tokens}"

        def other_tokens(array) -> bool:  # the array's first dimension disagrees with x's
            return num_tokens is not None and int(array.shape[0]) != num_tokens
        want = ops.dtype(hidden_field.dtype)
        if x.ndim != 2 or x.shape[1] != lay.hidden or x.dtype != want:
            problems.append(ArgumentProblem("x", describe(ops, x), f"must be {str(want).removeprefix('torch.')} "
                                                                    f"[num_tokens, hidden = {lay.hidden}]"))
        if num_tokens is not None and num_tokens > lay.num_max_tokens_per_rank:
            problems.append(ArgumentProblem("x", f"{num_tokens} tokens", f"allowed 0..{lay.num_max_tokens_per_rank} "
                                                                         "(num_max_tokens_per_rank of the plan)"))
        if sf is not None:
            per_token = ops.itemsize(sf) * (int(sf.shape[1]) if sf.ndim == 2 else -1)
            if sf.ndim != 2 or other_tokens(sf) or per_token != lay.num_sf_bytes:
                problems.append(ArgumentProblem("sf", describe(ops, sf),
                                                f"must be [{tokens_text}, n] with n x element size = "
                                                f"{lay.num_sf_bytes} B per token (the record's SF field)"))
        topk = lay.num_topk
        if topk_idx.ndim != 2 or other_tokens(topk_idx) or int(topk_idx.shape[1]) != topk \
                or ops.dtype_name(topk_idx) not in ("int64", "int32"):
            problems.append(ArgumentProblem("topk_idx", describe(ops, topk_idx),
                                            f"must be int64 or int32 [{tokens_text}, num_topk = {topk}]"))
        else:
            host_idx = ops.to_numpy(topk_idx)
            if host_idx.size and (host_idx.min() < -1 or host_idx.max() >= lay.num_experts):
                problems.append(ArgumentProblem("topk_idx", f"values {int(host_idx.min())}..{int(host_idx.max())}",
                                                f"allowed -1..{lay.num_experts - 1} (-1: no expert)"))
        if topk_weights is not None and (topk_weights.ndim != 2 or other_tokens(topk_weights)
                                         or int(topk_weights.shape[1]) != topk
                                         or ops.dtype_name(topk_weights) != "float32"):
            problems.append(ArgumentProblem("topk_weights", describe(ops, topk_weights),
                                            f"must be float32 [{tokens_text}, num_topk = {topk}] or None"))
        if problems:
            raise InvalidArgumentError(problems)
        return x, sf

    def prepare_dispatch(self, x, topk_idx, topk_weights) -> DispatchSend:
        """Validate and route; raises before anything leaves the rank. :meth:`pack_dispatch_peers`
        then packs the records for the peers into ``send`` (while the counts travel); the
        records this rank sends itself skip the exchange: :meth:`pack_dispatch_self` writes
        them straight into its own row of the dispatch region."""
        x, sf = self.check_dispatch(x, topk_idx, topk_weights)
        lay, ops = self.layout, self.ops
        np = numpy_ops().np
        num_ranks, num_tokens = lay.num_ranks, int(x.shape[0])
        host_idx = ops.to_numpy(topk_idx).astype(np.int64)
        experts_per_rank = lay.num_experts // num_ranks
        valid = host_idx >= 0
        dest = np.where(valid, host_idx // experts_per_rank, -1)
        sent = np.zeros((num_ranks, num_tokens), dtype=bool)
        token, slot = np.nonzero(valid)
        sent[dest[token, slot], token] = True
        send_dest, send_token = np.nonzero(sent)  # grouped by destination rank, then token (refs.py:62-83)
        send_counts = sent.sum(axis=1).astype(np.int64)
        # refs.py combine order: a rank's partial sits at its last top-k slot; partials add in slot order.
        topk = host_idx.shape[1]
        same = dest[:, :, None] == dest[:, None, :]
        is_last = valid & ~(same & _later(topk)).any(axis=2)
        ordinal = np.cumsum(is_last, axis=1) - 1
        rank_ordinal = np.full((num_tokens, num_ranks), -1, dtype=np.int64)
        token, slot = np.nonzero(is_last)
        rank_ordinal[token, dest[token, slot]] = ordinal[token, slot]
        combine_slots = rank_ordinal[send_token, send_dest] * lay.num_max_tokens_per_rank + send_token
        masked_idx = np.where(dest[send_token] == send_dest[:, None], host_idx[send_token], -1)  # refs.py:76-77
        src = (self.rank * lay.num_max_tokens_per_rank + send_token).astype(np.int32)  # refs.py:90

        stride = lay.dispatch.record.num_bytes
        to_self = send_dest == self.rank
        bypass = self.bypasses_self(int(send_counts[self.rank]) * stride)
        if bypass:
            self_begin = int(send_counts[:self.rank].sum())
            self_end = self_begin + int(send_counts[self.rank])
            peers = np.concatenate((np.arange(self_begin), np.arange(self_end, len(send_token))))
            self_fields = {"hidden": x, "sf": sf, "topk_idx": masked_idx[self_begin:self_end],
                           "topk_weights": topk_weights, "src_token_global_idx": src[self_begin:self_end],
                           "rows": send_token[self_begin:self_end]}
            peer_fields = {"hidden": x, "sf": sf, "topk_idx": masked_idx[peers], "topk_weights": topk_weights,
                           "src_token_global_idx": src[peers], "rows": send_token[peers]}
        else:  # every record travels, this rank's own included
            self_fields = None
            peer_fields = {"hidden": x, "sf": sf, "topk_idx": masked_idx, "topk_weights": topk_weights,
                           "src_token_global_idx": src, "rows": send_token}
        send = self.workspace(len(peer_fields["rows"]) * stride)
        sf_dtype = None if sf is None else ops.dtype_name(sf)
        fingerprint = self._fingerprint(ops.dtype_name(x), sf_dtype, topk_weights is not None)
        return DispatchSend(send=send, send_counts=send_counts, send_token=send_token,
                            combine_slots=combine_slots, combine_to_self=to_self, bypass_self=bypass,
                            self_fields=self_fields, peer_fields=peer_fields,
                            num_destinations=sent.sum(axis=0), num_tokens=num_tokens, fingerprint=fingerprint,
                            like=x, sf_dtype=None if sf is None else sf.dtype, idx_dtype=topk_idx.dtype,
                            with_weights=topk_weights is not None)

    def dispatch_landing(self, recv_counts, bypass: bool):
        """Where the exchange delivers the records, one source after the other: from the
        first exchanged row of the dispatch region on (``finish_dispatch`` moves each later
        source's records to its own row; with one peer and bypass they land in place)."""
        stride = self.layout.dispatch.record.num_bytes
        start = self._first_row(bypass) * self.layout.num_max_tokens_per_rank * stride
        total = int(self.peer_counts(recv_counts, bypass).sum())
        return self.dispatch_region[start:start + total * stride]

    def landing_spares_own_row(self, recv_counts, bypass: bool) -> bool:
        """Whether this rank writes its own records itself and the peers' land clear of its
        row (always with 2 ranks), so :meth:`pack_dispatch_self` may run while they travel."""
        if not bypass:
            return False
        lay = self.layout
        first = self._first_row(bypass)
        end = first * lay.num_max_tokens_per_rank + int(self.peer_counts(recv_counts).sum())
        return self.rank < first or end <= self.rank * lay.num_max_tokens_per_rank

    def _pack_dispatch(self, prepared: DispatchSend, f: dict, records: RecordSlots, slots: int) -> None:
        count = len(f["rows"])
        if not count:
            return
        ops, like = self.ops, prepared.like
        rows = ops.index(f["rows"], like=like)
        fields = {  # (array, rows): gathered straight into the records
            "hidden": (f["hidden"], rows),
            "topk_idx": ops.from_numpy(f["topk_idx"], like=like),
            "topk_weights": None if f["topk_weights"] is None else (f["topk_weights"], rows),
            "src_token_global_idx": ops.from_numpy(f["src_token_global_idx"], like=like),
        }
        if f["sf"] is not None:
            fields["sf"] = (f["sf"], rows)
        records.pack(slots=slots, **fields)

    def pack_dispatch_peers(self, prepared: DispatchSend) -> None:
        """Pack the records for the peers into ``prepared.send``, grouped by destination."""
        self._pack_dispatch(prepared, prepared.peer_fields, self._workspace_records(self.layout.dispatch.record), 0)

    def pack_dispatch_self(self, prepared: DispatchSend) -> None:
        """Write the records this rank dispatches to itself straight into its row ``(rank, t)``
        (nothing when they travel through the exchange)."""
        if prepared.self_fields is None:
            return
        self._pack_dispatch(prepared, prepared.self_fields, self.dispatch_slots,
                            self.rank * self.layout.num_max_tokens_per_rank)

    def finish_dispatch(self, prepared: DispatchSend, recv_counts, self_packed: bool = False) -> DispatchResult:
        """Move each peer's records from where the exchange delivered them to their slots
        ``(source rank, t)`` (last peer first: a row never lands on records still to move),
        write this rank's own records into its row unless ``self_packed``, and read every
        received record back in ``src_token_global_idx`` order (one gather per field)."""
        lay, ops = self.layout, self.ops
        np = numpy_ops().np
        tokens = lay.num_max_tokens_per_rank
        stride = lay.dispatch.record.num_bytes
        total = int(recv_counts.sum())
        peer_counts = self.peer_counts(recv_counts, prepared.bypass_self)
        first_row = self._first_row(prepared.bypass_self)
        landed = first_row * tokens + np.concatenate(([0], np.cumsum(peer_counts)[:-1])).astype(np.int64)
        for r in range(lay.num_ranks - 1, first_row, -1):
            count, source, target = int(peer_counts[r]), int(landed[r]) * stride, r * tokens * stride
            if count and source != target:
                ops.move(self.dispatch_region, source, target, count * stride)
        if not self_packed:
            self.pack_dispatch_self(prepared)
        first = np.concatenate(([0], np.cumsum(recv_counts)[:-1])).astype(np.int64)
        recv_slots = np.arange(total, dtype=np.int64) + np.repeat(np.arange(lay.num_ranks) * tokens - first,
                                                                   recv_counts)
        fields = self.dispatch_slots.unpack(slots=ops.index(recv_slots, like=self.buffer))
        global_idx = fields["topk_idx"]
        start = self.rank * (lay.num_experts // lay.num_ranks)
        local = (global_idx >= start) & (global_idx < start + lay.num_experts // lay.num_ranks)
        recv_topk_idx = ops.cast(ops.where(local, global_idx - start, -1), prepared.idx_dtype)
        recv_x = fields["hidden"]
        if prepared.sf_dtype is not None:
            recv_x = (recv_x, ops.as_dtype(ops.byte_rows(fields["sf"], total, lay.num_sf_bytes), prepared.sf_dtype))
        weights = fields["topk_weights"] if prepared.with_weights else None
        handle = Handle(num_tokens=prepared.num_tokens, send_counts=prepared.send_counts,
                        combine_slots=prepared.combine_slots, combine_to_self=prepared.combine_to_self,
                        num_destinations=prepared.num_destinations,
                        recv_counts=np.asarray(recv_counts, dtype=np.int64), recv_slots=recv_slots,
                        recv_topk_idx=recv_topk_idx, recv_topk_weights=weights, dispatch_stride=stride,
                        combine_stride=lay.combine.record.num_bytes)
        counts = recv_counts.astype(np.int32)
        num_recv = ops.from_numpy(counts) if ops.kind == "torch" else counts  # host, as refs.py returns it
        src = fields["src_token_global_idx"].reshape(total)
        return DispatchResult(recv_x, recv_topk_idx, weights, src, num_recv, handle)


@lru_cache(maxsize=64)
def _later(num_topk: int):
    """``[1, k, k]`` booleans: slot ``j2`` comes after slot ``j``."""
    np = numpy_ops().np
    return np.triu(np.ones((num_topk, num_topk), dtype=bool), 1)[None]
