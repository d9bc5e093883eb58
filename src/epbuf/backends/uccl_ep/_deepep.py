"""The one place UCCL-EP calls DeepEP V1 (:mod:`epbuf.backends.deepep_v1`).

UCCL-EP keeps DeepEP V1's sizing code: ``ep/include/ep_config.hpp`` starts its ``Config`` and
``LowLatencyLayout`` with the comment ``// thirdparty/DeepEP/csrc/config.hpp``. epbuf therefore
*reuses* DeepEP V1's formulas instead of copying them, all through this module (so one module
adapts when DeepEP V1's API changes): its public names, plus ``slot_grid`` and ``hint_round_up``
of its low-latency modules and ``hint_slot_records`` of its config module:

* normal mode: ``Config`` (same constructor rules, ``ep_config.hpp:32-58``) and its
  ``nvl_buffer`` / ``rdma_buffer`` at :data:`NORMAL_VERSION`. UCCL's hints
  (``ep_config.hpp:60-132``) are DeepEP's released formula with 8-byte top-k indices
  (``sizeof(int64_t)``, line 84): every merged DeepEP version computes the same;
  ``v1.2.1`` is the tag among them.
* low-latency mode: ``LowLatencyLayout`` and ``get_low_latency_rdma_size_hint`` at
  :data:`LL_VERSION`. UCCL's default build (``ep_config.hpp:168-327``) is DeepEP's
  layout as of ``ll4`` (42253d0, 2025-07-29): dispatch slot ``16 + max(2H, H + 4 H/128)``,
  combine slot ``2H`` *without* the ``4 H/128`` LogFMT term DeepEP added in ``c5facf5``
  (``ll5``), signaling buffers of ``4E`` bytes aligned to 128 and placed first, hint
  ``((total + 128) / 128) * 128`` (:data:`hint_round_up`, which the per-expert-batching build
  rounds with too). The per-expert-batching build differs; that difference lives in
  :mod:`.low_latency`.
* the ``Buffer`` constructor: UCCL's (``ep/src/uccl_ep.cc:447-449, 483-498, 517-522``) appends
  DeepEP's three NVL metadata tables to a non-zero NVL allocation, with its own
  ``max_nvl_peers`` (``LOCAL_WORLD_SIZE``) where DeepEP has ``NUM_MAX_NVL_PEERS`` = 8, and
  allocates the same 32 MiB workspace: ``nvl_metadata_regions``, ``nvl_buffer_with`` and
  ``workspace_buffer`` of DeepEP V1's memory module.
* the TMA launches' dynamic shared memory (:mod:`.smem`): UCCL's intranode dispatch and combine
  and its internode ``cached_notify`` request what DeepEP's do, and its low-latency combine
  DeepEP's ``ll4`` bytes per warp; the formulas, the device bound and whether a build sets shared
  memory at all are DeepEP V1's :mod:`~epbuf.backends.deepep_v1.smem` (:data:`smem`).
"""

from __future__ import annotations

from ...errors import InvalidArgumentError, Problem
from .. import deepep_v1 as _v1
from ..deepep_v1.config import hint_slot_records  # what each token slot of a normal-mode hint reserves
from ..deepep_v1.ll_formulas import hint_round_up  # ((total + 128) / 128) * 128, ep_config.hpp:324-326 as DeepEP's
from ..deepep_v1.memory import nvl_buffer_with, nvl_metadata_regions, workspace_buffer  # the constructor's extras
from ..deepep_v1 import smem  # the TMA launches' shared memory and the device bound (read by .smem)

__all__ = ["NORMAL_VERSION", "LL_VERSION", "LL_VERSION_NEWEST", "Config", "make_config", "nvl_buffer",
           "rdma_buffer", "get_hidden_bytes", "ll_layout", "ll_hint", "deepep_ll_hint", "deepep_ll_max_bytes",
           "slot_grid", "hint_round_up", "hint_slot_records", "get_num_bytes_per_token", "nvl_buffer_with",
           "nvl_metadata_regions", "workspace_buffer", "smem"]

