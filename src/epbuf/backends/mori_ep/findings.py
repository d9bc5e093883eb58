"""The findings of a MORI-EP report that need more than one number: broken limits, the heap or
CCO arena (exhausted or how much of it the handle carves), and the receive cap."""

from __future__ import annotations

from ...report import Finding, LimitCheck
from ...units import MiB, align, ceil_div, format_bytes, format_int
from .config import KERNEL_TYPES, EpDispatchCombineConfig
from .env import ShmemSettings
from .sizes import (CCO_ALIGNMENT, HEAP_ALIGNMENT, INTERNAL_SYNC_NUM_BYTES, cco_arena_num_bytes, cco_arena_usage,
                    first_overflow, handle_allocations)
from .versions import ASYNC_LL, CPP, HDR, INTER_V1, INTRA_LL, SHMEM_H, SHMEM_INIT, SHMEM_MEM, VA, src

__all__ = ["limit_findings", "memory_findings", "cap_findings"]


def limit_findings(limits: list[LimitCheck]) -> list[Finding]:
    out = []
    for lim in limits:
        if lim.ok or lim.name.startswith(("symmetric heap usage", "CCO arena usage")):
            continue  # the memory limits have findings of their own, with the numbers
        consequence = {"kernel": "the kernel's device assertion fails",
                       "host": "the call is refused on the host",
                       "assumed": "nothing checks it: the kernels index out of range"}[lim.enforced]
        if lim.relation == "in":
            broken = f"{lim.name}: kernel_type {KERNEL_TYPES[lim.value]} is not one of them"
        else:
            broken = f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)}"
        out.append(Finding(severity="error", code="mori-ep.limit",
                           message=f"{broken} ({lim.source}); {consequence}",
                           data={"limit": lim.name, "value": lim.value, "bound": lim.bound, "enforced": lim.enforced}))
    return out


def memory_findings(config, settings: ShmemSettings, symmetric, usage: int, capacity: int, rows) -> list[Finding]:
    out = []
    if settings.comm == "cco":
        if usage > capacity:
            failing = first_overflow(symmetric, capacity, 0, CCO_ALIGNMENT)
            uncapped = _uncapped_symmetric(config, settings.blockwise_scale_dim, rows)
            why = ""
            if uncapped:
                why = (f": the arena is sized from the capped receive count (6 x MaxNumTokensToRecv "
                       f"{format_int(config.max_num_tokens_to_recv())} x hidden x max_token_type_size + 256 MiB), but "
                       f"{len(uncapped)} symmetric buffers are not capped and take "
                       f"{format_int(sum(align(n, CCO_ALIGNMENT) for _, n in uncapped))} B")
            out.append(Finding(
                severity="error", code="mori-ep.cco-arena-exhausted",
                message=(f"the symmetric buffers need {format_int(usage)} B of the {format_int(capacity)} B CCO arena{why}; "
                         f"MallocSymm throws 'cco arena exhausted' at {failing} ({src(CPP, '211-233')})"),
                data={"usage": usage, "arena": capacity, "failing_buffer": failing}))
        else:
            out.append(Finding(
                severity="info", code="mori-ep.cco-arena",
                message=(f"MORI_EP_COMM=cco: the handle registers one CCO window of {format_int(capacity)} B "
                         f"({format_bytes(capacity)}, 6 x MaxNumTokensToRecv x hidden x max_token_type_size + 256 MiB) and "
                         f"carves {format_int(usage)} B of it ({src(CPP, '211-235')})"),
                data={"usage": usage, "arena": capacity}))
        return out
    if settings.shmem_mode != "static_heap":
        return out
    text_issue = (f"upstream's out-of-heap message says 'Increase via MORI_SHMEM_HEAP_SIZE (default: 2GB)' "
                  f"({src(SHMEM_MEM, '44-47')}) but the default is 4 GiB ({src(SHMEM_H, '61')}; {VA}:200-203 says 4GB)")
    if usage > capacity:
        failing = first_overflow(symmetric, capacity, INTERNAL_SYNC_NUM_BYTES, HEAP_ALIGNMENT)
        need_mib = ceil_div(usage, MiB)
        out.append(Finding(
            severity="error", code="mori-ep.heap-exhausted",
            message=(f"the symmetric buffers need {format_int(usage)} B ({format_bytes(usage)}) of the "
                     f"{format_int(capacity)} B ({format_bytes(capacity)}) MORI-shmem static heap: the allocation of "
                     f"{failing} fails ({src(SHMEM_MEM, '35-49')}, then hipMemset in MallocSymm, {CPP}:198-199); set "
                     f"MORI_SHMEM_HEAP_SIZE={need_mib}M or more (upstream's own message points at a 2GB default that "
                     f"is really 4 GiB: mori-ep.heap-error-text)"),
            data={"usage": usage, "heap": capacity, "failing_buffer": failing, "min_heap_mib": need_mib}))
    else:
        out.append(Finding(
            severity="info", code="mori-ep.static-heap",
            message=(f"MORI-shmem reserves its static heap whole at init: {format_int(capacity)} B ({format_bytes(capacity)}) "
                     f"per GPU (MORI_SHMEM_HEAP_SIZE, {src(SHMEM_INIT, '219-240')}); this handle carves "
                     f"{format_int(usage)} B of it ({usage / capacity * 100:.1f} %): MORI_SHMEM_HEAP_SIZE="
                     f"{ceil_div(usage, MiB)}M is the smallest heap that holds it"),
            data={"usage": usage, "heap": capacity}))
    out.append(Finding(severity="info", code="mori-ep.heap-error-text", message=text_issue,
                       data={"message_default": "2GB", "default_num_bytes": 4 << 30}))
    return out


