"""How full each reserved region gets under a routing, per backend.

Reservations come from the backend's report only (``Report.buffers[].regions[]``: bytes,
``shape`` = ``(rows, slots)`` for arrays of records, the slot ``record``; ``records``,
``quantities`` and ``inputs``), and for DeepEP V2's composite regions from the backend's
public layout functions (``dispatch_buffer_layouts`` / ``combine_buffer_layouts``, checked
against the report's byte counts). Nothing here recomputes a size formula.

What lands where is the kernels' business; each function below cites the lines:

* DeepEP-Ascend (``impls/ep/dispatch.hpp`` ``simt_persistent_worker``, ``impls/ep/
  combine.hpp`` ``load_meta_issue_wqe``; public text read 2026-11-30): a token goes to each
  destination rank once, into the row of its source rank at a compacted slot
  (``dst_slot_idx = rank_histogram[dst_rank_idx] + sgep_idx``); a combine result goes to row
  ``slot_group_idx = kNumRanks < kNumTopk ? rank_idx : master_topk_idx`` at slot
  ``src_token_idx``.
* DeepEP V2 (``deep_ep/include/deep_ep/impls/*.cuh @dd758ca``; the refactored ``EPBuffer``
  kernels are assumed to place tokens alike).
* DeepEP V1 normal (``csrc/kernels/legacy/intranode.cu``, ``internode.cu @dd758ca``):
  per-channel ring buffers with flow control, so a ring never holds more than its slots;
  what matters is how many tokens stream through each ring.
* DeepEP V1 low-latency (``csrc/kernels/legacy/internode_ll.cu @dd758ca``): one slot per
  (local expert, source rank, compacted token).
"""

from __future__ import annotations

from ..report import Report
from ..routing import numpy
from .records import ExpertUse, RegionUse

__all__ = ["SIMULATED_BACKENDS", "ranks_per_node", "region_uses", "expert_use"]

_V2 = "deep_ep/include/deep_ep/impls"
_V2C = "@dd758ca"
_ASC_D = "DeepEP-Ascend deep_ep/include/deep_ep/impls/ep/dispatch.hpp simt_persistent_worker"
_ASC_C = "DeepEP-Ascend deep_ep/include/deep_ep/impls/ep/combine.hpp load_meta_issue_wqe"
_LL = "csrc/kernels/legacy/internode_ll.cu"


def ranks_per_node(report: Report, plan) -> int:
    """The node (scale-up domain) the backend's kernels see: DeepEP V2's scale-up ranks in
    hybrid mode, DeepEP V1's NVL ranks, else the plan's ``ranks_per_node``."""
    if report.backend == "deepep-v2" and report.inputs.get("mode") == "hybrid":
        return int(report.inputs["num_scaleup_ranks"])
    if report.backend == "deepep-v1":
        return int(report.quantity("num_nvl_ranks"))
    return plan.ranks_per_node


def _use(phase: str, buffer: str, region: str, used, slots: int, *, row: str, record: str, slot_bytes: int,
         used_slot_bytes: int, num_bytes: int, semantics: str, source: str, streamed=None,
         chunk_slots: int = 0) -> RegionUse:
    """A :class:`RegionUse` from ``used[rank, row]`` (numpy, slots per row)."""
    np = numpy()
    used = np.asarray(used, dtype=np.int64)
    rows = used.shape[1]
    if streamed is not None:
        streamed = np.asarray(streamed, dtype=np.int64)
        held = np.minimum(streamed, slots)
    else:
        held = used
    flat = int(np.argmax(held)) if held.size else 0
    rank, row_idx = divmod(flat, rows) if rows else (0, 0)
    return RegionUse(
        phase=phase, buffer=buffer, region=region, rows=rows, row=row, slots=slots, record=record,
        slot_bytes=slot_bytes, used_slot_bytes=used_slot_bytes, num_bytes=num_bytes,
        used_slots=tuple(held.sum(axis=1).tolist()),
        peak_row_slots=int(held.max()) if held.size else 0, peak_row=(rank, row_idx),
        semantics=semantics, source=source,
        streamed_slots=tuple(streamed.sum(axis=1).tolist()) if streamed is not None else (),
        peak_streamed_row=int(streamed.max()) if streamed is not None and streamed.size else 0,
        chunk_slots=chunk_slots,
    )


