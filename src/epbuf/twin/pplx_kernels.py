"""A CPU twin of ``pplx_kernels`` (``ppl-ai/pplx-kernels @12cecfd``, ``src/pplx_kernels/all_to_all.py``):
``AllToAll.intranode`` / ``AllToAll.internode`` with ``dispatch``, ``combine`` and ``destroy``, the
same arguments, the same output tensors filled in place, moving real bytes between the ranks of
a ``torch.distributed`` group (gloo on CPU), and refusing on every rank at once what upstream's
asserts refuse.

Use it where code imports ``pplx_kernels``::

    import epbuf.twin.pplx_kernels as pplx_kernels
    pplx_kernels.install()            # sys.modules["pplx_kernels"] (and .all_to_all, .nvshmem)
    from pplx_kernels import AllToAll
    ata = AllToAll.internode(max_num_tokens, num_experts, experts_per_token, rank, world_size, dp_size,
                             hidden_dim, hidden_dim_bytes, hidden_dim_scale_bytes)

The constructor's refusals are the Python wrapper's asserts and the C++ constructor's
``PPLX_ASSERT`` traps (``csrc/all_to_all/all_to_all.cpp:32-39``), read from
:func:`epbuf.backends.pplx.limit_rows`; the kernel-launch limits of the same rows (dynamic
shared memory, ``uint32`` slot indices) refuse the first ``dispatch``. The wire record is
:func:`epbuf.backends.pplx.per_token_bytes` long. ``pplx_kernels.nvshmem``'s functions are
there for code that calls them (``nvshmem_init`` checks the rank and size against the group;
no symmetric heap is made). The dispatch and combine themselves: :mod:`._pplx_all_to_all`.
"""

from __future__ import annotations

import sys
import types

from ..backends.pplx import limit_rows, num_local_experts, per_token_bytes
from ..backends.pplx.versions import BASE, INTER, INTER_DISPATCH, INTRA_DISPATCH, PY, src
from ._engine import Engine, UpstreamAssertion, expect, torch_module
from ._pplx_all_to_all import combine as _combine
from ._pplx_all_to_all import dispatch as _dispatch

__all__ = ["AllToAll", "install", "nvshmem", "all_to_all", "UpstreamAssertion"]

torch = torch_module()

#: The constructor's refusals in upstream's order: the ``limit_rows`` row, the assert as upstream writes it, where.
_HOST_CHECKS = (
    ("world_size % dp_size", "assert world_size % dp_size == 0", src(PY, "102, 141")),
    ("DP groups (world_size / dp_size)", "assert world_size // dp_size > 1", src(PY, "103, 142")),
    ("hidden_dim_bytes % 16", 'PPLX_ASSERT(hiddenDimBytes % 16 == 0, "invalid hidden dim bytes")', src(BASE, "32")),
    ("hidden_dim_scale_bytes % 16", 'PPLX_ASSERT(hiddenDimScaleBytes % 16 == 0, "invalid hidden dim scale bytes")',
     src(BASE, "33")),
    ("numLocalExperts (ceil(num_experts / world_size))", 'PPLX_ASSERT(numLocalExperts != 0, "numLocalExperts is 0")',
     src(BASE, "37")),
    ("hidden_dim_scale_bytes <= hidden_dim_bytes", 'PPLX_ASSERT(hiddenDimScaleBytes <= hiddenDimBytes, "invalid '
     'hidden dim bytes")', src(BASE, "39")),
)
_ARGUMENTS = ("max_num_tokens", "num_experts", "experts_per_token", "rank", "world_size", "dp_size", "hidden_dim",
              "hidden_dim_bytes", "hidden_dim_scale_bytes")


