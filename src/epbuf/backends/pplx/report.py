"""A :class:`~epbuf.plan.Plan` through pplx-kernels: the ``AllToAll`` arguments, every allocation,
records, findings and limits (``report``), and the fast totals sweeps read (``summarize``).

How a plan becomes ``AllToAll`` arguments (vLLM's ``maybe_make_prepare_finalize`` passes the
same names, ``vllm/model_executor/layers/fused_moe/all2all_utils.py``):
``max_num_tokens`` = tokens per rank, ``num_experts`` = routed + redundant experts,
``experts_per_token`` = top-k, ``world_size`` = ranks, ``dp_size`` = ``Plan.dp_group_size``,
``hidden_dim`` = hidden, ``hidden_dim_bytes`` = hidden x 1 (FP8) or 2 (BF16),
``hidden_dim_scale_bytes`` = ``Plan.num_scale_bytes``, else ``ceil(hidden / 128) x 4`` for
FP8 and 0 for BF16. These are the values as the model gives them; vLLM rounds both byte
counts up to 16 (``pplx_hidden_dim_scale_bytes``), which the 16-byte limits show.
``internode`` (NVSHMEM) across nodes, ``intranode`` (CUDA IPC) on one node.
"""

from __future__ import annotations

from functools import lru_cache

from ...errors import InvalidArgumentError, Problem
from ...report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report, Summary
from ...units import GiB, align, ceil_div, format_bytes, format_int
from .._limits import limit_checks, limit_finding
from .limits import limit_rows
from .sizes import (BF16_BYTES, TOKEN_ALIGNMENT, internode_allocations, intranode_allocations, num_dp_groups,
                    num_local_experts, per_token_bytes)
from .versions import INTER, INTRA, PY, UPSTREAM, check_version, src

__all__ = ["KERNEL_TYPES", "FP8_SCALE_BLOCK", "NVSHMEM_DEFAULT_SYMMETRIC_SIZE", "plan_arguments",
           "parse_nvshmem_size", "report", "summarize"]

KERNEL_TYPES = ("intranode", "internode")  # AllToAll.intranode / AllToAll.internode (PY:88-164)
FP8_SCALE_BLOCK = 128  # one float32 scale per 128 hidden elements (block FP8)
NVSHMEM_DEFAULT_SYMMETRIC_SIZE = 1 << 30  # NVSHMEM_SYMMETRIC_SIZE default 1073741824 (docs.nvidia.com/nvshmem/api/gen/env.html)
UINT64_MAX = (1 << 64) - 1


def plan_arguments(plan) -> dict:
    """The ``AllToAll`` keyword arguments for ``plan``, plus ``kernel``.

    Raises:
        InvalidArgumentError: an unknown version or kernel type.
    """
    check_version(plan.version)
    if plan.kernel_type is None:
        kernel = "intranode" if plan.num_ranks <= plan.ranks_per_node else "internode"
    elif isinstance(plan.kernel_type, str) and plan.kernel_type.lower() in KERNEL_TYPES:
        kernel = plan.kernel_type.lower()
    else:
        raise InvalidArgumentError([Problem("kernel_type", plan.kernel_type,
                                            f"pplx-kernels has {' and '.join(KERNEL_TYPES)} ({src(PY, '88-164')})")])
    hidden = plan.hidden
    if plan.num_scale_bytes is not None:
        scale_bytes = plan.num_scale_bytes
    else:
        scale_bytes = ceil_div(hidden, FP8_SCALE_BLOCK) * 4 if plan.use_fp8_dispatch else 0
    return {"kernel": kernel, "max_num_tokens": plan.num_max_tokens_per_rank, "num_experts": plan.num_total_experts,
            "experts_per_token": plan.num_topk, "world_size": plan.num_ranks, "dp_size": plan.dp_group_size,
            "hidden_dim": hidden, "hidden_dim_bytes": hidden * (1 if plan.use_fp8_dispatch else 2),
            "hidden_dim_scale_bytes": scale_bytes}


def _allocations(args: dict) -> list[tuple]:
    fn = internode_allocations if args["kernel"] == "internode" else intranode_allocations
    rows = fn(args["max_num_tokens"], args["num_experts"], args["experts_per_token"], args["world_size"],
              args["dp_size"], args["hidden_dim"], args["hidden_dim_bytes"], args["hidden_dim_scale_bytes"])
    largest = max(n for _, _, n, _, _, _ in rows)
    if largest > UINT64_MAX:
        raise InvalidArgumentError([Problem("num_max_tokens_per_rank", args["max_num_tokens"],
                                            f"a buffer of {largest:,} B is beyond size_t, which the constructor "
                                            f"computes in ({src(INTER, '56-68')}); lower --tokens or --experts")])
    return rows