def _region(report: Report, name: str):
    for buffer in report.buffers:
        for region in buffer.regions:
            if region.name == name:
                return buffer, region
    raise KeyError(name)


def _real_record(report: Report, record: str):
    """The record a real run writes for a slot sized by ``record`` (``"dispatch (hint)"`` ->
    ``"dispatch"``)."""
    name = record.removesuffix(" (hint)")
    try:
        return report.record(name)
    except KeyError:
        return report.record(record)


# ------------------------------------------------------------------ DeepEP-Ascend
def _ascend(report: Report, plan, stats) -> list[RegionUse]:
    n, k = stats.num_ranks, stats.num_topk
    out = []
    buffer, region = _region(report, "dispatch receive buffer")
    rows, slots = region.shape
    assert rows == n, (rows, n)
    out.append(_use(
        "dispatch", buffer.name, region.name, stats.rank_tokens.T, slots, row="source rank",
        record=region.record, slot_bytes=report.record(region.record).num_bytes,
        used_slot_bytes=_real_record(report, region.record).num_bytes, num_bytes=region.num_bytes,
        semantics="each token once per destination rank, in the row of its source rank, at a compacted slot",
        source=_ASC_D + ": dst_slot_idx = rank_histogram[dst_rank_idx] + sgep_idx; remote_addr = "
               "recv_buffer_offset + dst_slot_idx * num_token_bytes"))
    buffer, region = _region(report, "combine reduce buffer")
    rows, slots = region.shape
    rank_layout = n < k  # slot_group_idx = kNumRanks < kNumTopk ? rank_idx : master_topk_idx
    used = stats.rank_tokens if rank_layout else stats.rank_master_lanes
    assert rows == used.shape[1], (rows, used.shape)
    out.append(_use(
        "combine", buffer.name, region.name, used, slots,
        row="expert rank" if rank_layout else "top-k lane (the rank's master lane)", record=region.record,
        slot_bytes=report.record(region.record).num_bytes, used_slot_bytes=report.record(region.record).num_bytes,
        num_bytes=region.num_bytes,
        semantics="each token's partial result per expert rank, at slot = the token's index, in the row of "
                  + ("the expert rank" if rank_layout else "the highest top-k lane naming that rank"),
        source=_ASC_C + ": slot_group_idx = kNumRanks < kNumTopk ? rank_idx : master_topk_idx; "
               "remote_offset = (slot_group_idx * kNumMaxTokensPerRank + src_token_idx) * kNumTokenBytes"))
    return out


# ---------------------------------------------------------------------- DeepEP V2
def _v2_layouts(report: Report):
    """The backend's own ``BufferLayout`` of every sub-buffer (hint records), checked
    against the report's totals."""
    from ..backends import deepep_v2

    i, q = report.inputs, {x.name: x.value for x in report.quantities}
    so, su = int(i["num_scaleout_ranks"]), int(i["num_scaleup_ranks"])
    common = dict(version=i.get("version"))
    dispatch = deepep_v2.dispatch_buffer_layouts(
        i["num_max_tokens_per_rank"], i["hidden"], q["hint_num_sf_packs"], q["num_topk"], q["element_size"], so, su,
        i["is_scaleup_nvlink"], **common)
    combine = deepep_v2.combine_buffer_layouts(
        i["num_max_tokens_per_rank"], i["hidden"], q["num_topk"], so, su, i["is_scaleup_nvlink"],
        i["allow_multiple_reduction"], **common)
    if sum(b.num_bytes for b in dispatch.values()) != q["hint_dispatch_num_bytes"] or \
            sum(b.num_bytes for b in combine.values()) != q["combine_num_bytes"]:
        raise AssertionError("deepep-v2 layouts disagree with the report's dispatch/combine bytes")
    return dispatch, combine