class _Handle:
    """What upstream's ``ptr`` points to: the arguments, the group, the dispatch state."""

    def __init__(self, kernel: str, group, args: dict) -> None:
        self.kernel, self.torch = kernel, torch
        self.engine = Engine(group)
        self.__dict__.update(args)
        self.destroyed = False
        self.pending_dispatch = self.pending_combine = self.dispatched = None
        R = self.engine.num_ranks

        def prepare():
            values = [args[name] for name in _ARGUMENTS]
            rows = {row[0]: row for row in limit_rows(kernel, *(args[name] for name in (
                "max_num_tokens", "num_experts", "world_size", "dp_size", "hidden_dim", "hidden_dim_bytes",
                "hidden_dim_scale_bytes")), args["world_size"])}
            for name in ("experts_per_token", "rank"):
                expect(type(args[name]) is int and args[name] >= 0, f"{name} is an int >= 0",
                       "int64_t in the binding, csrc/bindings/all_to_all_ops.cpp:54-63 @12cecfd", f"{args[name]!r}")
            for name, assertion, where in _HOST_CHECKS:
                _, value, relation, bound, ok, _, _ = rows[name]
                expect(ok, assertion, where, f"{name}: {value} {relation} {bound} is false")
            expect(args["rank"] == self.engine.rank and args["world_size"] == R, "rank and world_size are the "
                   "group's", "the twin's group" if kernel == "internode" else "the group of group_name",
                   f"rank {args['rank']} of {args['world_size']}, the group has rank {self.engine.rank} of {R}")
            self.kernel_rows = [row for row in rows.values() if not row[4] and (row[6] == "kernel" or row[0] in (
                "num_experts % world_size", "hidden_dim % 8 (combine VEC_SIZE)"))]
            values[3] = 0  # the rank differs, the rest must not
            return values, None

        _, table = self.engine.agree(f"AllToAll.{kernel}", len(_ARGUMENTS), prepare)
        self.engine.same_everywhere(table, slice(0, len(_ARGUMENTS)), f"AllToAll.{kernel}",
                                    ", ".join(n for n in _ARGUMENTS if n != "rank"))
        # the kernels take numExperts / worldSize (kernel_limits refuses a remainder)
        self.num_local_experts = num_local_experts(self.num_experts, self.world_size)
        self.num_routed_experts = self.num_local_experts * self.world_size
        self.per_token_bytes = per_token_bytes(self.hidden_dim_bytes, self.hidden_dim_scale_bytes)
        self.num_scales = self.hidden_dim_scale_bytes // 4
        self.has_scales = self.hidden_dim_scale_bytes > 0

    def usable(self) -> None:
        expect(not self.destroyed, "assert self._ptr is not None", src(PY, "39, 71"), "the AllToAll was destroyed")

    def kernel_limits(self) -> None:
        """A limit of :func:`~epbuf.backends.pplx.limit_rows` this ``AllToAll`` breaks that the
        kernels hit: a launch limit, or what they assume (``num_experts`` a multiple of
        ``world_size``: ``numExperts / worldSize`` local experts; ``hidden_dim`` of 8s)."""
        for name, value, relation, bound, _, source, enforced in self.kernel_rows:
            what = "the dispatch launch fails" if enforced == "kernel" else "the kernels assume it"
            raise UpstreamAssertion(f"{name} {relation} {bound} failed ({source}): {value:,}; {what}")

    def token_bound(self, kind: str) -> tuple:
        if kind == "dispatch":
            return ("PPLX_DEVICE_ASSERT(numSendTokens <= maxNumTokens)", src(
                INTER_DISPATCH if self.kernel == "internode" else INTRA_DISPATCH,
                "68" if self.kernel == "internode" else "65") + ", compiled out upstream")
        return ("bound_m <= max_num_tokens", f"unchecked upstream: the combine's buffers hold max_num_tokens tokens "
                f"per expert ({src(INTER, '47-49, 67-68')})")


def _resolve(group_name: str):
    import torch.distributed as dist

    try:
        return torch._C._distributed_c10d._resolve_process_group(group_name)
    except (RuntimeError, AttributeError):
        if group_name == "default":
            return dist.group.WORLD
        raise UpstreamAssertion(f"AllToAll.intranode: no process group registered as {group_name!r} "
                                "(c10d::resolve_process_group, csrc/bindings/all_to_all_ops.cpp:91)") from None


