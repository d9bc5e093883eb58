"""``deep_ep.ElasticBuffer`` (DeepEP V2, ``deep_ep/buffers/elastic.py @dd758ca``) on the twin's
engine: one scale-up domain (at most 8 ranks, one node), the non-expanding layout.

Dispatch sends each token once to every rank holding one of its top-k experts (ranks in
order, tokens in order), with its top-k indices (made local: ``-1`` where another rank's),
top-k weights and FP8 scale factors; combine sends each received row back to its source,
which sums them in fp32 in rank order, adds the biases, and casts to BF16. The buffer size is
:func:`epbuf.backends.deepep_v2.hint.calculate_buffer_size` (``buffer.hpp:652-686``).
Refused in one line: ``do_expand``, hybrid (scale-out) domains, ``num_cpu_bytes``.
"""

from __future__ import annotations

from ..backends.deepep_v2.hint import calculate_buffer_size
from ..errors import EpbufError
from ._deep_ep_event import EventOverlap
from ._engine import Engine, UpstreamAssertion, expect
from ._engine_records import TokenRoute, pack_rows, record_layout, reduce_rows, unpack_rows

__all__ = ["ElasticBuffer", "EPHandle"]

PY = "deep_ep/buffers/elastic.py:{} @dd758ca"
_MAX_SCALEUP = 8