def _v2(report: Report, plan, stats) -> list[RegionUse]:
    np = numpy()
    i = report.inputs
    so, su = int(i["num_scaleout_ranks"]), int(i["num_scaleup_ranks"])
    amr = bool(i["allow_multiple_reduction"])
    n, k = stats.num_ranks, stats.num_topk
    dispatch, combine = _v2_layouts(report)
    buffer = report.buffers[0].name
    d_rec, c_rec = report.record("dispatch (hint)"), report.record("combine")
    d_real = report.record("dispatch")
    out = []

    def add(phase, name, layout, used, *, row, semantics, source):
        if layout.num_ranks == 0:
            return  # NVLink scale-up: upstream reserves no send buffer and the kernel never touches it
        rec = d_rec if phase == "dispatch" else c_rec
        out.append(_use(phase, buffer, name, used, layout.num_max_tokens_per_rank, row=row, record=rec.name,
                        slot_bytes=rec.num_bytes, used_slot_bytes=(d_real if phase == "dispatch" else c_rec).num_bytes,
                        num_bytes=layout.num_bytes, semantics=semantics, source=source))

    R = stats.rank_tokens
    if so == 1:
        add("dispatch", "recv_buffer", dispatch["recv_buffer"], R.T, row="source rank",
            semantics="each token once per destination rank, row of the source rank, compacted slot",
            source=f"{_V2}/dispatch.cuh:266-268, 336-349, 373-374 {_V2C}")
        add("dispatch", "send_buffer", dispatch["send_buffer"], stats.num_tokens[:, None], row="-",
            semantics="every token staged at slot = its index (scale-up without NVLink)",
            source=f"{_V2}/dispatch.cuh:362-368 {_V2C}")
        rank_layout = amr and n <= k
        if rank_layout:
            used, row = R, "expert rank"
        elif amr:
            used, row = stats.rank_master_lanes, "top-k lane (the rank's master lane)"
        else:
            used, row = stats.lane_selections, "top-k lane (every selection)"
        add("combine", "recv_buffer", combine["recv_buffer"], used, row=row,
            semantics="partial results at slot = the source token's index; rank layout when multiple "
                      "reduction is allowed and ranks <= top-k, else top-k layout",
            source=f"{_V2}/combine.cuh:53-57, 97-101 and combine_utils.cuh:8-18 {_V2C}")
        add("combine", "send_buffer", combine["send_buffer"], (R if amr else stats.rank_selections).T,
            row="source rank", semantics="results staged for RDMA per source rank at slot = token index",
            source=f"{_V2}/combine.cuh:54-57, 103-105 {_V2C}")
        return out

    # hybrid: R4[a, i, b, l] = tokens of rank (a, i) reaching rank (b, l); N4[a, i, b] per node b
    R4 = R.reshape(so, su, so, su)
    N3 = stats.node_tokens.reshape(so, su, so)
    via_forwarder = R4.sum(axis=0)  # [i, b, l]: tokens forwarded by (b, i) to (b, l)
    add("dispatch", "scaleup_recv_buffer", dispatch["scaleup_recv_buffer"],
        via_forwarder.transpose(1, 2, 0).reshape(n, su), row="scale-up peer (forwarder)",
        semantics="tokens from every node forwarded by scale-up peer i, compacted per destination",
        source=f"{_V2}/hybrid_dispatch.cuh:92-93, 468, 576-595 {_V2C}")
    add("dispatch", "scaleout_send_buffer", dispatch["scaleout_send_buffer"],
        (stats.num_tokens - stats.local_only_tokens)[:, None], row="-",
        semantics="every token whose nodes are not exactly its own, at slot = its index (a token "
                  "with no expert is stored too: scaleout_rank_mask ^ (1 << own) != 0)",
        source=f"{_V2}/hybrid_dispatch.cuh:424-431 {_V2C}")
    add("dispatch", "scaleout_recv_buffer", dispatch["scaleout_recv_buffer"],
        N3.transpose(2, 1, 0).reshape(n, so), row="source node",
        semantics="tokens of rank (a, i) for node b at forwarder (b, i), row a (own node by local bypass)",
        source=f"{_V2}/hybrid_dispatch.cuh:96-97, 332-333, 405-440 {_V2C}")
    if amr and su <= k:
        used, row = via_forwarder.transpose(1, 0, 2).reshape(n, su), "expert's scale-up rank"
    elif amr:
        used = stats.rank_master_lanes_by_node.reshape(so, su, so, k).sum(axis=0).transpose(1, 0, 2).reshape(n, k)
        row = "top-k lane (the rank's master lane)"
    else:
        used = stats.lane_selections_by_node.reshape(so, su, so, k).sum(axis=0).transpose(1, 0, 2).reshape(n, k)
        row = "top-k lane (every selection)"
    add("combine", "scaleup_recv_buffer", combine["scaleup_recv_buffer"], used, row=row,
        semantics="at forwarder (b, i): each expert rank's result for tokens of every node's rank i",
        source=f"{_V2}/hybrid_combine.cuh:70-72, 115, 203-214 {_V2C}")
    if amr and so <= k:
        used, row = stats.node_tokens, "expert node"
    elif amr:
        used, row = stats.node_master_lanes, "top-k lane (the node's master lane)"
    else:
        used, row = stats.lane_selections, "top-k lane (every selection)"
    add("combine", "scaleout_recv_buffer", combine["scaleout_recv_buffer"], used, row=row,
        semantics="at the source rank: one reduced result per node, slot = the token's index",
        source=f"{_V2}/hybrid_combine.cuh:73-75, 545-553 {_V2C}")
    remote = ~np.eye(so, dtype=bool)  # [a, b]: a != b
    if amr:
        used = (N3 * remote[:, None, :]).sum(axis=0).T.reshape(n, 1)  # [i, b] -> [b, i]
    else:
        sel = stats.lane_selections_by_node.reshape(so, su, so, k) * remote[:, None, :, None]
        used = sel.sum(axis=0).transpose(1, 0, 2).reshape(n, k)
    add("combine", "scaleout_send_buffer", combine["scaleout_send_buffer"], used,
        row="-" if amr else "top-k lane",
        semantics="at forwarder (b, i): node-reduced results for the other nodes' rank i",
        source=f"{_V2}/hybrid_combine.cuh:76-77, 360, 545-556 {_V2C}")
    return out


