"""A CPU twin of ``deep_ep`` (DeepEP V1, ``deep_ep/buffers/legacy.py @dd758ca``): the same
``Buffer``, ``Config``, ``EventOverlap``, ``topk_idx_t``, with the same signatures, return
shapes and dtypes, moving real bytes between the ranks of a ``torch.distributed`` group (gloo
on CPU) and refusing, on every rank at once, what upstream's asserts refuse.

Use it where code imports ``deep_ep``::

    import epbuf.twin.deep_ep as deep_ep
    deep_ep.install()                 # sys.modules["deep_ep"] is now this module
    buffer = deep_ep.Buffer(group, num_nvl_bytes=..., num_rdma_bytes=...)

Covered: intranode normal mode (``get_dispatch_layout``, ``dispatch`` with and without a
cached handle, ``num_worst_tokens``, ``combine`` with weights and biases), internode normal mode
(more than 8 ranks, nodes of 8: :mod:`._deep_ep_internode`) and low-latency mode
(``low_latency_dispatch`` BF16 / FP8 / ``round_scale`` / UE8M0, ``low_latency_combine``, zero
copy, sync, ``async_finish`` and ``return_recv_hook``). Sizes and capacity checks come from
:mod:`epbuf.backends.deepep_v1` (``Config``, the default config tables,
``get_low_latency_rdma_size_hint``, ``LowLatencyLayout``, the intranode NVL asserts). Not
covered, refused in one line: shrink mode
(``enable_shrink``), an ``mpi4py`` communicator instead of a group. ``use_logfmt`` combines
in BF16 (upstream's LogFMT is a lossy 10-bit format: the twin's result is the exact one).
DeepEP V2's ``ElasticBuffer`` (one node, non-expanding layout) is :mod:`._deep_ep_elastic`.
"""

from __future__ import annotations

import os
import sys
import types

from ..backends.deepep_v1 import Config
from ..backends.deepep_v1 import get_combine_config as _combine_config
from ..backends.deepep_v1 import get_dispatch_config as _dispatch_config
from ..backends.deepep_v1 import get_low_latency_rdma_size_hint as _ll_hint
from ..errors import EpbufError
from ._deep_ep_elastic import ElasticBuffer, EPHandle
from ._deep_ep_event import EventHandle, EventOverlap
from ._engine import Engine, UpstreamAssertion, expect, torch_module

__all__ = ["Buffer", "ElasticBuffer", "EPHandle", "Config", "EventOverlap", "EventHandle", "topk_idx_t", "install", "utils", "UpstreamAssertion"]

torch = torch_module()
topk_idx_t = torch.int64  # deep_ep._C.topk_idx_t of a default (64-bit index) build
__version__ = "2.1.0"
BUF = "csrc/legacy/buffer.hpp:{} @dd758ca"
PY = "deep_ep/buffers/legacy.py:{} @dd758ca"
_INT_MAX = 2**31 - 1


def install() -> None:
    """Make ``import deep_ep`` (``from deep_ep import Buffer``, ``from deep_ep.utils import
    EventOverlap, EventHandle``) give this twin: ``sys.modules["deep_ep"]`` is this module and
    ``sys.modules["deep_ep.utils"]`` its :attr:`utils`."""
    sys.modules["deep_ep"] = sys.modules[__name__]
    sys.modules["deep_ep.utils"] = utils


utils = types.ModuleType("deep_ep.utils", "deep_ep.utils of the twin: EventOverlap, EventHandle")
utils.EventOverlap, utils.EventHandle = EventOverlap, EventHandle


def _upstream(call, *args):
    try:
        return call(*args)
    except EpbufError as error:
        raise UpstreamAssertion(str(error)) from None