NORMAL_VERSION = "v1.2.1"  # DeepEP V1 version whose normal-mode hints UCCL's Config reproduces
LL_VERSION = "ll4"  # DeepEP V1 version whose LowLatencyLayout UCCL's default build reproduces
LL_VERSION_NEWEST = _v1.DEFAULT_VERSION  # what DeepEP itself computes today (for side-by-side findings)

#: ``internode::get_num_bytes_per_token``: UCCL's (``ep/src/internode.cu:73-80``) is DeepEP V1's
#: formula, checks included (a negative or non-integer count, a record beyond ``int``).
get_num_bytes_per_token = _v1.get_num_bytes_per_token

#: ``deep_ep::legacy::Config``; UCCL's ``uccl::Config`` applies the same rules (``ep_config.hpp:32-58``).
Config = _v1.Config


def make_config(num_sms: int, nvl_send: int, nvl_recv: int, rdma_send: int, rdma_recv: int) -> Config:
    """``Config(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv)``, built with keywords."""
    return _v1.Config(num_sms=num_sms, num_max_nvl_chunked_send_tokens=nvl_send,
                      num_max_nvl_chunked_recv_tokens=nvl_recv, num_max_rdma_chunked_send_tokens=rdma_send,
                      num_max_rdma_chunked_recv_tokens=rdma_recv)


def nvl_buffer(config: Config, hidden_bytes: int, num_ranks: int):
    """``Config.get_nvl_buffer_size_hint``'s terms as DeepEP V1 names them (a ``Buffer``)."""
    return config.nvl_buffer(hidden_bytes, num_ranks, version=NORMAL_VERSION)


def rdma_buffer(config: Config, hidden_bytes: int, num_ranks: int):
    """``Config.get_rdma_buffer_size_hint``'s terms (a ``Buffer``; empty for <= 8 ranks)."""
    return config.rdma_buffer(hidden_bytes, num_ranks, version=NORMAL_VERSION)


def slot_grid(num_bytes: int, num_experts: int, num_tokens: int, num_bytes_per_combine_msg: int) -> dict:
    """DeepEP's ``(expert, token)`` slot grid of a low-latency span (Region ``shape`` / ``record``)."""
    from ..deepep_v1.low_latency import slot_grid as grid

    return grid(num_bytes, num_experts, num_tokens, num_bytes_per_combine_msg)


def get_hidden_bytes(hidden: int, use_fp8_dispatch: bool) -> int:
    """The recipe's ``hidden * max(element size, 2)``."""
    return _v1.get_hidden_bytes(hidden, use_fp8_dispatch)


def ll_layout(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int):
    """DeepEP V1's ``LowLatencyLayout`` at :data:`LL_VERSION`. Its argument errors are raised with
    UCCL-EP's copy of the send/receive asserts named too (``ep_config.hpp:226, 239``)."""
    try:
        return _v1.LowLatencyLayout(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts,
                                    version=LL_VERSION)
    except InvalidArgumentError as error:
        raise InvalidArgumentError([
            Problem(p.argument, p.value, p.allowed + _uccl_site(p.allowed))
            for p in error.problems]) from None


def _uccl_site(allowed: str) -> str:
    """UCCL-EP's copy of the upstream line a DeepEP V1 layout error names."""
    if "multiple of 16" in allowed:
        return "; UCCL-EP: ep/include/ep_config.hpp:226, 239 @da914a2"
    if "C++ int" in allowed:  # num_experts * tokens is int * int before the size_t widening
        return "; UCCL-EP: the same int product, ep/include/ep_config.hpp:221, 231, 234 @da914a2"
    return ""


def ll_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int) -> int:
    """``get_low_latency_rdma_size_hint`` at :data:`LL_VERSION`: UCCL's default build."""
    return _v1.get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts,
                                              version=LL_VERSION)


def deepep_ll_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int) -> int:
    """What DeepEP V1 itself (newest) sizes for the same shape, for side-by-side findings."""
    return _v1.get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts,
                                              version=LL_VERSION_NEWEST)


def deepep_ll_max_bytes() -> int:
    """The largest low-latency RDMA buffer DeepEP V1's ``Buffer`` accepts (``num_rdma_bytes / 16 <
    INT_MAX``, from 4623c67) — the check UCCL's constructor does not have."""
    return _v1.MAX_NUM_BYTES_INT4_CHECK
