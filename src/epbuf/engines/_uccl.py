"""UCCL-EP's DeepEP drop-in under vLLM and SGLang (``--uccl-ep``): the engine imports ``deep_ep`` and
gets UCCL-EP's ``Buffer``, so every DeepEP V1 size the engine asks for is UCCL-EP's
(:mod:`epbuf.backends.uccl_ep`) and the ``Buffer`` allocates UCCL-EP's runtime besides.

Upstream ``uccl-project/uccl`` @da914a2 (``ep/``):

* ``ep/deep_ep_wrapper/`` installs a package named ``deep_ep`` whose ``buffer.py`` is
  ``ep/bench/buffer.py`` (a symlink) and whose README builds UCCL-EP with ``PER_EXPERT_BATCHING=1``
  (``ep/deep_ep_wrapper/README.md:6``). UCCL's own scripts run the engines on it with DeepEP's flags:
  ``ep/bench/vllm/launch_vllm.sh:116, 127`` (``--all2all-backend``), ``ep/bench/sglang/common_launch.sh:85-86``
  (``--moe-a2a-backend deepep --deepep-mode normal --deepep-config``), ``Qwen3-30B_uep_intel_nic.sh:44,
  58-60`` (``SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=128``, ``--deepep-mode low_latency``) and
  ``common_deepep_config.sh`` (the ``--deepep-config`` it generates).
* ``Buffer.__init__(group, num_nvl_bytes, num_rdma_bytes, low_latency_mode, num_qps_per_rank,
  allow_nvlink_for_low_latency_mode, allow_mnnvl, explicitly_destroy, is_intranode)``
  (``ep/bench/buffer.py:76-87``): no ``enable_shrink``, which vLLM main's ``DeepEPLLAll2AllManager``
  passes (``vllm/distributed/device_communicators/all2all.py @001430048e81``), so that call raises
  ``TypeError``.
* The C++ ``Buffer`` constructor (``ep/src/uccl_ep.cc:451-470``): ``num_nvl_bytes % 128 == 0 &&
  (num_nvl_bytes <= INT_MAX || num_rdma_bytes == 0)``, ``num_rdma_bytes % 128 == 0 && (low_latency_mode
  || num_rdma_bytes <= INT_MAX)`` (``int64`` on ROCm), ``num_ranks <= max_nvl_peers x NUM_MAX_RDMA_PEERS
  || low_latency_mode``; the rank-topology check is in the backend's limit rows. DeepEP's
  ``num_*_bytes / 16 < INT_MAX`` (the 32 GiB low-latency ceiling) is not there.

The engine arithmetic around the buffers (vLLM's hidden-size rounding, SGLang's recipe) is the
engines' own and unchanged; NVSHMEM (and so ``NVSHMEM_QP_DEPTH``) is not used by UCCL-EP.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Buffer, Finding, Region
from ..units import INT32_MAX, INT64_MAX, format_bytes, format_int
from ._common import limit, limit_findings
from ._knobs import EngineProblem, Knob
from ._libraries import token_recommendations

__all__ = ["KNOBS", "UCCL", "WRAPPER", "enabled", "listed", "check_options", "uccl_plan_kwargs", "uccl_version", "allocations",
           "constructor_limits", "shrink_limit", "runtime_findings", "fixed_nvl", "ll_token_recommendations", "no_v2",
           "limits_and_findings"]

UCCL = "uccl-project/uccl"
WRAPPER = f"{UCCL} ep/deep_ep_wrapper @da914a2"
BUFFER_PY = f"{UCCL} ep/bench/buffer.py:76-87 @da914a2 Buffer.__init__"
CTOR = f"{UCCL} ep/src/uccl_ep.cc:451-470 @da914a2 Buffer constructor"
NUM_MAX_RDMA_PEERS = 20  # ep/include/ep_configs.cuh:6
ALIGN = 128  # NUM_BUFFER_ALIGNMENT_BYTES (ep/include/ep_configs.cuh:9)
NICS = ("ib", "efa", "intel", "host-memory")

KNOBS = (
    Knob(name="--uccl-ep", kind="flag", default=False, source=WRAPPER,
         help="epbuf's flag: the deep_ep the engine imports is UCCL-EP's drop-in (ep/deep_ep_wrapper); "
              "--backend-version then names a UCCL-EP version (v0.1.1, main)"),
    Knob(name="--uccl-nic", kind="choice", default="ib", choices=NICS, source=f"{UCCL} ep/src/uccl_ep.cc:278-315",
         help="epbuf's flag: UCCL-EP's network path: ib (verbs, GPU memory), efa (AWS EFA tables and host atomics), "
              "intel (Intel RDMA NIC), host-memory (NIC cannot register GPU memory)"),
    Knob(name="--uccl-per-expert-batching", kind="bool", default=True, source=f"{UCCL} ep/deep_ep_wrapper/README.md:6",
         default_note="the drop-in's install builds UCCL-EP with PER_EXPERT_BATCHING=1 (ep/deep_ep_wrapper/README.md:6)",
         help="epbuf's flag: UCCL-EP built with PER_EXPERT_BATCHING (low-latency send batches per expert)"),
    Knob(name="--uccl-platform", kind="choice", default="cuda", choices=("cuda", "rocm"),
         help="epbuf's flag: the GPU platform UCCL-EP is built for"),
)


def enabled(ctx) -> bool:
    """Whether ``--uccl-ep`` is set."""
    return bool(ctx.value("--uccl-ep"))


_OWN = frozenset(k.name for k in KNOBS[1:])  # --uccl-nic, ...: what sizes UCCL-EP only


def listed(ctx, setting) -> bool:
    """Whether an engine's settings table lists ``setting``: UCCL-EP's own options size nothing
    without ``--uccl-ep``, so they are listed only with it (:func:`check_options` refuses them set
    without it)."""
    return setting.name not in _OWN or enabled(ctx)


def check_options(ctx) -> None:
    """UCCL-EP's own options given without ``--uccl-ep`` would be read by nothing: refused, as
    ``epbuf hint`` refuses another backend's options.

    Raises:
        InvalidArgumentError: one line per option, naming ``--uccl-ep``.
    """
    if enabled(ctx):
        return
    given = [ctx.setting(name) for name in sorted(_OWN) if ctx.setting(name).source != "default"]
    if given:
        raise InvalidArgumentError([EngineProblem(st.name, st.value, "only read with --uccl-ep: "
                                                                     "add --uccl-ep or remove it") for st in given])


def uccl_version(ctx):
    """The UCCL-EP :class:`~epbuf.backends.uccl_ep.Version` of ``--backend-version`` (``None``: main)."""
    from ..backends import uccl_ep

    return uccl_ep.get_version(ctx.backend_version)


def uccl_plan_kwargs(ctx) -> dict:
    """The :class:`~epbuf.plan.Plan` fields of the UCCL-EP build."""
    return {"platform": ctx.value("--uccl-platform"), "nic": ctx.value("--uccl-nic"),
            "per_expert_batching": bool(ctx.value("--uccl-per-expert-batching")),
            "version": uccl_version(ctx).id}


def allocations(ctx, nvl: Buffer, rdma_regions: list, num_rdma_bytes: int, ranks_per_node: int):
    """``(device buffers, pinned host buffers)`` of one UCCL-EP ``Buffer`` with these sizes:
    the NVL ``cudaMalloc`` (``nvl``'s regions plus barrier signals and pointer tables), the RDMA
    buffer (``max(num_rdma_bytes, 1)``, on the host where the NIC needs it), the 32 MiB workspace,
    UCCL's proxies and runtime, and the pinned host memory — all from ``uccl_ep.memory``."""
    from ..backends.uccl_ep import memory

    rdma_in_host, atomic_in_host, rdma_why, atomic_why = memory.placement(ctx.value("--uccl-platform"),
                                                                         ctx.value("--uccl-nic"))
    in_host = rdma_in_host and num_rdma_bytes > 0  # a zero-byte request never takes the host path (uccl_ep.cc:294-296)
    rdma = memory.rdma_allocation(rdma_regions, num_rdma_bytes, in_host, rdma_why)
    device = [memory.nvl_allocation(nvl, ranks_per_node)] if nvl.num_bytes else []
    device += ([rdma] if not in_host else []) + [memory.workspace_allocation(),
                                                  memory.device_runtime_allocation(ranks_per_node, atomic_in_host,
                                                                                   atomic_why)]
    host = ([rdma] if in_host else []) + [memory.host_allocation(atomic_in_host, atomic_why)]
    return tuple(device), tuple(host)


def constructor_limits(ctx, num_nvl_bytes: int, num_rdma_bytes: int, num_ranks: int, ranks_per_node: int,
                       low_latency_mode: bool) -> list:
    """The size checks of UCCL-EP's ``Buffer`` constructor (``CTOR``) for the sizes the engine passes;
    ``INT_MAX`` on CUDA, ``int64`` on ROCm."""
    rocm = ctx.value("--uccl-platform") == "rocm"
    big, name = (INT64_MAX, "INT64_MAX") if rocm else (INT32_MAX, "INT_MAX")
    out = [limit("num_nvl_bytes % 128 (UCCL-EP Buffer)", num_nvl_bytes % ALIGN, "==", 0, CTOR),
           limit("num_rdma_bytes % 128 (UCCL-EP Buffer)", num_rdma_bytes % ALIGN, "==", 0, CTOR)]
    if num_rdma_bytes:
        out.append(limit(f"num_nvl_bytes <= {name} (UCCL-EP Buffer, num_rdma_bytes > 0)", num_nvl_bytes, "<=", big,
                         CTOR))
    if not low_latency_mode:
        out += [limit(f"num_rdma_bytes <= {name} (UCCL-EP Buffer, normal mode)", num_rdma_bytes, "<=", big, CTOR),
                limit("num_ranks <= max_nvl_peers x NUM_MAX_RDMA_PEERS (UCCL-EP Buffer, normal mode)", num_ranks, "<=",
                      ranks_per_node * NUM_MAX_RDMA_PEERS, CTOR)]
    return out


#: uccl-project/uccl PR #1043 ("[EP] Accept vLLM enable_shrink compatibility argument", merged 2026-08-28,
#: after da914a2): the drop-in's ``Buffer`` takes ``enable_shrink``; ``False`` initializes as before,
#: ``True`` raises (rank shrinking is not implemented). The PyPI release v0.1.1 predates it.
SHRINK_PR = "uccl-project/uccl PR #1043 (merged 2026-08-28)"


def shrink_limit(ctx) -> list:
    """vLLM main passes ``enable_shrink`` (``False`` unless fault tolerance) to ``deep_ep.Buffer`` in
    low-latency mode. UCCL-EP's ``Buffer.__init__`` took no such parameter (``BUFFER_PY``): ``TypeError``
    at start-up with ``--backend-version v0.1.1``; since :data:`SHRINK_PR` (UCCL-EP main) ``False`` is
    accepted."""
    if ctx.version == "dp-chunk" or uccl_version(ctx).id != "v0.1.1":
        return []
    return [limit("keyword arguments vLLM passes that UCCL-EP's Buffer.__init__ lacks (enable_shrink)", 1, "==", 0,
                  f"{BUFFER_PY}; vllm-project/vllm vllm/distributed/device_communicators/all2all.py @001430048e81 "
                  f"DeepEPLLAll2AllManager._make_all2all_kwargs passes enable_shrink; accepted since {SHRINK_PR}",
                  enforced="host")]


def runtime_findings(prefix: str, ctx, host_buffers, device_buffers) -> list[Finding]:
    """What the drop-in changes for the engine: the pinned host memory and UCCL's device runtime,
    listed apart from the DeepEP-sized buffers."""
    host = sum(b.num_bytes for b in host_buffers)
    extra = sum(b.num_bytes for b in device_buffers if b.name in ("workspace", "UCCL proxies and runtime"))
    return [Finding(
        severity="info", code=f"{prefix}.uccl-ep",
        message=f"--uccl-ep: the engine's deep_ep is UCCL-EP's drop-in ({WRAPPER}); besides the DeepEP-sized buffers "
                f"its Buffer takes {format_int(extra)} B of device memory (32 MiB workspace, proxies and runtime) and pins "
                f"{format_int(host)} B ({format_bytes(host)}) of host memory per GPU (report host_buffers, not in the "
                f"device total); NIC path {ctx.value('--uccl-nic')}, platform {ctx.value('--uccl-platform')}, "
                f"PER_EXPERT_BATCHING={int(bool(ctx.value('--uccl-per-expert-batching')))}",
        data={"host_num_bytes": host, "uccl_device_runtime_num_bytes": extra})]


def fixed_nvl(num_bytes: int, formula: str, source: str, needed: int | None = None) -> Buffer:
    """The NVL request as one region (the engine fixes it), for :func:`allocations`."""
    return Buffer.combine("NVL buffer", [Region(name="num_nvl_bytes", num_bytes=num_bytes,
                                                num_bytes_used=num_bytes if needed is None else min(needed, num_bytes),
                                                formula=formula, source=source)], "sum", 1, source=source)


def ll_token_recommendations(ctx, knob: str, fixed_bytes: int, plan, *, other_rdma_bytes: int = 0,
                             cap: int | None = None, cap_text: str = "", load_text: str = ""):
    """Recommendations for the low-latency token count with UCCL-EP: the allocation at ``T`` is
    ``fixed_bytes`` (NVL) + ``max(other_rdma_bytes, UCCL-EP's hint)`` + workspace and runtime, from
    ``uccl_ep.summarize_low_latency``; values keep ``num_ranks x T % 4 == 0`` (the TMA check)."""
    from ..backends import uccl_ep

    def summary(t: int):
        return uccl_ep.summarize_low_latency(plan.replace(num_max_tokens_per_rank=t))

    from ..backends.uccl_ep import memory

    rdma_in_host = memory.placement(plan.platform, plan.nic)[0]

    def total(t: int) -> int:
        s = summary(t)  # the RDMA buffer (unless pinned host memory), workspace and runtime
        if rdma_in_host:
            return fixed_bytes + s.num_bytes
        hint = uccl_ep.get_low_latency_rdma_size_hint(t, plan.hidden, plan.num_ranks, plan.num_total_experts,
                                                      per_expert_batching=plan.per_expert_batching)
        return fixed_bytes + s.num_bytes - hint + max(hint, other_rdma_bytes)

    def broken(t: int) -> tuple:
        return tuple(n for n in summary(t).broken if "% 4 (TMA)" not in n)

    return token_recommendations(ctx, knob, total, broken, what="UCCL-EP's low-latency Buffer", cap=cap,
                                 cap_text=cap_text, load_text=load_text,
                                 step_ok=lambda t: plan.num_ranks * t % 4 == 0)


def no_v2(backend: str):
    """UCCL-EP's drop-in has DeepEP V1's ``Buffer`` only."""
    return InvalidArgumentError([EngineProblem(
        "--uccl-ep", True, f"UCCL-EP is DeepEP V1's Buffer, not DeepEP V2's ElasticBuffer ({backend}); "
                           "drop --uccl-ep or pick a V1 backend")])


def limits_and_findings(prefix: str, own: list) -> list[Finding]:
    """``error`` findings for the broken engine-level checks."""
    return limit_findings(prefix, own, {
        "keyword arguments vLLM passes that UCCL-EP's Buffer.__init__ lacks (enable_shrink)":
            "vLLM's Buffer(...) call raises TypeError at start-up with UCCL-EP v0.1.1; use UCCL-EP main (PR #1043 "
            "accepts enable_shrink=False), vLLM before enable_shrink or the deepep_high_throughput backend",
    })