class EPHandle:
    """``EPHandle`` (``PY:23-98``): the fields upstream's tests read. ``recv_src_metadata`` is
    ``int32 [num_recv_tokens, 2]``: the source's global token index ``rank *
    num_max_tokens_per_rank + i`` and the row it landed in; ``dst_buffer_slot_idx`` is ``int32
    [num_tokens, num_ranks]``: the row each destination received the token in, ``-1`` if none."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)


def _hint(num_ranks, tokens, hidden, topk, fp8, hybrid, multiple):
    try:
        return calculate_buffer_size(num_ranks, num_ranks, tokens, hidden, topk, fp8, hybrid, multiple)
    except EpbufError as error:
        raise UpstreamAssertion(f"calculate_elastic_buffer_size: {error}") from None


class ElasticBuffer:
    """``deep_ep.ElasticBuffer`` on CPU (``PY:228-367``): same arguments; sizes are checked, not allocated."""

    def __init__(self, group, num_bytes=None, num_cpu_bytes: int = 0, num_max_tokens_per_rank: int = 0,
                 hidden: int = 0, num_topk: int = 0, use_fp8_dispatch: bool = False, deterministic: bool = False,
                 allow_hybrid_mode: bool = True, allow_multiple_reduction: bool = True,
                 prefer_overlap_with_compute: bool = True, sl_idx: int = 3, num_allocated_qps: int = 0,
                 num_cpu_timeout_secs: int = 300, num_gpu_timeout_secs: int = 100,
                 explicitly_destroy: bool = False) -> None:
        self.engine = Engine(group)
        self.group, self.torch = group, self.engine.torch
        self.rank_idx, self.num_ranks = self.engine.rank, self.engine.num_ranks
        self.allow_hybrid_mode, self.allow_multiple_reduction = allow_hybrid_mode, allow_multiple_reduction
        self.prefer_overlap_with_compute, self.deterministic = prefer_overlap_with_compute, deterministic
        expect(self.num_ranks <= _MAX_SCALEUP, "one scale-up domain", "epbuf.twin: hybrid (scale-out) mode is not "
               "twinned", f"{self.num_ranks} ranks > {_MAX_SCALEUP}")
        expect(not num_cpu_bytes, "num_cpu_bytes == 0", "epbuf.twin: CPU (Engram) segments are not twinned")
        if num_bytes is None:
            num_bytes = _hint(self.num_ranks, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch,
                              allow_hybrid_mode, allow_multiple_reduction)
        expect(type(num_bytes) is int and num_bytes >= 0, "num_bytes is a byte count", PY.format(228),
               repr(num_bytes))
        self.num_bytes, self.num_max_tokens_per_rank = num_bytes, num_max_tokens_per_rank
        self.num_allocated_qps = num_allocated_qps or (65 if allow_hybrid_mode else 17)
        self.explicitly_destroy, self.destroyed = explicitly_destroy, False
        self.num_scaleout_ranks, self.num_scaleup_ranks = 1, self.num_ranks
        self.scaleout_rank_idx, self.scaleup_rank_idx = 0, self.rank_idx
        self.num_rdma_ranks, self.num_nvlink_ranks = 1, self.num_ranks

    def destroy(self) -> None:
        assert self.explicitly_destroy  # PY:373
        self.destroyed = True

    @staticmethod
    def get_buffer_size_hint(group, num_max_tokens_per_rank: int, hidden: int, num_topk: int = 0,
                             use_fp8_dispatch: bool = False, allow_hybrid_mode: bool = True,
                             allow_multiple_reduction: bool = True) -> int:
        """``PY:380-406``: the group's ranks as one NVLink domain."""
        return _hint(group.size(), num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch, allow_hybrid_mode,
                     allow_multiple_reduction)

    def get_physical_domain_size(self):
        return self.num_rdma_ranks, self.num_nvlink_ranks

    def get_logical_domain_size(self):
        return self.num_scaleout_ranks, self.num_scaleup_ranks

    def barrier(self, use_comm_stream: bool = True, with_cpu_sync: bool = False, sequential: bool = True) -> None:
        self.engine.agree("ElasticBuffer.barrier", 1, lambda: ([0], None))

    def dispatch(self, x, topk_idx=None, topk_weights=None, cumulative_local_expert_recv_stats=None,
                 num_experts=None, num_max_tokens_per_rank=None, expert_alignment=None, num_sms: int = 0,
                 num_qps: int = 0, previous_event=None, previous_event_before_epilogue=None,
                 async_with_compute_stream: bool = False, allocate_on_comm_stream: bool = False, handle=None,
                 do_handle_copy: bool = True, do_cpu_sync=None, do_expand: bool = False,
                 do_zero_padding: bool = False, use_tma_aligned_col_major_sf: bool = False):
        """``ElasticBuffer.dispatch`` (``PY:855-1033``): ``(recv_x, recv_topk_idx, recv_topk_weights, handle,
        event)``."""
        torch, engine, R, me = self.torch, self.engine, self.num_ranks, self.rank_idx
        x, sf = x if isinstance(x, tuple) else (x, None)
        cached = handle is not None

        def prepare():
            nonlocal topk_idx, num_experts, num_max_tokens_per_rank, expert_alignment, do_cpu_sync
            expect(not self.destroyed, "self.runtime is not None", PY.format(378))
            expect(not do_expand, "not do_expand", "epbuf.twin: the expanding layout is not twinned")
            expect(num_qps <= self.num_allocated_qps, "assert num_qps <= self.num_allocated_qps, 'Allocated QPs are "
                   "not enough'", PY.format(930), f"{num_qps} > {self.num_allocated_qps}")
            if cached:
                expect(topk_idx is None, "assert topk_idx is None", PY.format(938))
                expect(do_cpu_sync is None or not do_cpu_sync, "assert do_cpu_sync is None or not do_cpu_sync, "
                       "'Cannot do CPU sync with cached handle'", PY.format(939))
                topk_idx = handle.topk_idx
                num_max_tokens_per_rank = handle.num_max_tokens_per_rank if num_max_tokens_per_rank is None \
                    else num_max_tokens_per_rank
                num_experts = handle.num_experts if num_experts is None else num_experts
                expert_alignment = handle.expert_alignment if expert_alignment is None else expert_alignment
                expect((num_experts, expert_alignment, num_max_tokens_per_rank) == (handle.num_experts,
                       handle.expert_alignment, handle.num_max_tokens_per_rank), "assert (num_experts, "
                       "expert_alignment, num_max_tokens_per_rank) == handle's", PY.format(947))
                do_cpu_sync = False
            num_max_tokens_per_rank = self.num_max_tokens_per_rank if num_max_tokens_per_rank is None \
                else num_max_tokens_per_rank
            expert_alignment = 1 if expert_alignment is None else expert_alignment
            do_cpu_sync = True if do_cpu_sync is None else do_cpu_sync
            expect(isinstance(x, torch.Tensor) and x.dim() == 2 and x.dtype == (torch.float8_e4m3fn if sf is not None
                   else torch.bfloat16), "x is [num_tokens, hidden] BF16, or (FP8, SF)", PY.format(905))
            expect(isinstance(topk_idx, torch.Tensor) and topk_idx.dim() == 2 and topk_idx.dtype == torch.int64
                   and topk_idx.shape[0] == x.shape[0], "topk_idx is [num_tokens, num_topk] topk_idx_t", PY.format(908))
            n, K, H = int(x.shape[0]), int(topk_idx.shape[1]), int(x.shape[1])
            expect(type(num_experts) is int and num_experts > 0 and num_experts % R == 0, "num_experts % num_ranks"
                   " == 0", "csrc/elastic/buffer.hpp dispatch", f"num_experts = {num_experts!r}, {R} ranks")
            expect(type(expert_alignment) is int and expert_alignment > 0, "expert_alignment > 0", PY.format(918),
                   repr(expert_alignment))
            expect(type(num_max_tokens_per_rank) is int and 0 < num_max_tokens_per_rank
                   and n <= num_max_tokens_per_rank,
                   "num_tokens <= num_max_tokens_per_rank", "csrc/elastic/buffer.hpp dispatch",
                   f"{n} tokens, num_max_tokens_per_rank = {num_max_tokens_per_rank!r}")
            need = _hint(R, num_max_tokens_per_rank, H, K, sf is not None, self.allow_hybrid_mode,
                         self.allow_multiple_reduction)
            expect(need <= self.num_bytes, "the buffer holds the dispatch", "csrc/elastic/buffer.hpp dispatch",
                   f"{need} B needed, buffer has {self.num_bytes} B")
            if topk_weights is not None:
                expect(isinstance(topk_weights, torch.Tensor) and topk_weights.dtype == torch.float32 and
                       tuple(topk_weights.shape) == (n, K), "topk_weights is [num_tokens, num_topk] float",
                       PY.format(912))
            if sf is not None:
                expect(isinstance(sf, torch.Tensor) and sf.dim() == 2 and sf.shape[0] == n and sf.dtype ==
                       torch.float32, "sf is [num_tokens, hidden / 128] float", PY.format(905))
            valid = (topk_idx >= -1) & (topk_idx < num_experts)
            expect(bool(valid.all()), "-1 <= topk_idx < num_experts", "unchecked upstream: out of bounds")
            rank_of = torch.where(topk_idx >= 0, topk_idx // (num_experts // R), -1)
            in_rank = torch.stack([(rank_of == q).any(1) for q in range(R)], 1) if n else torch.zeros(0, R, dtype=bool)
            route = TokenRoute(torch, in_rank)
            head = [H, K, int(sf.shape[1]) if sf is not None else -1, num_experts, num_max_tokens_per_rank,
                    int(topk_weights is not None), expert_alignment]
            return head + route.counts.tolist(), (route, in_rank, n, K, H)

        (route, in_rank, n, K, H), rows = engine.agree("ElasticBuffer.dispatch", 7 + R, prepare)
        engine.same_everywhere(rows, slice(0, 7), "ElasticBuffer.dispatch", "hidden, num_topk, SF, num_experts, "
                               "num_max_tokens_per_rank, topk_weights and expert_alignment")
        S, L = int(rows[0, 2]), num_experts // R
        fields = (("x", "uint8", 1, H * x.element_size()), ("sf", "float32", 4, max(S, 0)), ("idx", "int64", 8, K),
                  ("w", "float32", 4, K if topk_weights is not None else 0), ("src", "int32", 4, 1))
        record = record_layout("deep_ep elastic dispatch token", fields)
        src = (me * num_max_tokens_per_rank + torch.arange(n)).to(torch.int32).unsqueeze(1)
        values = {"x": x.contiguous().view(torch.uint8).view(n, -1), "idx": topk_idx, "src": src}
        if S >= 0:
            values["sf"] = sf
        if topk_weights is not None:
            values["w"] = topk_weights
        send = pack_rows(torch, record, int(route.token.shape[0]), route.token, **values)
        recv = engine.exchange(send, route.counts.tolist(), rows[:, 7 + me].tolist(), "ElasticBuffer.dispatch").wait()
        got = unpack_rows(record, recv)
        m = int(recv.shape[0])
        size = m if do_cpu_sync or cached else num_max_tokens_per_rank * R  # a cached handle knows the count

        def out(value, width, dtype):
            t = torch.zeros((size, width), dtype=dtype)
            t[:m] = value.reshape(m, width).view(dtype) if m else t[:0]
            return t

        recv_x = out(got["x"], H * x.element_size(), torch.uint8).view(x.dtype)
        gidx = got["idx"].reshape(m, K).to(torch.int64)
        local = torch.where((gidx >= me * L) & (gidx < (me + 1) * L), gidx - me * L, -1)
        recv_idx = out(local, K, torch.int64)
        recv_w = out(got["w"], K, torch.float32) if topk_weights is not None else None
        counts = torch.bincount(local[local >= 0], minlength=L)[:L]
        if cumulative_local_expert_recv_stats is not None:
            cumulative_local_expert_recv_stats += counts.to(cumulative_local_expert_recv_stats.dtype)
        aligned = (counts + expert_alignment - 1) // expert_alignment * expert_alignment
        if not cached:
            slot = torch.full((n, R), -1, dtype=torch.int32)
            begin = torch.cumsum(rows[:, 7:], 0) - rows[:, 7:]  # [source, dest]: first row of source's tokens
            first = torch.cumsum(route.counts, 0) - route.counts  # my first row for each destination
            position = begin[me][route.rank] + torch.arange(int(route.token.shape[0])) - first[route.rank]
            slot[route.token, route.rank] = position.to(torch.int32)
            handle = EPHandle(do_expand=False, num_experts=num_experts, expert_alignment=expert_alignment,
                              num_max_tokens_per_rank=num_max_tokens_per_rank, num_sms=num_sms,
                              topk_idx=topk_idx.clone() if do_handle_copy else topk_idx, num_recv_tokens=m,
                              num_expanded_tokens=0, num_recv_tokens_per_expert_list=aligned.tolist(),
                              psum_num_recv_tokens_per_scaleup_rank=torch.cumsum(rows[:, 7 + me], 0).to(torch.int32),
                              psum_num_recv_tokens_per_expert=torch.cumsum(aligned, 0).to(torch.int32),
                              num_unaligned_recv_tokens_per_expert=None,
                              recv_src_metadata=torch.stack([got["src"].reshape(m).to(torch.int32),
                                                             torch.arange(m, dtype=torch.int32)], 1),
                              dst_buffer_slot_idx=slot, token_metadata_at_forward=None, channel_linked_list=None)
        recv = (recv_x, out(got["sf"], S, torch.float32)) if S >= 0 else recv_x
        return recv, recv_idx, recv_w, handle, EventOverlap()

    def combine(self, x, handle, topk_weights=None, bias=None, num_sms: int = 0, num_qps: int = 0,
                previous_event=None, previous_event_before_epilogue=None, async_with_compute_stream: bool = False,
                allocate_on_comm_stream: bool = False):
        """``ElasticBuffer.combine`` (``PY:1046-1107``): ``(combined_x, combined_topk_weights, event)``."""
        torch, engine, R, me = self.torch, self.engine, self.num_ranks, self.rank_idx

        def prepare():
            expect(not self.destroyed, "self.runtime is not None", PY.format(378))
            expect(isinstance(handle, EPHandle), "handle is an EPHandle from dispatch", PY.format(1049))
            expect(num_qps <= self.num_allocated_qps, "assert num_qps <= self.num_allocated_qps, 'Allocated QPs are "
                   "not enough'", PY.format(1088), f"{num_qps} > {self.num_allocated_qps}")
            biases = (bias,) if isinstance(bias, torch.Tensor) else (bias if isinstance(bias, tuple) else ())
            expect(bias is None or len(biases) in (1, 2), "assert len(bias) == 2", PY.format(1042))
            m, n, K = handle.num_recv_tokens, int(handle.topk_idx.shape[0]), int(handle.topk_idx.shape[1])
            expect(isinstance(x, torch.Tensor) and x.dim() == 2 and x.dtype == torch.bfloat16 and x.shape[0] >= m,
                   "x is [num_recv_tokens, hidden] BF16", PY.format(1062), f"{m} rows received")
            for b in biases:
                expect(isinstance(b, torch.Tensor) and tuple(b.shape) == (n, int(x.shape[1])) and b.dtype ==
                       torch.bfloat16, "bias is [num_combined_tokens, hidden] BF16", PY.format(1066))
            if topk_weights is not None:
                expect(isinstance(topk_weights, torch.Tensor) and topk_weights.dtype == torch.float32 and
                       topk_weights.dim() == 2 and topk_weights.shape[0] >= m and topk_weights.shape[1] == K,
                       "topk_weights is [num_tokens, num_topk] float", PY.format(1063))
            back = torch.diff(handle.psum_num_recv_tokens_per_scaleup_rank.to(torch.int64), prepend=torch.zeros(1,
                              dtype=torch.int64))
            L = handle.num_experts // R
            rank_of = torch.where(handle.topk_idx >= 0, handle.topk_idx // L, -1)
            in_rank = torch.stack([(rank_of == q).any(1) for q in range(R)], 1) if n else torch.zeros(0, R, dtype=bool)
            route = TokenRoute(torch, in_rank)
            row = [int(x.shape[1]), int(topk_weights is not None)] + back.tolist() + route.counts.tolist()
            return row, (route, rank_of, biases, m, n, K)

        (route, rank_of, biases, m, n, K), rows = engine.agree("ElasticBuffer.combine", 2 + 2 * R, prepare)
        engine.same_everywhere(rows, slice(0, 2), "ElasticBuffer.combine", "hidden and topk_weights")
        if not torch.equal(rows[:, 2:2 + R], rows[:, 2 + R:].t()):
            raise UpstreamAssertion("ElasticBuffer.combine: a handle that is not this dispatch's on some rank")
        H = int(rows[0, 0])
        record = record_layout("deep_ep elastic combine token", (("x", "uint8", 1, 2 * H),
                               ("w", "float32", 4, K if topk_weights is not None else 0)))
        values = {"x": x[:m].contiguous().view(torch.uint8)}
        if topk_weights is not None:
            values["w"] = topk_weights[:m]
        send = pack_rows(torch, record, m, torch.arange(m), **values)
        recv = engine.exchange(send, rows[me, 2:2 + R].tolist(), route.counts.tolist(), "ElasticBuffer.combine").wait()
        got = unpack_rows(record, recv)
        rows_x = got["x"].reshape(-1, 2 * H).view(torch.bfloat16)
        combined = reduce_rows(engine, rows_x, route.token, n, out_dtype=torch.bfloat16, bias=biases)
        weights = None
        if topk_weights is not None:
            w = got["w"].reshape(-1, K)
            weights = torch.zeros(n, K, dtype=torch.float32)
            own = rank_of[route.token] == route.rank.unsqueeze(1)  # [row, k]: the row's rank owns expert k
            weights[route.token.unsqueeze(1).expand(-1, K)[own], torch.arange(K).expand(len(own), K)[own]] = w[own]
        return combined, weights, EventOverlap()
