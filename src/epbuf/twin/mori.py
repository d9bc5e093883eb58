"""A CPU twin of MORI-EP's Python API (``ROCm/mori @624002c``, ``python/mori/ops/dispatch_combine.py``):
``EpDispatchCombineConfig``, ``EpDispatchCombineKernelType``, ``EpDispatchCombineQuantType`` and
``EpDispatchCombineOp`` with ``dispatch`` and ``combine``, the same arguments and return tuples
(``PY:1102-1310, 1383-1713``), moving real bytes between the ranks of a ``torch.distributed``
group (gloo on CPU) on the twin engine, and refusing on every rank at once.

Use it where code imports ``mori``::

    import epbuf.twin.mori as twin_mori
    twin_mori.install()        # sys.modules["mori"], "mori.ops", "mori.ops.dispatch_combine"
    import mori
    op = mori.ops.EpDispatchCombineOp(mori.ops.EpDispatchCombineConfig(...))
    out, out_weights, out_scales, out_indices, total_recv = op.dispatch(x, weights, scales, indices)
    combined, combined_weights = op.combine(expert_out, out_weights, indices)

What the IntraNode kernels do: a token goes once to each rank one of its experts lives on
(``indices // num_experts_per_rank``, ``-1`` skipped) with its hidden row, top-k weights,
scales and indices; the receiver's rows are sources in rank order, each source's tokens in
token order (the GPU's order follows its atomics; MORI's test maps each row back through
``get_dispatch_src_token_pos``). ``combine`` sends row ``i`` of its input back to the row's
source, which sums the rows (and the weights) of each token in fp32: MORI's test expects
``input * number of distinct ranks``. ``quant_type="fp8_direct_cast"`` sends the combine rows
as ``float8_e4m3fn``. The buffers' sizes are :mod:`epbuf.backends.mori_ep`'s
(``max_num_tokens_to_recv``, the receive cap ``max_total_recv_tokens``).
"""

from __future__ import annotations

import enum
import sys
import types
from dataclasses import dataclass

from ..backends.mori_ep.config import EpDispatchCombineConfig as _Sizes
from ..backends.mori_ep.config import KERNEL_TYPES, handle_config
from ..backends.mori_ep.versions import PY, src
from ._engine import Engine, UpstreamAssertion, expect, torch_module
from ._engine_records import TokenRoute, pack_rows, record_layout, reduce_rows, unpack_rows

__all__ = ["EpDispatchCombineConfig", "EpDispatchCombineKernelType", "EpDispatchCombineQuantType",
           "EpDispatchCombineOp", "install", "UpstreamAssertion"]

torch = torch_module()
TOPK_IDX_DTYPE = torch.int32  # PY:32
_DTYPES = tuple(getattr(torch, n) for n in ("float32", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz",
                                            "float4_e2m1fn_x2") if hasattr(torch, n))  # _DTYPE_SUFFIX, PY:290-309

EpDispatchCombineKernelType = enum.IntEnum("EpDispatchCombineKernelType", [(n, i) for i, n in enumerate(KERNEL_TYPES)])
EpDispatchCombineKernelType.__str__ = lambda self: self.name
EpDispatchCombineQuantType = enum.IntEnum("EpDispatchCombineQuantType", [
    ("None_", 0), ("Fp8DirectCast", 1), ("Fp8BlockwiseQuant", 2), ("Fp4BlockwiseQuant", 3)])
EpDispatchCombineQuantType.__str__ = lambda self: self.name
_QUANT = {"none": "None_", "fp8_direct_cast": "Fp8DirectCast", "fp8_blockwise": "Fp8BlockwiseQuant",
          "fp4_blockwise": "Fp4BlockwiseQuant"}  # _QUANT_TYPE_MAP, PY:142-149