def _limits(args: dict, ranks_per_node: int) -> tuple:
    return limit_rows(args["kernel"], args["max_num_tokens"], args["num_experts"], args["world_size"], args["dp_size"],
                      args["hidden_dim"], args["hidden_dim_bytes"], args["hidden_dim_scale_bytes"], ranks_per_node)


@lru_cache(maxsize=4096)
def _affine_rows(kernel: str, num_experts: int, experts_per_token: int, world_size: int, dp_size: int,
                 hidden_dim: int, hidden_dim_bytes: int, hidden_dim_scale_bytes: int):
    """Every allocation as ``(name, kind, a, b, used_a, used_b)`` with ``bytes = a x max_num_tokens + b``:
    each size in :mod:`.sizes` is a product with the token count or does not depend on it
    (INTER:34-76, INTRA:35-136). Solved from two evaluations and checked against a third, so the
    sweep path reads the same functions as the report."""
    fn = internode_allocations if kernel == "internode" else intranode_allocations
    points = [fn(t, num_experts, experts_per_token, world_size, dp_size, hidden_dim, hidden_dim_bytes,
                 hidden_dim_scale_bytes) for t in (1, 2, 3)]
    rows = []
    for (name, kind, n1, u1, _, _), (_, _, n2, u2, _, _), (_, _, n3, u3, _, _) in zip(*points):
        a, used_a = n2 - n1, u2 - u1
        b, used_b = n1 - a, u1 - used_a
        if n3 != 3 * a + b or u3 != 3 * used_a + used_b:
            return None
        rows.append((name, kind, a, b, used_a, used_b))
    return tuple(rows)


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding allocation and broken limits, without byte maps or findings,
    in one pass over the allocations (what sweeps call once per configuration)."""
    args = plan_arguments(plan)
    tokens = args["max_num_tokens"]
    affine = _affine_rows(args["kernel"], args["num_experts"], args["experts_per_token"], args["world_size"],
                          args["dp_size"], args["hidden_dim"], args["hidden_dim_bytes"], args["hidden_dim_scale_bytes"])
    if affine is None:
        rows = [(name, kind, n, used) for name, kind, n, used, _, _ in _allocations(args)]
    else:
        rows = [(name, kind, a * tokens + b, ua * tokens + ub) for name, kind, a, b, ua, ub in affine]
    internode = args["kernel"] == "internode"
    first_total = first_needed = local_total = local_needed = 0
    best_first, best_first_n, best_local, best_local_n = "", -1, "", -1
    for name, kind, n, used in rows:
        if n > UINT64_MAX:
            _allocations(args)  # raises the one-line error about size_t
        if kind == "local":
            local_total += n
            local_needed += used
            if n > best_local_n:
                best_local, best_local_n = name, n
            continue
        if internode:
            first_total += n
            first_needed += used
        else:  # the peer buffer is the larger of its two layouts
            first_total, first_needed = max(first_total, n), max(first_needed, used)
        if n > best_first_n:
            best_first, best_first_n = name, n
    broken = tuple(row[0] for row in _limits(args, plan.ranks_per_node) if not row[4])
    # the binding region of the larger buffer (the first on a tie), as summary_of finds it
    return Summary(num_bytes=first_total + local_total, num_bytes_needed=first_needed + local_needed,
                   binding=best_first if first_total >= local_total else best_local, broken=broken)


def parse_nvshmem_size(text: str) -> int:
    """``NVSHMEM_SYMMETRIC_SIZE``: a non-negative number with an optional ``k/m/g/t`` suffix
    (powers of 1024), rounded up; characters after the suffix are ignored
    (``docs.nvidia.com/nvshmem/api/gen/env.html``).

    >>> parse_nvshmem_size("20m"), parse_nvshmem_size("3.1M"), parse_nvshmem_size(".5m")
    (20971520, 3250586, 524288)

    Raises:
        InvalidArgumentError: no number ("an invalid value ... is an error").
    """
    body = text.strip()
    i = 0
    while i < len(body) and (body[i].isdigit() or body[i] == "."):
        i += 1
    number, rest = body[:i], body[i:]
    if not any(ch.isdigit() for ch in number) or number.count(".") > 1:
        raise InvalidArgumentError([Problem("env", f"NVSHMEM_SYMMETRIC_SIZE={text}",
                                            "a number with an optional k, m, g or t suffix, e.g. 8g")])
    factor = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(rest[:1].lower(), 1)
    whole, _, frac = number.partition(".")
    numerator = int(whole or "0") * 10 ** len(frac) + int(frac or "0")
    return ceil_div(numerator * factor, 10 ** len(frac))


def _records(args: dict, use_fp8: bool) -> list[RecordLayout]:
    """The dispatch token (hidden | scales | source token index, padded to 16) and the BF16
    combine token as the kernels write them (``INTRA_DISPATCH:96-150``, ``INTER_DISPATCH:127-141``;
    combine: ``INTER_COMBINE:44,61-90``, ``INTRA_COMBINE:49-50,85-100``)."""
    hb, sb, hidden = args["hidden_dim_bytes"], args["hidden_dim_scale_bytes"], args["hidden_dim"]
    ptb = per_token_bytes(hb, sb)
    dtype = "float8" if use_fp8 else "bfloat16"
    count = hidden if hb in (hidden, 2 * hidden) else hb
    fields = [Field(name="hidden", offset=0, num_bytes=hb, dtype=dtype if count == hidden else "uint8", count=count)]
    if sb:
        fields.append(Field(name="scales", offset=hb, num_bytes=sb, dtype="float32" if sb % 4 == 0 else "uint8",
                            count=sb // 4 if sb % 4 == 0 else sb))
    fields.append(Field(name="src_token_index", offset=hb + sb, num_bytes=4, dtype="uint32", count=1))
    combine_stride = hidden * BF16_BYTES if args["kernel"] == "internode" else align(hidden * BF16_BYTES, TOKEN_ALIGNMENT)
    return [
        RecordLayout.from_fields("dispatch token", ptb, fields, view="dispatch"),
        RecordLayout.from_fields("combine token (BF16)", combine_stride,
                                 [Field(name="hidden", offset=0, num_bytes=hidden * BF16_BYTES, dtype="bfloat16",
                                        count=hidden)], view="combine"),
    ]


def report(plan) -> Report:
    """Every allocation of pplx-kernels' ``AllToAll`` for ``plan``, with the Python wrapper's
    and the constructor's asserts, the kernel limits and the combine buffer's growth.

    Raises:
        InvalidArgumentError: an unknown version or kernel type, a buffer beyond ``size_t``, an
            unreadable ``NVSHMEM_SYMMETRIC_SIZE``.
    """
    args = plan_arguments(plan)
    rows = _allocations(args)
    kernel = args["kernel"]
    tokens, experts, hidden = args["max_num_tokens"], args["num_experts"], args["hidden_dim"]
    local_experts = num_local_experts(experts, args["world_size"])
    groups = num_dp_groups(args["world_size"], args["dp_size"])
    records = _records(args, plan.use_fp8_dispatch)

    def region(name, n, used, formula, source):
        return Region(name=name, num_bytes=n, num_bytes_used=used, formula=formula(), source=source)

    if kernel == "internode":
        shapes = {"xDispatchIn": ((1, tokens), "dispatch token"),
                  "xDispatchOut": ((local_experts * groups, tokens), "dispatch token"),
                  "xCombineOut": ((experts, tokens), "combine token (BF16)")}
        sym = []
        for name, kind, n, used, formula, source in rows:
            if kind == "nvshmem":
                r = region(name, n, used, formula, source)
                if name in shapes:
                    r = r.replace(shape=shapes[name][0], record=shapes[name][1])
                sym.append(r)
        first = Buffer.combine("NVSHMEM symmetric buffers (nvshmem_malloc)", sym, "sum", 1, source=src(INTER, "35-68"))
        title = "pplx-kernels AllToAll.internode (NVSHMEM)"
    else:
        peer = [region(name, n, used, formula, source) for name, kind, n, used, formula, source in rows if kind == "peer"]
        first = Buffer.combine("peer buffers (cudaMalloc, shared by CUDA IPC)", peer, "max", 1, source=src(INTRA, "35-76"))
        title = "pplx-kernels AllToAll.intranode (CUDA IPC)"
    local = [region(name, n, used, formula, source) for name, kind, n, used, formula, source in rows if kind == "local"]
    second = Buffer.combine("local buffers (cudaMalloc)", local, "sum", 1,
                            source=src(INTER, "36,71-76") if kernel == "internode" else src(INTRA, "63-64,100-136"))

    limits = limit_checks(_limits(args, plan.ranks_per_node))
    findings = _findings(plan, args, rows, first, limits)
    quantities = (
        Quantity(name="num_local_experts", value=local_experts, source=src("csrc/all_to_all/all_to_all.cpp", "21")),
        Quantity(name="num_dp_groups", value=groups, source=src("csrc/all_to_all/all_to_all.cpp", "22")),
        Quantity(name="per_token_bytes", value=per_token_bytes(args["hidden_dim_bytes"], args["hidden_dim_scale_bytes"]),
                 unit="B", source=src("csrc/all_to_all/all_to_all.cpp", "34-35")),
        Quantity(name="first_buffer_num_bytes", value=first.num_bytes, unit="B"),
        Quantity(name="local_num_bytes", value=second.num_bytes, unit="B"),
    )
    inputs = {"kernel_type": kernel, "max_num_tokens": tokens, "num_experts": experts,
              "num_redundant_experts": plan.num_redundant_experts, "experts_per_token": args["experts_per_token"],
              "world_size": args["world_size"], "dp_size": args["dp_size"], "hidden_dim": hidden,
              "hidden_dim_bytes": args["hidden_dim_bytes"], "hidden_dim_scale_bytes": args["hidden_dim_scale_bytes"],
              "use_fp8_dispatch": plan.use_fp8_dispatch}
    size_text = plan.env_value("NVSHMEM_SYMMETRIC_SIZE")
    if size_text is not None and kernel == "internode":
        inputs["NVSHMEM_SYMMETRIC_SIZE"] = size_text
    return Report(backend="pplx", title=title, upstream=UPSTREAM, inputs=inputs, buffers=(first, second),
                  records=tuple(records), quantities=quantities, findings=tuple(findings), limits=tuple(limits))


def _findings(plan, args: dict, rows, first: Buffer, limits: list[LimitCheck]) -> list[Finding]:
    out = []
    kernel, tokens, experts, hidden = args["kernel"], args["max_num_tokens"], args["num_experts"], args["hidden_dim"]
    if kernel == "internode":
        sizes = {name: (n, used) for name, _, n, used, _, _ in rows}
        combine_out, combine_out_used = sizes["xCombineOut"]
        total = sum(n for _, _, n, _, _, _ in rows)
        out.append(Finding(
            severity="warning" if combine_out > NVSHMEM_DEFAULT_SYMMETRIC_SIZE else "info", code="pplx.combine-out-blowup",
            message=(f"xCombineOut reserves a float32 slot for every expert of the model and every token: max_num_tokens "
                     f"{format_int(tokens)} x num_experts {experts} x hidden {format_int(hidden)} x 4 = "
                     f"{format_int(combine_out)} B ({format_bytes(combine_out)}, {combine_out / total * 100:.0f} % of the "
                     f"allocation), growing with max_num_tokens x num_experts; a BF16 combine touches "
                     f"{format_int(combine_out_used)} B of it ({src(INTER, '67-68')}; vLLM bounds max_num_tokens with "
                     f"VLLM_MOE_DP_CHUNK_SIZE)"),
            data={"xCombineOut": combine_out, "bf16_used": combine_out_used, "total": total}))
        size_text = plan.env_value("NVSHMEM_SYMMETRIC_SIZE")
        heap = parse_nvshmem_size(size_text) if size_text is not None else NVSHMEM_DEFAULT_SYMMETRIC_SIZE
        if first.num_bytes > heap:
            out.append(Finding(
                severity="warning", code="pplx.nvshmem-heap",
                message=(f"the nvshmem_malloc buffers take {format_int(first.num_bytes)} B ({format_bytes(first.num_bytes)}), "
                         f"more than NVSHMEM_SYMMETRIC_SIZE = {format_int(heap)} B"
                         + (" (the default)" if size_text is None else "")
                         + f"; set NVSHMEM_SYMMETRIC_SIZE to at least {ceil_div(first.num_bytes, GiB)}g unless the "
                           f"NVSHMEM build grows its heap (each nvshmem_malloc is checked: {src(INTER, '39-68')})"),
                data={"nvshmem_num_bytes": first.num_bytes, "symmetric_size": heap}))
    over = first.num_bytes - first.num_bytes_needed
    if over:
        out.append(Finding(
            severity="info", code="pplx.float-combine-reserve",
            message=(f"the combine buffers are sized for float32 expert outputs (\"a bit wider to accommodate all possible "
                     f"data types\", {src(INTER, '63-64')}); a BF16 combine leaves {format_int(over)} B "
                     f"({format_bytes(over)}) of the {first.name} untouched"),
            data={"num_bytes_over_reserved": over}))
    for lim in limits:
        if lim.ok:
            continue
        consequence = {"host": "the AllToAll constructor refuses it (Python assert or PPLX_ASSERT trap)",
                       "kernel": "the dispatch/combine launch fails or its indices wrap",
                       "assumed": "nothing checks it: the kernels read or write out of range"}[lim.enforced]
        hint = ""
        if lim.name.endswith("% 16"):
            hint = (f" (hidden_dim_bytes = {format_int(args['hidden_dim_bytes'])}, hidden_dim_scale_bytes = "
                    f"{format_int(args['hidden_dim_scale_bytes'])}); vLLM rounds both byte counts up to 16 "
                    f"(pplx_hidden_dim_scale_bytes)")
        out.append(limit_finding("pplx.limit", lim, consequence + hint))
    return out