# ------------------------------------------------------------ DeepEP V1 normal mode
def _v1(report: Report, plan, stats) -> list[RegionUse]:
    q = {x.name: x.value for x in report.quantities}
    channels, nvl, rdma = q["num_channels"], q["num_nvl_ranks"], q["num_rdma_ranks"]
    n = stats.num_ranks
    configs = {"dispatch": report.inputs["dispatch_config"], "combine": report.inputs["combine_config"]}
    nvl_buffer, rdma_buffer = report.buffer("NVL buffer"), report.buffer("RDMA buffer")
    crt = stats.channel_rank_tokens(channels)  # [s, d, c]
    out = []
    # Config(num_sms, nvl_chunked_send, nvl_chunked_recv, rdma_chunked_send, rdma_chunked_recv)
    for phase, (_, nvl_chunk, nvl_slots, rdma_chunk, rdma_slots) in configs.items():
        if rdma == 1:
            # intranode: ring (channel c, source rank s) at the destination d
            streamed = crt.transpose(1, 2, 0).reshape(n, channels * n)  # [d, (c, s)]
            if phase == "combine":
                streamed = crt.transpose(0, 2, 1).reshape(n, channels * n)  # results flow back to s
            src = ("csrc/kernels/legacy/intranode.cu:262-291 (rings per channel and source rank at the receiver), "
                   "utils.cuh:444-448 (channel = token range) @dd758ca")
        else:
            # internode: NVL ring (channel c, scale-up peer i) at (b, l) carries tokens of every (a, i)
            F = crt.reshape(rdma, nvl, rdma, nvl, channels).sum(axis=0)  # [i, b, l, c]
            if phase == "dispatch":
                streamed = F.transpose(1, 2, 3, 0).reshape(n, channels * nvl)
            else:
                streamed = F.transpose(1, 0, 3, 2).reshape(n, channels * nvl)
            src = ("csrc/kernels/legacy/internode.cu:545-560, 968-983 (NVL rings per channel and forwarding peer) "
                   "@dd758ca")
        out.append(_use(phase, nvl_buffer.name, "NVL channel rings", streamed, nvl_slots,
                        row="ring (channel x NVL peer)", record="NVL hint slot",
                        slot_bytes=q["NVL_hint_slot_num_bytes"], used_slot_bytes=q["NVL_hint_slot_num_bytes"],
                        num_bytes=nvl_buffer.num_bytes, streamed=streamed, chunk_slots=nvl_chunk,
                        semantics=f"tokens stream through {channels} channels x {nvl} peers, "
                                  f"{nvl_slots}-slot rings with flow control", source=src))
        if rdma > 1:
            cnt = stats.channel_node_tokens(channels).reshape(rdma, nvl, rdma, channels)  # [a, i, b, c]
            if phase == "dispatch":
                streamed = cnt.transpose(2, 1, 3, 0).reshape(n, channels * rdma)  # at (b, i): ring (c, a)
            else:
                streamed = cnt.transpose(0, 1, 3, 2).reshape(n, channels * rdma)  # back at (a, i): ring (c, b)
            out.append(_use(phase, rdma_buffer.name, "RDMA channel rings", streamed, rdma_slots,
                            row="ring (channel x RDMA rank)", record="RDMA hint slot",
                            slot_bytes=q["RDMA_hint_slot_num_bytes"], used_slot_bytes=q["RDMA_hint_slot_num_bytes"],
                            num_bytes=rdma_buffer.num_bytes, streamed=streamed, chunk_slots=rdma_chunk,
                            semantics=f"tokens of rank (a, i) for node b stream through {channels} channels' "
                                      f"{rdma_slots}-slot RDMA rings at (b, i)",
                            source="csrc/kernels/legacy/internode.cu:526-530, 590, 631, 818-822 (RDMA rings per "
                                   "channel and RDMA rank; own node into the recv side) @dd758ca"))
    return out