def cap_findings(config, requested_cap: int, rows, scale_dim: int, cco_usage: int | None) -> list[Finding]:
    out = []
    send, recv = config.max_num_tokens_to_send(), config.max_num_tokens_to_recv()
    if requested_cap > send:
        out.append(Finding(
            severity="info", code="mori-ep.recv-cap-clamped",
            message=(f"max_total_recv_tokens = {format_int(requested_cap)} exceeds the worst case world_size x "
                     f"max_num_inp_token_per_rank = {format_int(send)}: the handle clamps it ({src(CPP, '153-159')})"),
            data={"requested": requested_cap, "clamped": send}))
    if config.max_total_recv_tokens == 0 or recv == send:
        return out
    out.append(Finding(
        severity="warning", code="mori-ep.recv-cap",
        message=(f"max_total_recv_tokens = {format_int(config.max_total_recv_tokens)} sizes the receive buffers for "
                 f"MaxNumTokensToRecv = {config.world_size} x min(ceil({format_int(config.max_total_recv_tokens)} / "
                 f"{config.world_size}), {format_int(config.max_num_inp_token_per_rank)}) = {format_int(recv)} tokens "
                 f"instead of the worst case {format_int(send)}; a dispatch that delivers more to one rank trips the "
                 f"kernels' assert ({INTRA_LL}:190, {ASYNC_LL}:342, {INTER_V1}:56; {src(HDR, '160-166')})"),
        data={"max_num_tokens_to_recv": recv, "worst_case": send}))
    uncapped = _uncapped_symmetric(config, scale_dim, rows)
    arena = cco_arena_num_bytes(config)
    need = cco_arena_usage([n for name, sym, n, _, _ in rows if sym])
    if cco_usage is not None and need > arena:
        return out  # the cco-arena-exhausted error already says it, with these numbers
    big = sorted(uncapped, key=lambda item: -item[1])[:3]
    out.append(Finding(
        severity="warning" if need > arena else "info", code="mori-ep.arena-sizing-disagreement",
        message=(f"upstream sizes the CCO arena (MORI_EP_COMM=cco, the gfx125x default) from the capped receive count: "
                 f"6 x {format_int(recv)} x {config.hidden_dim} x {config.max_token_type_size} + 256 MiB = "
                 f"{format_int(arena)} B, but {len(uncapped)} symmetric buffers are not capped ("
                 + ", ".join(f"{name} {format_int(n)} B" for name, n in big)
                 + f"{', ...' if len(uncapped) > 3 else ''}; {format_int(sum(align(n, CCO_ALIGNMENT) for _, n in uncapped))} B "
                 f"in all): the handle needs {format_int(need)} B of the arena, "
                 + (f"{format_int(need - arena)} B more than it has, so MallocSymm would throw 'cco arena exhausted'"
                    if need > arena else f"{format_int(arena - need)} B to spare")
                 + f" ({src(CPP, '211-233,303-354')})"),
        data={"arena": arena, "need": need, "uncapped": dict(uncapped)}))
    return out


def _uncapped_symmetric(config: EpDispatchCombineConfig, scale_dim: int, rows: list[tuple]) -> list[tuple[str, int]]:
    """The symmetric buffers whose size does not shrink with the receive cap."""
    if config.max_total_recv_tokens == 0:
        return []
    free = {name: n for name, sym, n, _, _ in handle_allocations(config.replace(max_total_recv_tokens=0), scale_dim)
            if sym}
    return [(name, n) for name, sym, n, _, _ in rows if sym and free.get(name) == n]