def _quant_name(quant_type) -> str:
    """``_normalize_quant_type`` (``PY:173-182``): the config's quant string."""
    if isinstance(quant_type, EpDispatchCombineQuantType):
        return {v: k for k, v in _QUANT.items()}[quant_type.name]
    if isinstance(quant_type, str) and quant_type.strip().lower() in _QUANT:
        return quant_type.strip().lower()
    raise ValueError(f"invalid quant_type '{quant_type}', expected one of {list(_QUANT)}")


@dataclass
class EpDispatchCombineConfig:
    """``mori.ops.EpDispatchCombineConfig`` (``PY:214-273``), the same fields and defaults."""

    data_type: object
    rank: int
    world_size: int
    hidden_dim: int
    scale_dim: int
    scale_type_size: int
    max_token_type_size: int
    max_num_inp_token_per_rank: int
    num_experts_per_rank: int
    num_experts_per_token: int
    warp_num_per_block: int = 8
    block_num: int = 80
    max_total_recv_tokens: int = 0
    use_external_inp_buf: bool = True
    kernel_type: EpDispatchCombineKernelType = EpDispatchCombineKernelType.IntraNode
    gpu_per_node: int = 8
    rdma_block_num: int = 0
    num_qp_per_pe: int = 1
    quant_type: str = "none"


_FIELDS = ("world_size", "hidden_dim", "scale_dim", "scale_type_size", "max_token_type_size",
           "max_num_inp_token_per_rank", "num_experts_per_rank", "num_experts_per_token", "max_total_recv_tokens")


def _tensor(x, name: str, ndim: int, dtypes, rows: int | None, cols: int | None) -> None:
    expect(isinstance(x, torch.Tensor), f"{name} is a torch.Tensor", "its data_ptr() is passed to the kernel",
           f"got {type(x).__name__}")
    expect(x.dim() == ndim and x.is_contiguous(), f"{name} is a contiguous {ndim}-d tensor", "unchecked upstream: "
           "the kernel reads its data_ptr() as a dense array",
           f"shape {tuple(x.shape)}, contiguous={x.is_contiguous()}")
    expect(dtypes is None or x.dtype in dtypes, f"{name}.dtype in {[str(d) for d in dtypes or ()]}",
           src(PY, "290-309, 32"), f"{name} is {x.dtype}")
    expect(rows is None or int(x.shape[0]) == rows, f"{name}.size(0) == the tokens of input", "unchecked upstream: "
           "the kernel reads one row per token", f"{int(x.shape[0])} vs {rows}")
    expect(cols is None or int(x.shape[1]) == cols, f"{name}.size(1) == {cols}", "unchecked upstream: the kernel "
           "reads config-sized rows", f"{name}.size(1) = {int(x.shape[1])}")