class Buffer:
    """``deep_ep.Buffer`` on CPU: the constructor's arguments and checks (``BUF:107-116``),
    no device memory (the sizes are checked, not allocated; ``get_local_buffer_tensor`` gives
    a zeroed tensor of the size on first use)."""

    num_sms: int = 20

    def __init__(self, group, num_nvl_bytes: int = 0, num_rdma_bytes: int = 0, low_latency_mode: bool = False,
                 num_qps_per_rank: int = 24, allow_nvlink_for_low_latency_mode: bool = True,
                 allow_mnnvl: bool = False, explicitly_destroy: bool = False, enable_shrink: bool = False,
                 comm=None) -> None:
        if group is None and comm is None:
            raise ValueError("Either 'group' or 'comm' must be provided.")
        if group is None:
            raise UpstreamAssertion("epbuf.twin.deep_ep: an mpi4py communicator is not supported; pass a "
                                    "torch.distributed group")
        self._engine = Engine(group)
        self.rank, self.group, self.group_size = self._engine.rank, group, self._engine.num_ranks
        self.num_nvl_bytes, self.num_rdma_bytes = num_nvl_bytes, num_rdma_bytes
        self.low_latency_mode, self.explicitly_destroy, self.enable_shrink = low_latency_mode, explicitly_destroy, \
            enable_shrink
        self._tensors: dict = {}
        R = self.group_size

        def prepare():
            for name, value in (("num_nvl_bytes", num_nvl_bytes), ("num_rdma_bytes", num_rdma_bytes)):
                expect(type(value) is int and value >= 0, f"{name} is a non-negative int", "the binding's int64_t",
                       f"{name} = {value!r}")
            expect(num_nvl_bytes % 128 == 0 and (num_nvl_bytes <= _INT_MAX or num_rdma_bytes == 0),
                   "EP_HOST_ASSERT(num_nvl_bytes % NUM_BUFFER_ALIGNMENT_BYTES == 0 and (num_nvl_bytes <= "
                   "std::numeric_limits<int>::max() or num_rdma_bytes == 0))", BUF.format("107-108"),
                   f"num_nvl_bytes = {num_nvl_bytes:,}")
            expect(num_rdma_bytes % 128 == 0 and (low_latency_mode or num_rdma_bytes <= _INT_MAX),
                   "EP_HOST_ASSERT(num_rdma_bytes % NUM_BUFFER_ALIGNMENT_BYTES == 0 and (low_latency_mode or "
                   "num_rdma_bytes <= std::numeric_limits<int>::max()))", BUF.format("109-110"),
                   f"num_rdma_bytes = {num_rdma_bytes:,}")
            for name, value, line in (("num_nvl_bytes", num_nvl_bytes, 111), ("num_rdma_bytes", num_rdma_bytes, 112)):
                expect(value // 16 < _INT_MAX, f"EP_HOST_ASSERT({name} / sizeof(int4) < "
                       "std::numeric_limits<int>::max())", BUF.format(line), f"{name} = {value:,}")
            expect(R <= 160 or low_latency_mode, "EP_HOST_ASSERT(0 <= rank and rank < num_ranks and (num_ranks <= "
                   "NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS or low_latency_mode))", BUF.format(113))
            expect(R < 8 or R % 8 == 0, "EP_HOST_ASSERT(num_ranks < NUM_MAX_NVL_PEERS or num_ranks % "
                   "NUM_MAX_NVL_PEERS == 0)", BUF.format(114), f"num_ranks = {R}")
            if num_rdma_bytes > 0:
                expect(R > 8 or low_latency_mode, "EP_HOST_ASSERT(num_ranks > NUM_MAX_NVL_PEERS or "
                       "low_latency_mode)", BUF.format(116), f"num_rdma_bytes = {num_rdma_bytes:,}, {R} ranks")
            if max(1, R // 8) > 1 or low_latency_mode:
                assert num_qps_per_rank > 0
            expect(not enable_shrink, "epbuf.twin.deep_ep supports enable_shrink=False", "shrink mode (rank masking) "
                   "is not in the twin")
            return [], None

        self._engine.agree("Buffer", 0, prepare)
        if max(1, R // 8) > 1 or low_latency_mode:
            self.nvshmem_qp_depth = int(os.environ.get("NVSHMEM_QP_DEPTH", "1024"))
        self.runtime = self

    # --- upstream's small methods ---------------------------------------------------------
    def is_available(self) -> bool:
        return self.runtime is not None

    def destroy(self) -> None:
        assert self.explicitly_destroy, "`explicitly_destroy` flag must be set"
        self.runtime = None

    @staticmethod
    def is_sm90_compiled() -> bool:
        return True

    @staticmethod
    def set_num_sms(new_num_sms: int) -> None:
        assert new_num_sms % 2 == 0, "The SM count must be even"
        Buffer.num_sms = new_num_sms

    @staticmethod
    def capture() -> EventOverlap:
        return EventOverlap(EventHandle())

    @staticmethod
    def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                       num_experts: int) -> int:
        return _upstream(_ll_hint, num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts)

    @staticmethod
    def get_dispatch_config(num_ranks: int) -> Config:
        return _upstream(_dispatch_config, num_ranks, Buffer.num_sms)

    @staticmethod
    def get_combine_config(num_ranks: int) -> Config:
        return _upstream(_combine_config, num_ranks, Buffer.num_sms)

    def get_num_rdma_ranks(self) -> int:
        return max(1, self.group_size // 8)

    def get_local_buffer_tensor(self, dtype, size=None, offset: int = 0, use_rdma_buffer: bool = False):
        """A view of this rank's (lazily zeroed) NVL or RDMA bytes, as upstream's."""
        num_bytes = self.num_rdma_bytes if use_rdma_buffer else self.num_nvl_bytes
        raw = self._tensors.get(use_rdma_buffer)
        if raw is None:
            raw = self._tensors[use_rdma_buffer] = torch.zeros(num_bytes, dtype=torch.uint8)
        element = torch.empty((), dtype=dtype).element_size()
        tensor = raw[offset * element:].view(dtype) if num_bytes else raw.view(dtype)
        if size is None:
            return tensor
        assert tensor.numel() >= size.numel()
        return tensor[:size.numel()].view(size)

    def _event(self, async_finish: bool) -> EventOverlap:
        return EventOverlap(EventHandle() if async_finish else None)

    def _flip_low_latency_buffer(self) -> int:
        """The low-latency buffer a call uses, then the other one (``low_latency_buffer_idx ^= 1``,
        ``BUF:1504-1505``): two calls' results may be held at once, as upstream warns."""
        parity = self._low_latency_parity = getattr(self, "_low_latency_parity", 1) ^ 1
        return parity

    def _low_latency_tensor(self, name: str, parity: int, shape: tuple, dtype):
        """The kept ``[.., capacity, ..]`` tensor ``name`` of buffer ``parity`` (reused while its
        shape and dtype stay: a fresh one costs its page faults on every call)."""
        key = ("low latency", name, parity)
        tensor = self._tensors.get(key)
        if tensor is None or tuple(tensor.shape) != tuple(shape) or tensor.dtype != dtype:
            tensor = self._tensors[key] = torch.empty(shape, dtype=dtype)
        return tensor

    def _zero_copy_buffer(self, handle):
        _, _, T, hidden, num_experts = handle
        shape = (num_experts // self.group_size, self.group_size * T, hidden)
        buffer = self._tensors.get(("combine", shape))
        if buffer is None:
            buffer = self._tensors[("combine", shape)] = torch.zeros(shape, dtype=torch.bfloat16)
        return buffer

    # --- normal mode ----------------------------------------------------------------------
    def get_dispatch_layout(self, topk_idx, num_experts: int, previous_event=None, async_finish: bool = False,
                            allocate_on_comm_stream: bool = False):
        """``(num_tokens_per_rank, num_tokens_per_rdma_rank, num_tokens_per_expert, is_token_in_rank, event)``
        (``BUF:337-415``; local, no exchange)."""
        expect(topk_idx.dim() == 2 and topk_idx.is_contiguous(), "EP_HOST_ASSERT(topk_idx.dim() == 2 and "
               "topk_idx.is_contiguous())", BUF.format("343-344"), f"shape {tuple(topk_idx.shape)}")
        expect(num_experts > 0, "EP_HOST_ASSERT(num_experts > 0)", BUF.format(345))
        if allocate_on_comm_stream:
            expect(getattr(previous_event, "event", None) is not None and async_finish, "EP_HOST_ASSERT("
                   "previous_event.has_value() and "
                   "async)", BUF.format(351))
        expect(topk_idx.dtype == topk_idx_t, "topk_idx of topk_idx_t", BUF.format(343), f"{topk_idx.dtype}")
        expect(not bool(((topk_idx < -1) | (topk_idx >= num_experts)).any()), "topk_idx in [-1, num_experts)",
               "the layout kernel indexes experts with it")
        R = self.group_size
        L = num_experts // R
        valid = topk_idx >= 0
        per_expert = torch.bincount(topk_idx[valid], minlength=num_experts).to(torch.int32)
        ranks = torch.where(valid, topk_idx // max(L, 1), torch.full_like(topk_idx, R))
        in_rank = torch.zeros((int(topk_idx.shape[0]), R + 1), dtype=torch.bool)
        in_rank.scatter_(1, ranks.clamp(max=R), True)
        is_token_in_rank = in_rank[:, :R].contiguous()
        per_rank = is_token_in_rank.sum(0).to(torch.int32)
        per_rdma = None
        if R > 8:
            per_rdma = is_token_in_rank.view(-1, R // 8, 8).any(2).sum(0).to(torch.int32)
        return per_rank, per_rdma, per_expert, is_token_in_rank, self._event(async_finish)

    def dispatch(self, x, handle=None, num_tokens_per_rank=None, num_tokens_per_rdma_rank=None,
                 is_token_in_rank=None, num_tokens_per_expert=None, topk_idx=None, topk_weights=None,
                 expert_alignment: int = 1, num_worst_tokens: int = 0, config=None, previous_event=None,
                 async_finish: bool = False, allocate_on_comm_stream: bool = False):
        """``(recv_x, recv_topk_idx, recv_topk_weights, num_recv_tokens_per_expert_list, handle, event)``
        (``PY:293-423``)."""
        from ._deep_ep_normal import intranode_dispatch

        config = self.get_dispatch_config(self.group_size) if config is None else config
        previous_event = getattr(previous_event, "event", None)
        if self.get_num_rdma_ranks() > 1:
            from ._deep_ep_internode import internode_dispatch

            assert num_worst_tokens == 0, "Internode dispatch does not support `num_worst_tokens > 0`"
            return internode_dispatch(self, x, handle, num_tokens_per_rank, num_tokens_per_rdma_rank,
                                      is_token_in_rank, num_tokens_per_expert, topk_idx, topk_weights,
                                      expert_alignment, config, previous_event, async_finish, allocate_on_comm_stream)
        x, x_scales = x if isinstance(x, tuple) else (x, None)
        if handle is not None:
            assert topk_idx is None and topk_weights is None
        return intranode_dispatch(self, x, x_scales, topk_idx, topk_weights, num_tokens_per_rank, is_token_in_rank,
                                  num_tokens_per_expert, handle, expert_alignment, num_worst_tokens, config,
                                  previous_event, async_finish, allocate_on_comm_stream)

    def combine(self, x, handle, topk_weights=None, bias=None, config=None, previous_event=None,
                async_finish: bool = False, allocate_on_comm_stream: bool = False):
        """``(combined_x, combined_topk_weights, event)``: the sum of each token's rows (``PY:426-474``)."""
        from ._deep_ep_normal import intranode_combine

        config = self.get_combine_config(self.group_size) if config is None else config
        previous_event = getattr(previous_event, "event", None)
        if self.get_num_rdma_ranks() > 1:
            from ._deep_ep_internode import internode_combine

            return internode_combine(self, x, handle, topk_weights, bias, config, previous_event, async_finish,
                                     allocate_on_comm_stream)
        return intranode_combine(self, x, handle, topk_weights, bias, config, previous_event, async_finish,
                                 allocate_on_comm_stream)

    # --- low-latency mode -----------------------------------------------------------------
    def clean_low_latency_buffer(self, num_max_dispatch_tokens_per_rank: int, hidden: int, num_experts: int) -> None:
        """Collective; checks what upstream's clean checks (``BUF:1431-1441``)."""
        from ._deep_ep_ll import _common_checks

        def prepare():
            _common_checks(self, num_max_dispatch_tokens_per_rank, num_experts, hidden, self.group_size, 1432)
            return [], None

        self._engine.agree("clean_low_latency_buffer", 0, prepare)

    def low_latency_dispatch(self, x, topk_idx, num_max_dispatch_tokens_per_rank: int, num_experts: int,
                             cumulative_local_expert_recv_stats=None, dispatch_wait_recv_cost_stats=None,
                             use_fp8: bool = True, round_scale: bool = False, use_ue8m0: bool = False,
                             async_finish: bool = False, return_recv_hook: bool = False):
        """``(recv_x, recv_count, handle, event, hook)`` (``PY:540-605``)."""
        from ._deep_ep_ll import low_latency_dispatch

        return low_latency_dispatch(self, x, topk_idx, cumulative_local_expert_recv_stats,
                                    dispatch_wait_recv_cost_stats, num_max_dispatch_tokens_per_rank, num_experts,
                                    use_fp8, round_scale, use_ue8m0, async_finish, return_recv_hook)

    def low_latency_combine(self, x, topk_idx, topk_weights, handle, use_logfmt: bool = False, zero_copy: bool = False,
                            async_finish: bool = False, return_recv_hook: bool = False, out=None,
                            combine_wait_recv_cost_stats=None):
        """``(combined_x, event, hook)``: the top-k-weighted sum (``PY:608-655``)."""
        from ._deep_ep_ll import low_latency_combine

        return low_latency_combine(self, x, topk_idx, topk_weights, handle, use_logfmt, zero_copy, async_finish,
                                   return_recv_hook, out, combine_wait_recv_cost_stats)

    def get_next_low_latency_combine_buffer(self, handle):
        """The BF16 ``[num_local_experts, num_ranks * T, hidden]`` tensor a ``zero_copy`` combine reads."""
        return self._zero_copy_buffer(handle)

    def low_latency_update_mask_buffer(self, rank_to_mask: int, mask: bool = False) -> None:
        expect(self.enable_shrink, 'EP_HOST_ASSERT(mask_buffer_ptr != nullptr and "Shrink mode must be enabled")',
               BUF.format(1732))

    def low_latency_query_mask_buffer(self, mask_status) -> None:
        self.low_latency_update_mask_buffer(0)

    def low_latency_clean_mask_buffer(self) -> None:
        self.low_latency_update_mask_buffer(0)
