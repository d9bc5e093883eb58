"""The combine steps of one rank (``refs.py:177-243 @dd758ca``, ``reduce_in_local=True``):
reduce over this rank's experts, pack one partial per received token for its source, then
place each partial at its slot ``(k, i)`` and sum the rows in ``ordered_accumulate`` order."""

from __future__ import annotations

from ..codec._arrays import describe, numpy_ops
from ._rank import RankBase, argument_error
from ._results import CombineResult, CombineSend, Handle

__all__ = ["CombineSteps"]


class CombineSteps(RankBase):
    """:class:`RankBase` with the steps of combine around the exchange."""

    def check_combine(self, y, handle: Handle, topk_weights):
        lay, ops = self.layout, self.ops
        if not isinstance(handle, Handle):
            raise argument_error("handle", type(handle).__name__, "must be the handle of this buffer's dispatch")
        for name, value in (("y", y), ("topk_weights", topk_weights)):
            if value is not None and not ops.is_array(value):
                raise argument_error(name, type(value).__name__, f"must be a {ops.kind} array like the buffer")
        n, hidden, topk = handle.num_recv_tokens, lay.hidden, lay.num_topk
        shape = tuple(int(d) for d in y.shape)
        if not ops.is_bfloat16(y) or shape not in ((n, hidden), (n, topk, hidden)):
            raise argument_error("y", describe(ops, y),
                                 f"must be BF16 [num_recv_tokens = {n}, hidden = {hidden}] (each received token "
                                 f"reduced over this rank's experts) or [{n}, num_topk = {topk}, {hidden}] (per "
                                 "top-k slot)")
        if topk_weights is not None and (ops.dtype_name(topk_weights) != "float32"
                                         or tuple(int(d) for d in topk_weights.shape) != (n, topk)):
            raise argument_error("topk_weights", describe(ops, topk_weights),
                                 f"must be float32 [num_recv_tokens = {n}, num_topk = {topk}] or None")

    def _local_reduce(self, y, handle: Handle):
        """A token's top-k slots of this rank's experts: fp32 sum in top-k order of each slot's
        BF16 output weighted by its dispatched weight (``bf16(w * y)``), rounded to BF16
        (``refs.py`` ``grouped_reduce`` by rank)."""
        ops = self.ops
        acc = ops.zeros((int(y.shape[0]), int(y.shape[2])), ops.dtype("float32"), like=y)
        weights = handle.recv_topk_weights
        valid = ops.to_numpy(handle.recv_topk_idx) >= 0
        for j in range(int(y.shape[1])):
            token = ops.index(valid[:, j].nonzero()[0], like=y)
            if not len(token):
                continue
            contribution = ops.bf16_to_float32(ops.take(y[:, j], token))
            if weights is not None:
                w = ops.take(weights[:, j:j + 1], token)
                contribution = ops.bf16_to_float32(ops.float32_to_bf16(w * contribution))
            ops.index_add(acc, token, contribution)
        return ops.float32_to_bf16(acc)

    def prepare_combine(self, y, handle: Handle, topk_weights) -> CombineSend:
        """Validate (and reduce a 3-D ``y`` over this rank's slots); where the records go. Then
        :meth:`pack_combine_peers` packs the peers' records into the workspace while the
        counts travel; the tokens this rank sent itself go straight to their slots
        (:meth:`pack_combine_self`)."""
        self.check_combine(y, handle, topk_weights)
        partial = y if y.ndim == 2 else self._local_reduce(y, handle)
        stride = self.layout.combine.record.num_bytes
        counts = handle.recv_counts
        first = int(counts[:self.rank].sum())
        end = first + int(counts[self.rank])
        bypass = self.bypasses_self((end - first) * stride)
        if not bypass:
            first = end = 0  # every record travels, this rank's own included
        num_send = int(self.peer_counts(counts, bypass).sum())
        num_back = int(self.peer_counts(handle.send_counts, bypass).sum())
        workspace = self.workspace((num_send + num_back) * stride)
        send, landing = workspace[:num_send * stride], workspace[num_send * stride:]
        return CombineSend(send=send, landing=landing, partial=partial, topk_weights=topk_weights,
                           self_rows=(first, end), bypass_self=bypass, with_weights=topk_weights is not None,
                           like=y, fingerprint=self._fingerprint("combine", topk_weights is not None))

    def pack_combine_peers(self, prepared: CombineSend) -> None:
        """Pack one record per token received from a peer into ``prepared.send``: the rows
        before and after this rank's own, in receive order."""
        first, end = prepared.self_rows
        partial, weights = prepared.partial, prepared.topk_weights
        records = self._workspace_records(self.layout.combine.record)
        num_recv = int(partial.shape[0])
        for begin, stop, slot in ((0, first, 0), (end, num_recv, first)):
            if stop > begin:
                records.pack(slots=slot, hidden=partial[begin:stop],
                             topk_weights=None if weights is None else weights[begin:stop])

    def pack_combine_self(self, prepared: CombineSend, handle: Handle) -> None:
        """Write the partials of the tokens this rank sent itself straight into their slots
        ``(k, i)`` of the combine region (the peers' records meanwhile land in the workspace)."""
        first, end = prepared.self_rows
        if end == first:
            return
        ops = self.ops
        slots = ops.index(handle.combine_slots[handle.combine_to_self], like=self.buffer)
        weights = prepared.topk_weights
        self.combine_slots.pack(slots=slots, hidden=prepared.partial[first:end],
                                topk_weights=None if weights is None else weights[first:end])

    def _reduce_views(self):
        """The combine region's BF16 partials ``[rows, slots, hidden]`` and weights ``[rows,
        slots, num_topk]``: zero-copy views built once, or copies where the element type
        allows no view (then read afresh each call)."""
        if self._views is None:
            lay, records = self.layout, self.combine_slots
            hidden, weights = records.field_view("hidden"), records.field_view("topk_weights")
            cache = hidden is not None and weights is not None
            if not cache:
                fields = records.unpack(num_slots=lay.combine.num_slots, fields=["hidden", "topk_weights"], copy=False)
                hidden, weights = fields["hidden"], fields["topk_weights"]
            shape = (lay.combine.rows, lay.num_max_tokens_per_rank)
            views = (hidden[:lay.combine.num_slots].reshape(*shape, lay.hidden),
                     weights[:lay.combine.num_slots].reshape(*shape, lay.num_topk))
            if not cache:
                return views
            self._views = views
        return self._views

    # Tokens per block of the reduction: its fp32 rows stay in the cache between the additions.
    _REDUCE_BLOCK_BYTES = 2 << 20

    def finish_combine(self, prepared: CombineSend, handle: Handle, staging,
                       self_packed: bool = False) -> CombineResult:
        """Place each peer's partial at its slot ``(k, i)`` with one row scatter (and this
        rank's own partials unless ``self_packed``), zero the slots no partial reached (``k
        >=`` the token's destinations), then sum the rows ``k = 0, 1, ...`` in order through
        strided views of the region, in fp32, a block of tokens at a time, rounded once to BF16
        (``refs.py`` ``ordered_accumulate``). refs.py's sum starts from +0.0; this one starts
        from the first partial and adds +0.0 before rounding: the same bits (the two differ
        only in the sign of a zero sum), one pass less. A zeroed slot adds +0.0, which changes
        no such sum."""
        lay, ops = self.layout, self.ops
        np = numpy_ops().np
        record = lay.combine.record
        stride, tokens, rows = record.num_bytes, lay.num_max_tokens_per_rank, lay.combine.rows
        with_weights = prepared.with_weights
        num_tokens = handle.num_tokens
        region, size = self.combine_slots.whole_records(size=True)
        peer_slots = handle.combine_slots[~handle.combine_to_self] if prepared.bypass_self else handle.combine_slots
        if len(peer_slots):
            received = staging[:len(peer_slots) * stride].reshape(len(peer_slots), stride)
            words = ops.as_words(received, size)
            if words is None:  # the staging's offset allows no words: move bytes
                region, size, words = self.combine_slots.whole_records_bytes(), 1, received
            ops.scatter_into(region, ops.index(peer_slots, like=self.buffer), words)
        if not self_packed:
            self.pack_combine_self(prepared, handle)
        destinations = handle.num_destinations
        used = int(destinations.max()) if num_tokens else 0
        if num_tokens and int(destinations.min()) < rows:
            empty = np.concatenate([k * tokens + np.nonzero(destinations <= k)[0] for k in range(rows)])
            ops.zero_at(region, ops.index(empty, like=self.buffer))
        hidden, weights = self._reduce_views()
        combined = ops.empty((num_tokens, lay.hidden), ops.dtype("bfloat16"), like=self.buffer)
        f32 = ops.dtype("float32")
        block = max(1, min(num_tokens, self._REDUCE_BLOCK_BYTES // (4 * lay.hidden)))
        if num_tokens and (self._accumulator is None or int(self._accumulator.shape[0]) < block):
            self._accumulator = ops.empty((block, lay.hidden), f32, like=self.buffer)
        for start in range(0, num_tokens, block):
            end = min(start + block, num_tokens)
            acc = self._accumulator[:end - start]
            ops.load_bfloat16(acc, hidden[0, start:end])
            for k in range(1, used):
                ops.add_bfloat16(acc, hidden[k, start:end])
            ops.store_bfloat16(combined[start:end], acc)
        combined_weights = None
        if with_weights:
            combined_weights = ops.zeros((num_tokens, lay.num_topk), f32, like=self.buffer)
            for k in range(used):
                combined_weights += weights[k, :num_tokens]
        return CombineResult(combined, combined_weights)