class AllToAll:
    """``pplx_kernels.AllToAll`` on CPU (``PY:11-164``)."""

    def __init__(self, ptr, combine_fn, dispatch_fn, has_scales: bool) -> None:
        self._ptr, self._combine_fn, self._dispatch_fn, self._has_scales = ptr, combine_fn, dispatch_fn, has_scales
        self._handle = ptr

    def __del__(self) -> None:
        self.destroy()

    def dispatch(self, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale, indices, bound_m,
                 do_send: bool = True, do_recv: bool = True) -> None:
        """Fill ``out_expert_num_tokens`` (int32 ``[num_local_experts]``), ``out_expert_x`` (``[num_local_experts,
        rows, hidden]``, ``hidden_dim_bytes`` per row) and ``out_expert_x_scale`` (float32, ``hidden_dim_scale_bytes
        / 4`` per row) with the tokens the DP groups route to this rank's experts (``PY:27-59``)."""
        self._dispatch_fn(self._handle, out_expert_num_tokens, out_expert_x, out_expert_x_scale, dp_x, dp_x_scale,
                          indices, bound_m, do_send, do_recv)

    def combine(self, out_tokens, indices, weights, expert_y, bound_m, do_send: bool = True,
                do_recv: bool = True) -> None:
        """``out_tokens[i] = sum_k weights[i, k] * expert_y`` row of ``(indices[i, k], i)`` (``PY:61-81``)."""
        self._combine_fn(self._handle, out_tokens, indices, weights, expert_y, bound_m, do_send, do_recv)

    def destroy(self) -> None:
        if self._ptr is not None:
            self._handle.destroyed = True
            self._ptr = None

    @classmethod
    def intranode(cls, max_num_tokens: int, num_experts: int, experts_per_token: int, rank: int, world_size: int,
                  dp_size: int, hidden_dim: int, hidden_dim_bytes: int, hidden_dim_scale_bytes: int,
                  group_name: str = "default") -> AllToAll:
        """The peer-buffer (CUDA IPC) variant, over the process group registered as ``group_name`` (``PY:88-126``)."""
        args = dict(max_num_tokens=max_num_tokens, num_experts=num_experts, experts_per_token=experts_per_token,
                    rank=rank, world_size=world_size, dp_size=dp_size, hidden_dim=hidden_dim,
                    hidden_dim_bytes=hidden_dim_bytes, hidden_dim_scale_bytes=hidden_dim_scale_bytes)
        handle = _Handle("intranode", _resolve(group_name), args)
        return cls(handle, _combine, _dispatch, handle.has_scales)

    @classmethod
    def internode(cls, max_num_tokens: int, num_experts: int, experts_per_token: int, rank: int, world_size: int,
                  dp_size: int, hidden_dim: int, hidden_dim_bytes: int, hidden_dim_scale_bytes: int) -> AllToAll:
        """The NVSHMEM variant, over all ranks (the default group, as NVSHMEM's PEs) (``PY:128-164``)."""
        args = dict(max_num_tokens=max_num_tokens, num_experts=num_experts, experts_per_token=experts_per_token,
                    rank=rank, world_size=world_size, dp_size=dp_size, hidden_dim=hidden_dim,
                    hidden_dim_bytes=hidden_dim_bytes, hidden_dim_scale_bytes=hidden_dim_scale_bytes)
        handle = _Handle("internode", None, args)
        return cls(handle, _combine, _dispatch, handle.has_scales)


# --- pplx_kernels.nvshmem: what code calls around AllToAll.internode --------------------------
_UID_BYTES = 128  # sizeof(nvshmemx_uniqueid_t)


def _dist():
    import torch.distributed as dist

    return dist


def nvshmem_unique_id_size() -> int:
    return _UID_BYTES


def nvshmem_alloc_empty_unique_id():
    return torch.zeros(_UID_BYTES, dtype=torch.uint8)


def nvshmem_get_unique_id():
    return torch.ones(_UID_BYTES, dtype=torch.uint8)


def nvshmem_init(uid, rank: int, world_size: int) -> int:
    """0, once ``rank`` and ``world_size`` are the default group's (NVSHMEM's PEs are the ranks)."""
    dist = _dist()
    expect(dist.is_initialized() and rank == dist.get_rank() and world_size == dist.get_world_size(),
           "nvshmem_init(uid, rank, world_size) of the default group", "the twin's PEs are the group's ranks",
           f"rank {rank} of {world_size}")
    return 0


def nvshmem_finalize() -> None:
    return None


def nvshmem_my_pe() -> int:
    return _dist().get_rank()


def nvshmem_n_pes() -> int:
    return _dist().get_world_size()


def nvshmem_barrier_all() -> None:
    _dist().barrier()


nvshmem_barrier_all_on_current_stream = nvshmem_barrier_all


def nvshmem_alltoall(dest, source) -> None:
    _dist().all_to_all_single(dest, source)


def nvshmem_malloc(shape, dtype, device):
    return torch.zeros(tuple(shape), dtype=dtype)


nvshmem = types.ModuleType("pplx_kernels.nvshmem", "pplx_kernels.nvshmem of the twin")
for _name in ("nvshmem_unique_id_size", "nvshmem_alloc_empty_unique_id", "nvshmem_get_unique_id", "nvshmem_init",
              "nvshmem_finalize", "nvshmem_my_pe", "nvshmem_n_pes", "nvshmem_barrier_all",
              "nvshmem_barrier_all_on_current_stream", "nvshmem_alltoall", "nvshmem_malloc"):
    setattr(nvshmem, _name, globals()[_name])
all_to_all = types.ModuleType("pplx_kernels.all_to_all", "pplx_kernels.all_to_all of the twin")
all_to_all.AllToAll = AllToAll


def install() -> None:
    """Make ``import pplx_kernels`` (``from pplx_kernels import AllToAll``, ``from pplx_kernels.all_to_all import
    AllToAll``, ``from pplx_kernels.nvshmem import nvshmem_init, ...``) give this twin."""
    sys.modules["pplx_kernels"] = sys.modules[__name__]
    sys.modules["pplx_kernels.all_to_all"] = all_to_all
    sys.modules["pplx_kernels.nvshmem"] = nvshmem
