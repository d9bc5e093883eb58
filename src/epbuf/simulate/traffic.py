"""Bytes between every pair of ranks for dispatch and combine, and the byte accounting of
the upstream benchmark scripts.

A message is one token record as the kernel sends it (the backend report's record where
it has one); the paths follow the kernels:

* direct (DeepEP-Ascend, DeepEP V2 with one scale-out rank, DeepEP V1 intranode): rank
  ``s`` sends each token once to every rank ``d`` that holds one of its experts
  (``rank_tokens[s, d]`` messages); combine sends one reduced result back per (token,
  rank) when multiple reduction is allowed (DeepEP V2 ``allow_multiple_reduction``), else
  one per selection.
* forwarding (DeepEP V2 hybrid, DeepEP V1 internode): rank ``(a, i)`` sends a token once
  per remote node ``b`` to its rail peer ``(b, i)`` over RDMA (``node_tokens``), which
  forwards it over NVLink to each rank ``(b, l)`` holding one of its experts; combine
  mirrors it (``hybrid_dispatch.cuh:405-450``, ``hybrid_combine.cuh @dd758ca``;
  ``internode.cu:590-830 @dd758ca``).
* low latency (DeepEP V1 LL): one message per selection, straight to the expert's rank
  (``internode_ll.cu:253-266 @dd758ca``), over NVLink inside a node (``nvshmemi_get_p2p_ptr``).

Copies to the rank itself (and local bypasses) cross no link and are counted apart.
"""

from __future__ import annotations

from ..report import Report
from ..routing import numpy
from .records import BenchmarkBytes, PhaseTraffic

__all__ = ["phase_traffic", "benchmark_bytes", "deepep_v1_intranode_message", "FP8_FACTOR",
           "sgl_kernel_npu_normal_bytes", "sgl_kernel_npu_low_latency_bytes"]

#: ``fp8_factor = (1 + 4 / 128) / 2`` of DeepEP's normal-mode tests: FP8 bytes (one byte
#: per element plus a 4-byte scale per 128) relative to BF16 (``tests/legacy/
#: test_intranode.py:198``, ``test_internode.py:239 @dd758ca``).
FP8_FACTOR = (1 + 4 / 128) / 2

_DEEPEP = "deepseek-ai/DeepEP"
_SGL = "sgl-project/sgl-kernel-npu"