# ------------------------------------------------------------ DeepEP V1 low latency
def _ll(report: Report, plan, stats) -> list[RegionUse]:
    q = {x.name: x.value for x in report.quantities}
    i = report.inputs
    n, t, e = stats.num_ranks, int(i["num_max_dispatch_tokens_per_rank"]), int(i["num_experts"])
    per_rank = e // n
    buffer = report.buffers[0]
    send = next(r for r in buffer.regions if r.name.startswith("send buffer"))
    recv = next(r for r in buffer.regions if r.name.startswith("recv buffer"))
    recv_slot = recv.num_bytes // (e * t)
    if recv_slot * e * t != recv.num_bytes or recv_slot != max(q["num_bytes_per_dispatch_msg"],
                                                               q["num_bytes_per_combine_msg"]):
        raise AssertionError("deepep-ll recv buffer is not experts x tokens x max(message)")
    dispatch_msg = next(r for r in report.records if r.name.startswith("low-latency dispatch message"))
    combine_msg = next(r for r in report.records if r.name.startswith("low-latency combine message"))
    per_expert = stats.expert_tokens.reshape(n, n, per_rank)  # [s, d, e_local]
    at_expert_rank = per_expert.transpose(1, 2, 0).reshape(n, per_rank * n)  # [d, (e_local, s)]
    note = " (buffer set 0; odd and even calls alternate between sets 0 and 1)"
    return [
        _use("dispatch", buffer.name, send.name, stats.num_tokens[:, None], t, row="-",
             record=dispatch_msg.name, slot_bytes=q["num_bytes_per_dispatch_msg"],
             used_slot_bytes=dispatch_msg.num_bytes, num_bytes=send.num_bytes,
             semantics="every token FP8-cast into slot = its index" + note, source=f"{_LL}:202-205 @dd758ca"),
        _use("dispatch", buffer.name, recv.name, at_expert_rank, t, row="(local expert, source rank)",
             record=dispatch_msg.name, slot_bytes=recv_slot, used_slot_bytes=dispatch_msg.num_bytes,
             num_bytes=recv.num_bytes,
             semantics="one message per selection, compacted per (destination expert, source rank)" + note,
             source=f"{_LL}:253-262 @dd758ca"),
        _use("combine", buffer.name, send.name, at_expert_rank, t, row="(local expert, source rank)",
             record=combine_msg.name, slot_bytes=q["num_bytes_per_combine_msg"],
             used_slot_bytes=combine_msg.field("hidden").num_bytes, num_bytes=send.num_bytes,
             semantics="expert outputs staged per (local expert, source rank) before the RDMA write" + note,
             source=f"{_LL}:795-798 @dd758ca"),
        _use("combine", buffer.name, recv.name, stats.expert_tokens, t, row="global expert",
             record=combine_msg.name, slot_bytes=recv_slot, used_slot_bytes=combine_msg.field("hidden").num_bytes,
             num_bytes=recv.num_bytes,
             semantics="each selection's result at (global expert, slot = the source token's index)" + note,
             source=f"{_LL}:844-846 @dd758ca"),
    ]