class EpDispatchCombineOp:
    """``mori.ops.EpDispatchCombineOp`` (``PY:396``), IntraNode semantics for every kernel type."""

    def __init__(self, config) -> None:
        self.config = config
        self.engine = Engine(None)
        E = self.engine

        def prepare():
            kt = config.kernel_type
            expect(isinstance(kt, EpDispatchCombineKernelType) or kt in tuple(EpDispatchCombineKernelType),
                   "kernel_type in _KERNEL_TYPE_TO_HIP", src(PY, "311-318, 371-372"), f"Unknown kernel_type: {kt}")
            self._quant = _quant_name(config.quant_type)
            self._sizes = handle_config(_Sizes(**{f: getattr(config, f) for f in _FIELDS},
                                               kernel_type=EpDispatchCombineKernelType(kt).name,
                                               gpu_per_node=config.gpu_per_node, num_qp_per_pe=config.num_qp_per_pe,
                                               quant_type=self._quant))
            expect(config.rank == E.rank and config.world_size == E.num_ranks, "rank and world_size are the group's",
                   "the shmem PEs are the torch.distributed ranks", f"rank {config.rank} of {config.world_size}, the "
                   f"group has rank {E.rank} of {E.num_ranks}")
            return [getattr(config, f) for f in _FIELDS], None

        _, rows = E.agree("EpDispatchCombineOp", len(_FIELDS), prepare)
        E.same_everywhere(rows, slice(0, len(_FIELDS)), "EpDispatchCombineOp", ", ".join(_FIELDS))
        self._dispatched = None

    # --- the sizes, from epbuf.backends.mori_ep (HDR:154-170) -------------------------------
    def max_num_tokens_to_recv(self) -> int:
        return self._sizes.max_num_tokens_to_recv()

    def max_num_tokens_to_recv_per_rank(self) -> int:
        return self._sizes.max_num_tokens_to_recv_per_rank()

    def max_num_tokens_to_send(self) -> int:
        return self._sizes.max_num_tokens_to_send()

    def max_num_tokens_to_send_per_rank(self) -> int:
        return self._sizes.max_num_tokens_to_send_per_rank()

    def decode_send_flat_idx(self, flat_idx):
        """``(rank, local_token_id)`` of a flat send index (``PY:1005-1008``)."""
        stride = self.max_num_tokens_to_send()
        return int(flat_idx) // stride, int(flat_idx) % stride

    def get_dispatch_src_token_pos(self):
        """The flat send index (``rank * max_num_tokens_to_send() + token``) of each received row (``PY:2171``)."""
        expect(self._dispatched is not None, "a dispatch before get_dispatch_src_token_pos", src(PY, "2171-2231"))
        return self._dispatched["pos"].clone()

    def reset(self) -> None:
        return None

    def dispatch(self, input, weights, scales, indices, block_num: int = -1, rdma_block_num: int = -1,
                 warp_per_block: int = -1, call_local_expert_count: bool = False, *, routing=None,
                 return_routing: bool = False):
        """``(out, out_weights, out_scales, out_indices, total_recv)`` (``PY:1102-1310``): ``out`` is
        ``[max_num_tokens_to_recv(), hidden]`` of ``input.dtype``, ``total_recv`` int32 ``[1]``."""
        if routing is not None and return_routing:
            raise ValueError("pass either `routing=` (replay) or `return_routing=True` (new layout), not both")
        if routing is not None or return_routing:
            raise NotImplementedError("routing handle path not supported by the twin (upstream: IntraNode and "
                                      "InterNodeV1 only)")
        c, E, R = self._sizes, self.engine, self.engine.num_ranks
        K, L = c.num_experts_per_token, c.num_experts_per_rank
        has_scales = scales is not None and c.scale_dim > 0  # PY:1146

        def prepare():
            _tensor(input, "input", 2, _DTYPES, None, None)
            n = int(input.shape[0])
            expect(n <= c.max_num_inp_token_per_rank, "input.size(0) <= max_num_inp_token_per_rank",
                   "unchecked upstream: the send buffers hold maxNumInpTokenPerRank tokens, " + src(PY, "232-233"),
                   f"{n} tokens > {c.max_num_inp_token_per_rank}")
            row_bytes = int(input.shape[1]) * input.element_size()
            expect(row_bytes <= c.max_hidden_bytes(), "input row bytes <= hidden_dim * max_token_type_size",
                   "unchecked upstream: dispatchOut rows hold MaxHiddenBytes()",
                   f"{row_bytes} B > {c.max_hidden_bytes()} B")
            _tensor(indices, "indices", 2, (TOPK_IDX_DTYPE,), n, K)
            if weights is not None:
                _tensor(weights, "weights", 2, (torch.float32,), n, K)
            if has_scales:
                _tensor(scales, "scales", 2, None, n, c.scale_dim)
                expect(scales.element_size() == c.scale_type_size, "scales.element_size() == scale_type_size",
                       "unchecked upstream: the kernel copies scaleDim * scaleTypeSize bytes", f"{scales.dtype}")
            ids = indices.to(torch.int64)
            bad = (ids < -1) | (ids >= R * L)
            if bool(bad.any()):
                expect(False, "-1 <= indices < world_size * num_experts_per_rank", "unchecked upstream: the kernel "
                       "sends to rank index // num_experts_per_rank", f"{int(ids[bad][0])} of {R * L} experts")
            dest = torch.zeros(n, R, dtype=torch.bool)
            valid = ids >= 0
            tok = torch.arange(n).unsqueeze(1).expand(n, K)
            dest[tok[valid], (ids[valid] // L)] = True
            route = TokenRoute(torch, dest)
            row = route.counts.tolist() + [row_bytes, int(input.dtype.itemsize), int(has_scales)]
            return row, (route, n, row_bytes)

        (route, n, row_bytes), rows = E.agree("EpDispatchCombineOp.dispatch", R + 3, prepare)
        E.same_everywhere(rows, slice(R, R + 3), "EpDispatchCombineOp.dispatch", "the input row bytes, dtype size "
                          "and whether scales are sent")
        recv = rows[:, :R].sum(0)  # tokens each rank receives
        cap = c.max_num_tokens_to_recv()
        if int(recv.max()) > cap:
            q = int(recv.argmax())
            raise UpstreamAssertion(f"rank {q} of {R}: total received tokens <= max_num_tokens_to_recv() failed "
                                    f"({src(PY, '238-242')}: the kernel asserts): {int(recv[q])} > {cap} "
                                    f"(max_total_recv_tokens {c.max_total_recv_tokens}, world_size {R})")
        fields = (("hidden", "uint8", 1, row_bytes), ("indices", "int32", 4, K), ("weights", "float32", 4, K),
                  ("scales", "uint8", 1, c.scale_dim * c.scale_type_size if has_scales else 0), ("pos", "int32", 4, 1))
        layout = record_layout("MORI-EP dispatch token", fields)
        data = {"hidden": input.contiguous().view(torch.uint8).reshape(n, row_bytes), "indices": indices,
                "pos": (torch.arange(n, dtype=torch.int32) + E.rank * c.max_num_tokens_to_send()).unsqueeze(1)}
        if weights is not None:
            data["weights"] = weights
        if has_scales:
            data["scales"] = scales.contiguous().view(torch.uint8).reshape(n, c.scale_dim * c.scale_type_size)
        send = pack_rows(torch, layout, int(route.token.shape[0]), route.token, **data)
        got = unpack_rows(layout, E.exchange(send, route.counts.tolist(), rows[:, E.rank].tolist(),
                                             "EpDispatchCombineOp.dispatch").wait())
        total = int(rows[:, E.rank].sum())
        out = torch.zeros(cap, int(input.shape[1]), dtype=input.dtype)
        out.view(torch.uint8).view(cap, row_bytes)[:total] = got["hidden"]
        out_weights = torch.zeros(cap, K, dtype=torch.float32)
        if weights is not None:
            out_weights[:total] = got["weights"]
        out_scales = None
        if has_scales:
            out_scales = torch.zeros(cap, c.scale_dim, dtype=scales.dtype)
            out_scales.view(torch.uint8).view(cap, c.scale_dim * c.scale_type_size)[:total] = got["scales"]
        out_indices = torch.full((cap, K), -1, dtype=TOPK_IDX_DTYPE)
        out_indices[:total] = got["indices"]
        self._dispatched = {"pos": got["pos"].reshape(-1).clone(), "from": rows[:, E.rank].clone(), "route": route,
                            "n": n, "total": total}
        return out, out_weights, out_scales, out_indices, torch.tensor([total], dtype=TOPK_IDX_DTYPE)

    def combine(self, input, weights, indices, block_num: int = -1, rdma_block_num: int = -1,
                warp_per_block: int = -1, use_external_inp_buf: int = -1, call_reset: bool = False, *, routing=None):
        """``(out, out_weights)`` (``PY:1383-1713``): ``out[t]`` = the sum of the rows returned for
        token ``t`` (``[max_num_inp_token_per_rank, hidden]`` of ``input.dtype``); ``out_weights``
        the same sum of the weight rows, ``None`` without ``weights``."""
        if routing is not None:
            raise NotImplementedError("routing handle path not supported by the twin")
        c, E, R, K = self._sizes, self.engine, self.engine.num_ranks, self._sizes.num_experts_per_token
        has_w = weights is not None and int(weights.shape[0]) != 0  # PY:1407-1409

        def prepare():
            d = self._dispatched
            expect(d is not None, "a dispatch before the combine", "upstream's combine reads the dispatch's maps")
            _tensor(input, "input", 2, _DTYPES, None, None)
            expect(int(input.shape[0]) >= d["total"], "input holds the dispatch's received tokens", "unchecked "
                   "upstream: the kernel reads total_recv rows", f"{int(input.shape[0])} rows < {d['total']}")
            row_bytes = int(input.shape[1]) * input.element_size()
            expect(row_bytes <= c.max_hidden_bytes(), "input row bytes <= hidden_dim * max_token_type_size",
                   "unchecked upstream: combineInp rows hold MaxHiddenBytes()",
                   f"{row_bytes} B > {c.max_hidden_bytes()} B")
            _tensor(indices, "indices", 2, (TOPK_IDX_DTYPE,), d["n"], K)
            if has_w:
                _tensor(weights, "weights", 2, (torch.float32,), None, K)
                expect(int(weights.shape[0]) >= d["total"], "weights holds the dispatch's received tokens",
                       "unchecked upstream", f"{int(weights.shape[0])} rows < {d['total']}")
            if self._quant == "fp8_direct_cast":
                expect(input.dtype == torch.bfloat16, "fp8_direct_cast combine input is bf16", src(PY, "1508"),
                       f"got {input.dtype}")
            return d["from"].tolist() + [int(input.shape[1]), int(has_w)], d

        d, rows = E.agree("EpDispatchCombineOp.combine", R + 2, prepare)
        E.same_everywhere(rows, slice(R, R + 2), "EpDispatchCombineOp.combine", "the hidden size and whether weights "
                          "are combined")
        route, total, H = d["route"], d["total"], int(input.shape[1])
        wire = torch.float8_e4m3fn if self._quant == "fp8_direct_cast" else input.dtype
        y = input[:total].to(wire) if wire != input.dtype else input[:total]
        es = y.element_size()
        layout = record_layout("MORI-EP combine token", (("hidden", "uint8", 1, H * es), ("weights", "float32", 4,
                                                                                          K if has_w else 0)))
        data = {"hidden": y.contiguous().view(torch.uint8).reshape(total, H * es)}
        if has_w:
            data["weights"] = weights[:total]
        send = pack_rows(torch, layout, total, torch.arange(total), **data)
        got = unpack_rows(layout, E.exchange(send, d["from"].tolist(), route.counts.tolist(),
                                             "EpDispatchCombineOp.combine").wait())
        n, M = d["n"], c.max_num_inp_token_per_rank
        out = torch.zeros(M, H, dtype=input.dtype)
        reduce_rows(E, got["hidden"].contiguous().view(wire).to(torch.float32), route.token, n, out=out[:n])
        out_weights = None
        if has_w:
            out_weights = torch.zeros(M, K, dtype=weights.dtype)
            out_weights[:n].index_add_(0, route.token, got["weights"].to(weights.dtype))
        return out, out_weights


ops = types.ModuleType("mori.ops", "mori.ops of the twin")
dispatch_combine = types.ModuleType("mori.ops.dispatch_combine", "mori.ops.dispatch_combine of the twin")
for _name in ("EpDispatchCombineConfig", "EpDispatchCombineKernelType", "EpDispatchCombineQuantType",
              "EpDispatchCombineOp", "TOPK_IDX_DTYPE"):
    setattr(ops, _name, globals()[_name])
    setattr(dispatch_combine, _name, globals()[_name])
ops.dispatch_combine = dispatch_combine


def install() -> None:
    """Make ``import mori`` (``mori.ops.EpDispatchCombineOp``, ``from mori.ops.dispatch_combine import ...``)
    give this twin."""
    sys.modules["mori"] = sys.modules[__name__]
    sys.modules["mori.ops"] = ops
    sys.modules["mori.ops.dispatch_combine"] = dispatch_combine