def deepep_v1_intranode_message(hidden: int, num_topk: int, use_fp8: bool, topk_idx_bits: int | None,
                                phase: str) -> tuple[str, int]:
    """``(description, bytes)`` of one DeepEP V1 intranode channel message: the report has
    no record for it (the NVL ring is a set of per-field arrays), so the fields the kernel
    copies per token are added from the backend's public sizes (``csrc/kernels/legacy/
    intranode.cu:282-291`` dispatch, ``:771-776`` combine ``@dd758ca``)."""
    from ..backends import deepep_v1 as v1

    if phase == "dispatch":
        elem = 1 if use_fp8 else 2
        idx_bytes = (topk_idx_bits or v1.DEFAULT_TOPK_IDX_BITS) // 8
        scales = -(-hidden // 128) if use_fp8 else 0
        size = hidden * elem + v1.INT_BYTES + num_topk * (idx_bytes + v1.FLOAT_BYTES) + scales * v1.FLOAT_BYTES
        text = (f"intranode dispatch message: x {hidden * elem} + src_idx {v1.INT_BYTES} + topk_idx "
                f"{num_topk * idx_bytes} + topk_weights {num_topk * v1.FLOAT_BYTES} + x_scales {scales * v1.FLOAT_BYTES}")
    else:
        size = hidden * 2 + v1.INT_BYTES + num_topk * v1.FLOAT_BYTES
        text = (f"intranode combine message: x {hidden * 2} + src_idx {v1.INT_BYTES} + topk_weights "
                f"{num_topk * v1.FLOAT_BYTES}")
    return text, size


def _link_sums(pairs, per_node: int, message_bytes: int):
    np = numpy()
    n = pairs.shape[0]
    node = np.arange(n) // per_node
    same = node[:, None] == node[None, :]
    up, out = pairs * same, pairs * ~same
    return tuple(tuple((a * message_bytes).tolist()) for a in (up.sum(1), up.sum(0), out.sum(1), out.sum(0)))


def _phase(phase: str, record: str, message_bytes: int, per: str, path: str, pairs, local, per_node: int,
           source: str) -> PhaseTraffic:
    np = numpy()
    pairs = np.array(pairs, dtype=np.int64)
    local = np.asarray(local, dtype=np.int64) + np.diagonal(pairs)
    np.fill_diagonal(pairs, 0)
    su_send, su_recv, so_send, so_recv = _link_sums(pairs, per_node, message_bytes)
    return PhaseTraffic(phase=phase, record=record, message_bytes=message_bytes, per=per, path=path,
                        pair_messages=tuple(map(tuple, pairs.tolist())), local_messages=tuple(local.tolist()),
                        num_ranks_per_node=per_node, scaleup_send=su_send, scaleup_recv=su_recv,
                        scaleout_send=so_send, scaleout_recv=so_recv, source=source)


def _forwarded(stats, per_node: int, mirrored: bool, scaleup_counts=None, scaleout_counts=None):
    """``(pairs, local)`` of a two-hop path: scale-out ``(a, i) -> (b, i)`` carrying
    ``node_tokens[(a, i), b]`` (or ``scaleout_counts``), then scale-up ``(b, i) -> (b, l)``
    carrying ``sum_a rank_tokens[(a, i), (b, l)]`` (or ``scaleup_counts``). ``mirrored``
    reverses both hops (combine)."""
    np = numpy()
    n = stats.num_ranks
    so, su = n // per_node, per_node
    rank_counts = stats.rank_tokens if scaleup_counts is None else scaleup_counts
    node_counts = stats.node_tokens if scaleout_counts is None else scaleout_counts
    pairs = np.zeros((so, su, so, su), dtype=np.int64)
    n3 = node_counts.reshape(so, su, so)  # [a, i, b]
    for i in range(su):
        pairs[:, i, :, i] += n3[:, i, :]  # rail hop (a, i) -> (b, i); a == b is the local bypass
    forward = rank_counts.reshape(so, su, so, su).sum(axis=0)  # [i, b, l]
    for b in range(so):
        pairs[b, :, b, :] += forward[:, b, :]  # (b, i) -> (b, l); i == l stays on the forwarder
    pairs = pairs.reshape(n, n)
    if mirrored:
        pairs = pairs.T
    return pairs, np.zeros(n, dtype=np.int64)


def phase_traffic(report: Report, plan, stats, per_node: int) -> tuple[PhaseTraffic, PhaseTraffic]:
    """Dispatch and combine traffic of the routing behind ``stats``."""
    np = numpy()
    backend, n = report.backend, stats.num_ranks
    zero = np.zeros(n, dtype=np.int64)
    R = stats.rank_tokens
    if backend == "deepep-ll":
        send = next(r for r in report.records if r.name.startswith("low-latency dispatch message"))
        back = next(r for r in report.records if r.name.startswith("low-latency combine message"))
        S = stats.rank_selections
        src = f"{_DEEPEP} csrc/kernels/legacy/internode_ll.cu:253-266 (dispatch), 844-860 (combine) @dd758ca"
        return (_phase("dispatch", send.name, send.num_bytes, "selection (token, expert)", "direct", S, zero,
                       per_node, src),
                _phase("combine", f"{back.name}: hidden field", back.field("hidden").num_bytes,
                       "selection (token, expert)", "direct", S.T, zero, per_node, src))
    if backend == "deepep-v1":
        q = {x.name: x.value for x in report.quantities}
        if q["num_rdma_ranks"] > 1:
            d_rec, c_rec = report.record("internode dispatch token"), report.record("internode combine token")
            src = f"{_DEEPEP} csrc/kernels/legacy/internode.cu:590-830 (dispatch), 1380-2130 (combine) @dd758ca"
            path = "RDMA to the rail peer, then NVLink forwarding"
            d_pairs, d_local = _forwarded(stats, per_node, False)
            c_pairs, c_local = _forwarded(stats, per_node, True)
            return (_phase("dispatch", d_rec.name, d_rec.num_bytes, "token and destination node / rank", path,
                           d_pairs, d_local, per_node, src),
                    _phase("combine", c_rec.name, c_rec.num_bytes, "token and source node / rank", path,
                           c_pairs, c_local, per_node, src))
        hidden, k = report.inputs["hidden"], stats.num_topk
        d_text, d_size = deepep_v1_intranode_message(hidden, k, plan.use_fp8_dispatch, plan.num_topk_idx_bits,
                                                     "dispatch")
        c_text, c_size = deepep_v1_intranode_message(hidden, k, plan.use_fp8_dispatch, plan.num_topk_idx_bits,
                                                     "combine")
        src = f"{_DEEPEP} csrc/kernels/legacy/intranode.cu:282-291, 771-776 @dd758ca"
        return (_phase("dispatch", d_text, d_size, "token and destination rank", "direct", R, zero, per_node, src),
                _phase("combine", c_text, c_size, "token and destination rank", "direct", R.T, zero, per_node, src))
    d_rec, c_rec = report.record("dispatch"), report.record("combine")
    if backend == "deepep-v2" and report.inputs.get("mode") == "hybrid":
        amr = bool(report.inputs["allow_multiple_reduction"])
        src = f"{_DEEPEP} deep_ep/include/deep_ep/impls/hybrid_dispatch.cuh:405-450, 576-600; hybrid_combine.cuh @dd758ca"
        path = "RDMA to the rail peer (scale-out), then scale-up forwarding"
        d_pairs, d_local = _forwarded(stats, per_node, False)
        if amr:
            c_pairs, c_local = _forwarded(stats, per_node, True)
            per = "token and node / rank (multiple reduction)"
        else:
            # every selection comes back over scale-up; the forwarder sends one result per
            # (token, remote rank) over scale-out (tests/elastic/test_ep.py:313-318 counts them so)
            per_rank_node = R.reshape(n, n // per_node, per_node).sum(axis=2)
            c_pairs, c_local = _forwarded(stats, per_node, True, scaleup_counts=stats.rank_selections,
                                          scaleout_counts=per_rank_node)
            per = "selection (scale-up) / token and rank (scale-out)"
        return (_phase("dispatch", d_rec.name, d_rec.num_bytes, "token and destination node / rank", path,
                       d_pairs, d_local, per_node, src),
                _phase("combine", c_rec.name, c_rec.num_bytes, per, path, c_pairs, c_local, per_node, src))
    amr = bool(report.inputs.get("allow_multiple_reduction", True))
    if backend == "ascend":
        src = ("DeepEP-Ascend impls/ep/dispatch.hpp simt_persistent_worker (one SGE pair per token and rank), "
               "impls/ep/combine.hpp load_meta_issue_wqe (one reduced token per rank)")
    else:
        src = f"{_DEEPEP} deep_ep/include/deep_ep/impls/dispatch.cuh:336-395, combine.cuh:86-240 @dd758ca"
    back = R.T if amr else stats.rank_selections.T
    return (_phase("dispatch", d_rec.name, d_rec.num_bytes, "token and destination rank", "direct", R, zero,
                   per_node, src),
            _phase("combine", c_rec.name, c_rec.num_bytes,
                   "token and rank" if amr else "selection (single reduction)", "direct", back, zero, per_node, src))


# ------------------------------------------------------------- benchmark accounting
def _floats(values) -> tuple:
    return tuple(float(v) for v in values)


def benchmark_bytes(report: Report, plan, stats, per_node: int) -> BenchmarkBytes:
    """The bytes upstream's benchmark script of this backend divides by the kernel time.

    * DeepEP V1 intranode, ``tests/legacy/test_intranode.py:188-189, 198-201, 255``:
      ``NVL = recv tokens x hidden x 2`` (x ``FP8_FACTOR`` for FP8 dispatch), combine the
      same BF16 bytes;
    * DeepEP V1 internode, ``test_internode.py:59-63, 224-227, 239-243``: additionally
      ``RDMA = tokens x nodes reached (own node included) x hidden x 2`` (x ``FP8_FACTOR``);
    * DeepEP V1 low latency, ``test_low_latency.py:218-224``: ``selections x (hidden +
      hidden / 128 x 4 + 16)`` for dispatch, ``selections x hidden x 2`` for combine;
    * DeepEP V2 (and DeepEP-Ascend, whose ``EPBuffer`` mirrors V2's), ``tests/elastic/
      test_ep.py:238-255, 287-336``: per-token bytes of the received tensors (x, FP32
      scales per 128, ``topk_idx_t`` indices, FP32 weights) times received tokens
      ("SU"), and times tokens x nodes reached, own node included, when there is more
      than one scale-out rank ("SO").
    """
    np = numpy()
    hidden, k = int(report.inputs["hidden"]), stats.num_topk
    recv = stats.recv_tokens
    nodes_reached = stats.node_tokens.sum(axis=1)
    fp8 = plan.use_fp8_dispatch
    if report.backend == "deepep-v1":
        f = FP8_FACTOR if fp8 else 1.0
        nvl = recv * hidden * 2
        if report.quantity("num_rdma_ranks") == 1:
            return BenchmarkBytes(
                script=f"{_DEEPEP} tests/legacy/test_intranode.py",
                source="test_intranode.py:188-189, 198-201, 255 @dd758ca (rank 0 prints)",
                dispatch={"NVL": _floats(nvl * f)}, combine={"NVL": _floats(nvl)})
        rdma = nodes_reached * hidden * 2
        return BenchmarkBytes(
            script=f"{_DEEPEP} tests/legacy/test_internode.py",
            source="test_internode.py:59-63, 224-227, 239-243, 301-311 @dd758ca (rank 0 prints)",
            dispatch={"RDMA": _floats(rdma * f), "NVL": _floats(nvl * f)},
            combine={"RDMA": _floats(rdma), "NVL": _floats(nvl)})
    if report.backend == "deepep-ll":
        selections = stats.lane_selections.sum(axis=1)
        return BenchmarkBytes(
            script=f"{_DEEPEP} tests/legacy/test_low_latency.py",
            source="test_low_latency.py:218-224, 243-244 @dd758ca (every rank prints; use_logfmt=False)",
            dispatch={"RDMA bandwidth": _floats(selections * (hidden + hidden / 128 * 4 + 16))},
            combine={"RDMA bandwidth": _floats(selections * hidden * 2)},
            note="the script counts FP8 message bytes whether or not the dispatch is FP8")
    so = int(report.inputs.get("num_scaleout_ranks", 1))
    amr = bool(report.inputs.get("allow_multiple_reduction", True))
    idx_bytes = (plan.num_topk_idx_bits or 64) // 8
    per_dispatch = hidden * (1 if fp8 else 2) + (-(-hidden // 128) * 4 if fp8 else 0) + k * (idx_bytes + 4)
    per_combine = hidden * 2 + k * 4
    scaleout = nodes_reached if so > 1 else np.zeros_like(nodes_reached)
    if so > 1 and not amr:
        node = np.arange(stats.num_ranks) // per_node
        scaleout_combine = (stats.rank_tokens * (node[:, None] != node[None, :])).sum(axis=1)
    else:
        scaleout_combine = scaleout
    note = "" if report.backend == "deepep-v2" else (
        "DeepEP-Ascend's own benchmark scripts are not published in a snapshot; DeepEP V2's accounting is used "
        "because EPBuffer mirrors V2's API")
    return BenchmarkBytes(
        script=f"{_DEEPEP} tests/elastic/test_ep.py",
        source="test_ep.py:238-255 (dispatch), 287-336 (combine) @dd758ca (every rank prints; "
               "ignore_local_traffic=False)",
        dispatch={"SU": _floats(recv * per_dispatch), "SO": _floats(scaleout * per_dispatch)},
        combine={"SU": _floats(recv * per_combine), "SO": _floats(scaleout_combine * per_combine)},
        note=note)


def sgl_kernel_npu_normal_bytes(stats, hidden: int) -> BenchmarkBytes:
    """sgl-kernel-npu's normal-mode test (``tests/python/deepep/test_intranode.py:303-304,
    312-318 @b2e93094``): it tunes the BF16 ``x``, so dispatch and combine both count
    ``recv tokens x hidden x 2`` (HCCS), whatever the kernel quantizes to."""
    nvl = stats.recv_tokens * hidden * 2
    return BenchmarkBytes(script=f"{_SGL} tests/python/deepep/test_intranode.py",
                          source="test_intranode.py:303-304, 312-318, 334, 361 @b2e93094",
                          dispatch={"HCCS": _floats(nvl)}, combine={"HCCS": _floats(nvl)})


def sgl_kernel_npu_low_latency_bytes(stats, hidden: int) -> BenchmarkBytes:
    """sgl-kernel-npu's low-latency test (``tests/python/deepep/test_low_latency.py:179-184
    @b2e93094``): ``selections x (hidden + hidden // 128 x 4 + 16)`` and ``selections x
    hidden x 2``."""
    selections = stats.lane_selections.sum(axis=1)
    return BenchmarkBytes(script=f"{_SGL} tests/python/deepep/test_low_latency.py",
                          source="test_low_latency.py:179-184, 210-211 @b2e93094",
                          dispatch={"HCCS": _floats(selections * (hidden + hidden // 128 * 4 + 16))},
                          combine={"HCCS": _floats(selections * hidden * 2)})