_BACKENDS = {"ascend": _ascend, "deepep-v2": _v2, "deepep-v1": _v1, "deepep-ll": _ll}
#: The backends simulate models (``epbuf simulate --backend`` offers these).
SIMULATED_BACKENDS = tuple(_BACKENDS)


def region_uses(report: Report, plan, stats) -> tuple[RegionUse, ...]:
    """Every region's use under the routing behind ``stats``."""
    return tuple(_BACKENDS[report.backend](report, plan, stats))


def expert_use(report: Report, stats, expert_alignment: int = 1) -> ExpertUse:
    """Selections per local expert, aligned to ``expert_alignment``."""
    np = numpy()
    n, per_rank = stats.num_ranks, stats.experts_per_rank
    per_expert = stats.expert_tokens.sum(axis=0).reshape(n, per_rank)  # [d, e_local]
    aligned = -(-per_expert // expert_alignment) * expert_alignment
    flat = int(np.argmax(per_expert))
    bound, bound_source = 0, ""
    for limit in report.limits:  # DeepEP-Ascend asserts the worst-case expanded count fits an int
        if limit.name.startswith("expanded tokens"):
            # with expert_alignment each local expert may add (alignment - 1) rows, then the whole is
            # aligned (DeepEP's worst case, csrc/elastic/buffer.hpp:1067-1070 @dd758ca)
            a = expert_alignment
            bound = -(-(limit.value + (a - 1) * per_rank) // a) * a
            bound_source = (f"{limit.name}: {limit.source}" + (
                f"; + (expert_alignment {a} - 1) x {per_rank} local experts, aligned to {a} "
                "(csrc/elastic/buffer.hpp:1067-1070 @dd758ca)" if a > 1 else ""))
    return ExpertUse(
        expert_alignment=expert_alignment, experts_per_rank=per_rank,
        recv_tokens=tuple(stats.recv_tokens.tolist()), recv_selections=tuple(per_expert.sum(axis=1).tolist()),
        expanded_tokens=tuple(aligned.sum(axis=1).tolist()),
        peak_expert=(flat // per_rank, flat % per_rank, int(per_expert.max())),
        mean_expert=float(per_expert.mean()), idle_experts=int((per_expert == 0).sum()),
        bound=bound, bound_source=bound_source)
