"""Helpers shared by the engines that allocate DeepEP buffers (vLLM, SGLang, Megatron-LM):
the ``Buffer`` constructor's size checks and device allocations besides the hinted bytes, the
low-latency QP-depth check, and exact recommendations over the low-latency and V2 token counts. Every size comes from
:mod:`epbuf.backends.deepep_v1` / :mod:`epbuf.backends.deepep_v2`.

DeepEP citations are ``deepseek-ai/DeepEP path:line @dd758ca`` (2026-07-14) unless stated.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Buffer, Finding, LimitCheck
from ..units import INT32_MAX, format_bytes, format_int
from .._search import largest_true
from ._common import EngineContext, limit
from ._report import Recommendation

DEEPEP = "deepseek-ai/DeepEP"
CTOR = f"{DEEPEP} csrc/legacy/buffer.hpp:107-116 @dd758ca Buffer constructor"
#: ``NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS``: ranks of a normal-mode Buffer (buffer.hpp:113).
NORMAL_MAX_RANKS = 8 * 20
#: ``Buffer.__init__``: ``self.nvshmem_qp_depth = int(os.environ.get('NVSHMEM_QP_DEPTH', '1024'))``
#: (deep_ep/buffers/legacy.py:113); low_latency_dispatch/combine assert
#: ``nvshmem_qp_depth >= (num_max_dispatch_tokens_per_rank + 1) * 2`` (:609, :665), since
#: d981409 ("Check `QP_DEPTH` for low latency kernels", #430, 2025-09-25).
QP_DEPTH_SOURCE = f"{DEEPEP} deep_ep/buffers/legacy.py:113, 609, 665 @dd758ca (from d981409, 2025-09-25)"
QP_DEPTH_SINCE = "2025-09-25"
DEFAULT_QP_DEPTH = 1024


#: The constructor's rank check (buffer.hpp:114), in every mode; the deepep-ll report carries it
#: for low-latency buffers.
RANKS_LIMIT = "num_ranks < 8 or num_ranks % 8 == 0"
RANKS_SOURCE = f"{DEEPEP} csrc/legacy/buffer.hpp:114 @dd758ca Buffer constructor"
RANKS_CONSEQUENCE = "DeepEP's Buffer constructor asserts it, so the engine fails at start-up; use fewer than 8 ranks " \
                    "or a multiple of 8"


def constructor_limits(num_nvl_bytes: int, num_rdma_bytes: int, num_ranks: int, low_latency_mode: bool) -> list[LimitCheck]:
    """The size and rank checks of DeepEP V1's ``Buffer`` constructor (buffer.hpp:107-116). The
    sizes are whatever the engine computed; a check that fails is a limit with ``ok=False``
    (an ``error`` finding through :func:`~epbuf.engines._common.limit_findings`)."""
    out = [limit("num_nvl_bytes / 16 < INT_MAX", num_nvl_bytes // 16, "<", INT32_MAX, CTOR)]
    if num_rdma_bytes:
        out += [limit("num_nvl_bytes <= INT_MAX (num_rdma_bytes > 0)", num_nvl_bytes, "<=", INT32_MAX, CTOR),
                limit("num_rdma_bytes / 16 < INT_MAX", num_rdma_bytes // 16, "<", INT32_MAX, CTOR)]
        if not low_latency_mode:
            out += [limit("num_rdma_bytes <= INT_MAX (normal mode)", num_rdma_bytes, "<=", INT32_MAX, CTOR),
                    limit("num_ranks > 8 (num_rdma_bytes > 0, normal mode)", num_ranks, ">", 8, CTOR)]
    if not low_latency_mode:
        out.append(limit("num_ranks <= 8 x NUM_MAX_RDMA_PEERS (normal mode)", num_ranks, "<=", NORMAL_MAX_RANKS, CTOR))
    out.append(limit(RANKS_LIMIT, num_ranks % 8 if num_ranks >= 8 else 0, "==", 0, RANKS_SOURCE))
    return out


def smem_limits(version, num_ranks: int, num_sms: int, device=None) -> list[LimitCheck]:
    """The dynamic shared memory of the normal-mode TMA launches at ``num_sms`` (``version``: a
    ``deepep_v1.Version``), against ``device``'s opt-in maximum per block (a ``DeviceSpec``; ``None``:
    sm_90's 232,448 B): :mod:`epbuf.backends.deepep_v1.smem`, where ``cached_notify``'s grows with
    ``num_sms``."""
    from ..backends._limits import limit_checks
    from ..backends.deepep_v1.smem import normal_launches, smem_rows

    return limit_checks(smem_rows(version, device, normal_launches(num_ranks > 8, {"config": num_sms})))


def constructor_allocations(version, num_nvl_bytes: int) -> list[Buffer]:
    """What one DeepEP V1 ``Buffer`` (``version``, a ``deepep_v1.Version``) allocates on the
    device besides ``num_nvl_bytes`` and ``num_rdma_bytes``: the NVL metadata tables appended to
    the NVL allocation when ``num_nvl_bytes > 0`` (``BUF:132-135``) and the 32 MiB workspace
    (``BUF:148-150``), from :mod:`epbuf.backends.deepep_v1.memory`. The engine's "NVL buffer" row
    stays ``num_nvl_bytes`` (the engine's request); the metadata is its own row here."""
    from ..backends.deepep_v1 import memory

    out = []
    if num_nvl_bytes > 0:
        meta = memory.nvl_metadata(version)
        out.append(Buffer.combine("NVL metadata", meta, "sum", 1,
                                  source=version.cite("BUF", "132-135", "appended to the NVL allocation")))
    return out + [memory.workspace_allocation(version)]


def constructor_num_bytes(version, num_nvl_bytes: int) -> int:
    """Bytes of :func:`constructor_allocations`: 33,554,432 (+ 160, or 131,200 before ``8da2d7b``,
    when ``num_nvl_bytes > 0``); what every total and budget search of an engine adds per Buffer."""
    return sum(b.num_bytes for b in constructor_allocations(version, num_nvl_bytes))


def without_low_latency_duplicates(limits: list[LimitCheck]) -> list[LimitCheck]:
    """``limits`` minus the constructor checks a ``deepep_v1.report_low_latency`` report carries
    itself (the RDMA size ceiling and the rank check), so a report lists each check once."""
    return [lim for lim in limits if not lim.name.startswith("num_rdma_bytes / 16") and lim.name != RANKS_LIMIT]


def qp_depth_applies(version) -> bool:
    """Whether DeepEP ``version`` (a ``deepep_v1.Version``) has the QP-depth assertion."""
    return version.date >= QP_DEPTH_SINCE


def qp_depth_limit(depth: int, tokens: int) -> LimitCheck:
    return limit("NVSHMEM_QP_DEPTH >= (num_max_dispatch_tokens_per_rank + 1) x 2", depth, ">=", (tokens + 1) * 2,
                 QP_DEPTH_SOURCE, enforced="host")


def qp_depth_recommendation(depth: int, tokens: int) -> Recommendation | None:
    need = (tokens + 1) * 2
    if depth >= need:
        return None
    return Recommendation(setting="NVSHMEM_QP_DEPTH", value=need, goal="fix",
                          message=f"DeepEP's low-latency dispatch/combine assert NVSHMEM_QP_DEPTH >= (T + 1) x 2 = "
                                  f"{format_int(need)} for T = {format_int(tokens)} (default depth {DEFAULT_QP_DEPTH} "
                                  f"covers T <= {DEFAULT_QP_DEPTH // 2 - 1}; {QP_DEPTH_SOURCE})")


def tma_ok(num_ranks: int, tokens: int) -> bool:
    """``num_ranks * num_max_dispatch_tokens_per_rank % 4 == 0`` — the low-latency dispatch check
    ``deepep_v1.report_low_latency`` reports as a limit ("TMA")."""
    return (num_ranks * tokens) % 4 == 0


def ll_recommendations(ctx: EngineContext, knob: str, *, hidden: int, num_ranks: int, num_experts: int,
                       fixed_bytes: int, other_rdma_bytes: int, version, engine_cap: int | None = None,
                       engine_cap_text: str = "", extra_load_text: str = "") -> list[Recommendation]:
    """``limit`` / ``load`` / ``budget`` recommendations for the token count ``knob`` of a
    DeepEP V1 low-latency buffer. The allocation for ``T`` tokens is ``fixed_bytes +
    max(other_rdma_bytes, get_low_latency_rdma_size_hint(T, hidden, num_ranks, num_experts))``,
    non-decreasing in ``T``, so the searches are exact. Values keep ``num_ranks * T % 4 == 0``."""
    from ..backends import deepep_v1

    def total(t: int) -> int | None:
        """The allocation for ``t`` tokens; ``None`` where upstream cannot compute the hint."""
        try:
            return fixed_bytes + max(other_rdma_bytes, deepep_v1.get_low_latency_rdma_size_hint(
                t, hidden, num_ranks, num_experts, version=version.id))
        except InvalidArgumentError:
            return None

    def down(t: int | None) -> int | None:
        while t is not None and t > 0 and not tma_ok(num_ranks, t):
            t -= 1
        return t or None

    ceiling = deepep_v1.max_low_latency_tokens(hidden, num_ranks, num_experts, version=version.id) \
        if version.int4_count_check else None
    caps = [c for c in (ceiling, engine_cap) if c is not None]
    # LowLatencyLayout multiplies num_experts x T in C++ int (csrc/legacy/config.hpp:146, 154):
    # beyond that no version can size the buffer, so no search goes there.
    cap = min(caps + [INT32_MAX // max(1, num_experts)])
    recs = []
    if ceiling is not None or engine_cap is not None:
        best = down(cap)
        if ceiling is not None and (engine_cap is None or ceiling <= engine_cap):
            why = (f"the largest {knob} whose low-latency RDMA buffer DeepEP's Buffer accepts: exact, from the "
                   f"assertion num_rdma_bytes / 16 < INT_MAX ({DEEPEP} csrc/legacy/buffer.hpp:112 @dd758ca)")
        else:
            why = f"the largest {knob} allowed: {engine_cap_text}" + (
                f" (DeepEP's 32 GiB ceiling alone would allow {format_int(ceiling)})" if ceiling is not None else "")
        recs.append(Recommendation(setting=knob, value=best, goal="limit", num_bytes=total(best) if best else None,
                                   message=why))
    if ctx.load is not None:
        t = ctx.load
        while not tma_ok(num_ranks, t):
            t += 1
        if t > cap:
            why = (f"the 32 GiB ceiling allows {format_int(ceiling)}" if ceiling is not None and ceiling < t
                   else engine_cap_text)
            recs.append(Recommendation(setting=knob, value=None, goal="load",
                                       message=f"no {knob} serves {format_int(ctx.load)} tokens per rank in one call: "
                                               f"{why}"))
        else:
            recs.append(Recommendation(setting=knob, value=t, goal="load", num_bytes=total(t),
                                       message=f"the smallest {knob} that dispatches {format_int(ctx.load)} tokens per "
                                               f"rank in one call{extra_load_text}"))
    if ctx.budget is not None:
        best = down(largest_true(1, cap, lambda t: (total(t) or ctx.budget + 1) <= ctx.budget))
        recs.append(Recommendation(
            setting=knob, value=best, goal="budget", num_bytes=total(best) if best else None,
            message=(f"the largest {knob} whose buffers fit --budget {format_bytes(ctx.budget)} (exact search over "
                     "DeepEP's hint)") if best else
                    f"nothing fits --budget {format_bytes(ctx.budget)}: the other buffers take "
                    f"{format_bytes(total(1))} with one token"))
    return recs


def ceiling_finding(code: str, knob: str, tokens: int, hint: int, hidden: int, num_ranks: int, num_experts: int,
                    ceiling: int | None, redundant: int, engine_cap: int | None = None) -> list[Finding]:
    """The ``error`` finding for a low-latency buffer above DeepEP's 32 GiB ceiling. The value it tells
    to set is the one :func:`ll_recommendations` recommends (``goal="limit"``): the ceiling, lowered to
    ``engine_cap`` and to the nearest ``num_ranks x T % 4 == 0``, written as it is typed."""
    if ceiling is None or tokens <= ceiling:
        return []
    best = min(ceiling, engine_cap) if engine_cap is not None else ceiling
    while best > 1 and not tma_ok(num_ranks, best):
        best -= 1
    return [Finding(
        severity="error", code=code,
        message=f"the low-latency RDMA buffer for T = {format_int(tokens)} is {format_bytes(hint)}: DeepEP's Buffer "
                f"asserts num_rdma_bytes / 16 < INT_MAX (< 32 GiB, {DEEPEP} csrc/legacy/buffer.hpp:112 @dd758ca); "
                f"the largest {knob} for hidden {hidden}, {num_ranks} ranks, {num_experts} experts is {ceiling}"
                + (" (EPLB's redundant experts count here, cf. vLLM issue #57894)" if redundant else "")
                + f": set {knob}={best}",
        data={"tokens": tokens, "num_rdma_bytes": hint, "max_tokens": ceiling, "recommended": best})]


def without_backend_ceiling(findings) -> list[Finding]:
    """The backend's findings minus its generic finding for the 32 GiB limit (the engine's
    own :func:`ceiling_finding` says the same with the flag to set)."""
    return [f for f in findings
            if not (f.code.endswith(".limit") and str(f.data.get("limit", "")).startswith("num_rdma_bytes / sizeof"))]


def v2_recommendations(ctx: EngineContext, knob: str, *, num_ranks: int, num_nvl_ranks: int, hidden: int,
                       num_topk: int, use_fp8_dispatch: bool, allow_hybrid_mode: bool,
                       allow_multiple_reduction: bool, generation: str, cap: int | None = None) -> list[Recommendation]:
    """``load`` / ``budget`` recommendations for DeepEP V2's ``num_max_tokens_per_rank``: the
    allocation is ``num_workspace_bytes + calculate_buffer_size(...)``, non-decreasing in the
    token count; counts whose int32 arithmetic upstream would overflow do not fit."""
    from ..backends import deepep_v2

    workspace = deepep_v2.num_workspace_bytes(generation)

    def total(t: int) -> int | None:
        try:
            return workspace + deepep_v2.calculate_buffer_size(
                num_ranks, num_nvl_ranks, t, hidden, num_topk, use_fp8_dispatch, allow_hybrid_mode,
                allow_multiple_reduction, version=generation)
        except InvalidArgumentError:
            return None

    recs = []
    hi = cap if cap is not None else INT32_MAX
    if ctx.load is not None:
        n = total(ctx.load)
        recs.append(Recommendation(setting=knob, value=ctx.load if n is not None and ctx.load <= hi else None,
                                   goal="load", num_bytes=n,
                                   message=f"ElasticBuffer(num_max_tokens_per_rank = {format_int(ctx.load)}) holds the "
                                           "load in one call" if n is not None else
                                           f"{format_int(ctx.load)} tokens per rank overflow DeepEP V2's int32 sizes"))
    if ctx.budget is not None:
        best = largest_true(1, hi, lambda t: (total(t) or ctx.budget + 1) <= ctx.budget)
        recs.append(Recommendation(setting=knob, value=best, goal="budget",
                                   num_bytes=total(best) if best is not None else None,
                                   message=f"the largest {knob} whose ElasticBuffer and workspace fit --budget "
                                           f"{format_bytes(ctx.budget)} (exact search over calculate_buffer_size)"))
    return recs
