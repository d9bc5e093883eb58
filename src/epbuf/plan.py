"""A :class:`Plan` (model shape + topology + tokens + dtype) and the backend-agnostic entry points.

>>> from epbuf.plan import Plan, report
>>> plan = Plan(hidden=7168, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096)
>>> report(plan, "ascend").buffer("EP buffer").num_bytes
354418688

A plan holds every knob any backend reads; each backend uses the ones it needs and
lists them in ``Report.inputs``. Generic checks (positive integers, a topology that
divides evenly) happen here; each backend checks its own upstream limits.
"""

from __future__ import annotations


from ._record import Record
from .errors import Checker, UnknownNameError
from .report import Report, Summary, summary_of
from .units import INT32_MAX

__all__ = ["Plan", "report", "summarize", "summarizer", "compare", "BACKENDS", "backend_names", "get_backend"]


PLATFORMS = ("cuda", "rocm")  # Plan.platform values
NICS = ("ib", "efa", "intel", "host-memory")  # Plan.nic values (UCCL-EP)


class Plan(Record):
    """The inputs of a buffer-size question.

    Attributes:
        hidden: model hidden size (elements per token).
        num_topk: experts each token is routed to (0 = unspecified; backends that accept
            it reserve their maximum, 32).
        num_experts: routed experts of the model (logical experts).
        num_ranks: expert-parallel size (devices sharing the buffer).
        num_max_tokens_per_rank: the most tokens one rank dispatches in one call.
        use_fp8_dispatch: FP8 dispatch with scale factors (``False``: BF16).
        num_ranks_per_node: scale-up domain size (GPUs/NPUs per node or NVLink domain);
            ``None`` means ``min(num_ranks, 8)``.
        scaleup_is_nvlink: whether the scale-up domain is NVLink (DeepEP V2's logical domain).
        allow_hybrid_mode: DeepEP V2 ``allow_hybrid_mode`` (scale-out via RDMA when more than one node).
        allow_multiple_reduction: DeepEP V2 ``allow_multiple_reduction`` for combine.
        num_redundant_experts: EPLB redundant experts added to ``num_experts`` (what the
            engine passes to the library as its expert count).
        num_sf_packs: Ascend only: scale-factor packs a real FP8 dispatch sends per token
            (``None``: ``ceil(hidden / 128) * 2``, one fp32 scale per 128 elements viewed as two int16).
        version: the upstream formula generation: a version id or a commit id, short or full
            (backend-specific; ``None`` = newest; ``epbuf versions`` lists them).
        num_sms: DeepEP V1 ``Buffer.num_sms`` for the default configs (``None`` = upstream default).
        num_topk_idx_bits: width of ``topk_idx_t`` in DeepEP builds: 64 (default) or 32 (built with
            ``-DEP_NUM_TOPK_IDX_BITS=32``); ``None`` = the backend's default. DeepEP-Ascend stores
            int64 indices and rejects 32.
        deepep_config: DeepEP V1 ``Config`` to size with instead of the default dispatch and
            combine configs (an ``epbuf.backends.deepep_v1.Config``; ``None`` = the defaults).
            UCCL-EP uses the same ``Config``.
        platform: the GPU software platform the library is built for: ``"cuda"`` (NVIDIA) or
            ``"rocm"`` (AMD); ``None`` = ``"cuda"``. UCCL-EP: ROCm builds check sizes against
            int64 instead of int, have 64-lane warps and no TMA, and allocate every buffer on the
            device.
        nic: UCCL-EP's network path: ``"ib"`` (verbs NIC that registers GPU memory and has
            native atomics; the default), ``"efa"`` (AWS EFA build: the EFA default configs,
            atomic buffer in pinned host memory), ``"intel"`` (Intel RDMA NIC build: DMA-BUF
            registration, atomic buffer in pinned host memory), ``"host-memory"`` (a verbs NIC
            that cannot register GPU memory: the RDMA and atomic buffers fall back to pinned host
            memory); ``None`` = ``"ib"``.
        per_expert_batching: UCCL-EP built with ``PER_EXPERT_BATCHING=1`` (per-expert batched
            low-latency sends: a larger send buffer and ``num_ranks`` squared counters).
        device: a device preset (:func:`epbuf.devices.get_device` name or alias) whose per-block
            shared memory bounds DeepEP V1's and UCCL-EP's TMA kernel launches (``--device``);
            ``None`` = the sm_90 build's 227 KiB. Sizes never depend on it.
        model: a label for reports (preset name), not used in arithmetic.

        The fields below serve the non-DeepEP libraries (MORI-EP, pplx-kernels); DeepEP
        backends ignore them.

        kernel_type: the library's kernel family: MORI-EP ``KernelType`` (``IntraNode``,
            ``IntraNodeLL``, ``InterNode``, ``InterNodeV1``, ``InterNodeV1LL``, ``AsyncLL``) or
            pplx-kernels ``intranode`` / ``internode``; ``None`` = chosen from the topology
            (one scale-up domain: intranode, else internode / ``InterNodeV1``).
        max_total_recv_tokens: cap on the tokens one rank receives per dispatch, summed over
            all source ranks (MORI-EP ``max_total_recv_tokens``); 0 = no cap.
        quant_type: combine quantization (MORI-EP ``quant_type``: ``none``, ``fp8_direct_cast``,
            ``fp8_blockwise``, ``fp4_blockwise``).
        dp_group_size: ranks that hold the same tokens, i.e. one data-parallel group (the
            attention TP size; pplx-kernels ``dp_size``); 1 = every rank has its own tokens.
        num_scale_bytes: bytes of dispatch scale factors per token (MORI-EP ``scale_dim x
            scale_type_size``, pplx-kernels ``hidden_dim_scale_bytes``); ``None`` = FP8: one
            float32 scale per 128 hidden elements (``ceil(hidden / 128) x 4``), BF16: 0.
        max_token_type_size: bytes of the widest token element type the buffers must hold
            (MORI-EP ``max_token_type_size``); ``None`` = 2 (BF16 activations, what vLLM passes).
        env: environment variables the library reads, as ``(name, value)`` pairs (MORI-EP
            ``MORI_SHMEM_HEAP_SIZE``, ``MORI_SHMEM_MODE``, ``MORI_EP_COMM``,
            ``MORI_FP8_COMBINE_SCALE_DIM``; pplx-kernels ``NVSHMEM_SYMMETRIC_SIZE``); others are ignored.
    """

    hidden: int
    num_topk: int
    num_experts: int
    num_ranks: int
    num_max_tokens_per_rank: int
    use_fp8_dispatch: bool = True
    num_ranks_per_node: int | None = None
    scaleup_is_nvlink: bool = True
    allow_hybrid_mode: bool = True
    allow_multiple_reduction: bool = True
    num_redundant_experts: int = 0
    num_sf_packs: int | None = None
    version: str | None = None
    num_sms: int | None = None
    num_topk_idx_bits: int | None = None
    deepep_config: object | None = None
    platform: str | None = None
    nic: str | None = None
    per_expert_batching: bool = False
    device: str | None = None
    model: str = ""
    # --- non-DeepEP libraries (MORI-EP, pplx-kernels) ---
    kernel_type: str | None = None
    max_total_recv_tokens: int = 0
    quant_type: str = "none"
    dp_group_size: int = 1
    num_scale_bytes: int | None = None
    max_token_type_size: int | None = None
    env: tuple = ()

    def __post_init__(self) -> None:
        c = Checker()
        c.int_range("hidden", self.hidden, 1, INT32_MAX, "a positive int32, as upstream stores it")
        c.int_range("num_topk", self.num_topk, 0, None, "0 means unspecified")
        c.int_range("num_experts", self.num_experts, 1, INT32_MAX)
        ranks_ok = c.int_range("num_ranks", self.num_ranks, 1, INT32_MAX)
        c.int_range("num_max_tokens_per_rank", self.num_max_tokens_per_rank, 1, INT32_MAX, "a positive int32")
        c.int_range("num_redundant_experts", self.num_redundant_experts, 0, INT32_MAX)
        if self.num_sf_packs is not None:
            c.int_range("num_sf_packs", self.num_sf_packs, 0, INT32_MAX)
        if self.num_sms is not None:
            c.int_range("num_sms", self.num_sms, 2, None, "DeepEP V1 uses num_sms / 2 channels")
        if self.num_topk_idx_bits is not None and self.num_topk_idx_bits not in (32, 64):
            c.add("num_topk_idx_bits", self.num_topk_idx_bits, "allowed 32 or 64 (the width of topk_idx_t)")
        if self.num_ranks_per_node is not None:
            per_node_ok = c.int_range("num_ranks_per_node", self.num_ranks_per_node, 1, INT32_MAX)
            if ranks_ok and per_node_ok and self.num_ranks % self.num_ranks_per_node != 0:
                c.add(
                    "num_ranks_per_node",
                    self.num_ranks_per_node,
                    f"must divide num_ranks = {self.num_ranks} (ranks = nodes x ranks per node)",
                )
        if self.device is not None:
            from .errors import EpbufError

            try:
                from .devices import get_device

                get_device(self.device) if isinstance(self.device, str) else None
            except EpbufError as error:
                c.add("device", self.device, str(error).split(": ", 1)[-1])
            if not isinstance(self.device, str):
                c.add("device", self.device, "a device preset name (epbuf devices lists them)")
        if not isinstance(self.model, str):
            c.add("model", self.model, "must be a string (a label for reports)")
        if self.platform is not None and self.platform not in PLATFORMS:
            c.add("platform", self.platform, "allowed " + ", ".join(PLATFORMS))
        if self.nic is not None and self.nic not in NICS:
            c.add("nic", self.nic, "allowed " + ", ".join(NICS))
        # --- non-DeepEP libraries: generic checks here, names and limits in the backends ---
        if self.kernel_type is not None and (not isinstance(self.kernel_type, str) or not self.kernel_type):
            c.add("kernel_type", self.kernel_type, "a kernel family name (e.g. IntraNode, InterNodeV1, internode)")
        c.int_range("max_total_recv_tokens", self.max_total_recv_tokens, 0, INT32_MAX, "0 means no cap")
        if not isinstance(self.quant_type, str) or not self.quant_type:
            c.add("quant_type", self.quant_type, "a quantization name (none, fp8_direct_cast, fp8_blockwise, fp4_blockwise)")
        c.int_range("dp_group_size", self.dp_group_size, 1, INT32_MAX)
        if self.num_scale_bytes is not None:
            c.int_range("num_scale_bytes", self.num_scale_bytes, 0, INT32_MAX)
        if self.max_token_type_size is not None:
            c.int_range("max_token_type_size", self.max_token_type_size, 1, 8, "bytes of one token element")
        if not isinstance(self.env, tuple) or not all(
                isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair) for pair in self.env):
            c.add("env", self.env, "a tuple of (NAME, VALUE) string pairs")
        for name in ("use_fp8_dispatch", "scaleup_is_nvlink", "allow_hybrid_mode", "allow_multiple_reduction",
                     "per_expert_batching"):
            if not isinstance(getattr(self, name), bool):
                c.add(name, getattr(self, name), "must be True or False")
        c.raise_if_any()
        for name in c.subclassed:  # an int subclass counts as the int it is (issue 21)
            object.__setattr__(self, name, int(getattr(self, name)))

    @property
    def ranks_per_node(self) -> int:
        """Scale-up domain size after the default (``min(num_ranks, 8)``)."""
        if self.num_ranks_per_node is not None:
            return self.num_ranks_per_node
        return min(self.num_ranks, 8)

    @property
    def num_nodes(self) -> int:
        return self.num_ranks // self.ranks_per_node

    @property
    def num_total_experts(self) -> int:
        """Experts the library sees: routed plus EPLB redundant."""
        return self.num_experts + self.num_redundant_experts

    def env_value(self, name: str) -> str | None:
        """The value of environment variable ``name`` in :attr:`env` (the last one wins), or ``None``."""
        value = None
        for key, val in self.env:
            if key == name:
                value = val
        return value



# name -> (module, function, one-line description). Modules are imported on first use
# so that a query for one backend never pays for the others.
BACKENDS: dict[str, tuple[str, str, str]] = {
    "ascend": ("epbuf.backends.ascend", "report", "DeepEP-Ascend EPBuffer (Huawei Ascend NPUs)"),
    "deepep-v2": ("epbuf.backends.deepep_v2", "report", "DeepEP V2 ElasticBuffer / EPBuffer (NVIDIA)"),
    "deepep-v1": ("epbuf.backends.deepep_v1", "report_normal", "DeepEP V1 legacy normal mode: NVL + RDMA buffers (NVIDIA)"),
    "deepep-ll": ("epbuf.backends.deepep_v1", "report_low_latency", "DeepEP V1 legacy low-latency RDMA buffer (NVIDIA)"),
    "uccl-ep": ("epbuf.backends.uccl_ep", "report_normal", "UCCL-EP normal mode: NVL + RDMA buffers, proxies (NVIDIA/AMD, any NIC)"),
    "uccl-ll": ("epbuf.backends.uccl_ep", "report_low_latency", "UCCL-EP low-latency RDMA buffer, proxies (NVIDIA/AMD, any NIC)"),
    "mori-ep": ("epbuf.backends.mori_ep", "report", "MORI-EP EpDispatchCombineHandle (AMD ROCm)"),
    "pplx": ("epbuf.backends.pplx", "report", "pplx-kernels AllToAll, intranode (CUDA IPC) or internode (NVSHMEM)"),
}


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def get_backend(name: str):
    """The ``report(plan) -> Report`` function of backend ``name``."""
    try:
        module_name, function, _ = BACKENDS[name]
    except (KeyError, TypeError):  # TypeError: an unhashable name, e.g. a list
        raise UnknownNameError(
            f"--backend (backend) = {name!r}: unknown; choose one of {', '.join(BACKENDS)}"
        ) from None
    from ._lazy import module

    return getattr(module(module_name), function)


def report(plan: Plan, backend: str = "ascend") -> Report:
    """Size every buffer ``backend`` allocates for ``plan``.

    Raises:
        UnknownNameError: ``backend`` is not one of :func:`backend_names`.
        InvalidArgumentError: the plan breaks one of the backend's upstream limits.
    """
    if not isinstance(plan, Plan):
        from .errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")])
    rep = get_backend(backend)(plan)
    if plan.model and "model" not in rep.inputs:
        rep = rep.replace(inputs={"model": plan.model, **rep.inputs})
    return rep


def backend_versions(backend: str) -> tuple[str | None, dict[str, str]]:
    """``(default id, {id: description})`` of the upstream formula generations a backend
    supports through ``Plan.version``; backends with one generation give
    ``(None, {"": description})``."""
    get_backend(backend)
    from ._lazy import module as load

    module = load(BACKENDS[backend][0])
    versions = getattr(module, "VERSIONS", None)
    if versions:
        return getattr(module, "DEFAULT_VERSION", None), dict(versions)
    return None, {"": getattr(module, "UPSTREAM", "")}


def summarizer(backend: str):
    """The fastest ``plan -> Summary`` function of ``backend``: the backend module's
    ``summarize`` (or ``summarize_<mode>`` for ``report_<mode>``) when it has one, else
    the summary of the full report."""
    try:
        module_name, function, _ = BACKENDS[backend]
    except (KeyError, TypeError):
        get_backend(backend)  # raises the one-line UnknownNameError
        raise
    from ._lazy import module as load

    module = load(module_name)
    name = "summarize" if function == "report" else "summarize_" + function.removeprefix("report_")
    fast = getattr(module, name, None)
    if fast is not None:
        return fast
    full = getattr(module, function)
    return lambda plan: summary_of(full(plan))


def summarize(plan: Plan, backend: str = "ascend") -> Summary:
    """Totals, binding region and broken limits of ``report(plan, backend)``, without byte maps."""
    return summarizer(backend)(plan)


def compare(plan: Plan, backends: tuple[str, ...] | list[str] | None = None) -> dict[str, Report | Exception]:
    """Reports of several backends for the same plan; a backend whose limits the plan
    breaks maps to its :class:`~epbuf.errors.EpbufError` instead of a report."""
    from .errors import EpbufError

    results: dict[str, Report | Exception] = {}
    names = backends if backends else backend_names()
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        from .errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("backends", backends, "must be a list of backend names, e.g. "
                                            f"{list(backend_names())[:2]}")])
    for name in names:
        try:
            results[name] = report(plan, name)
        except EpbufError as error:
            results[name] = error
    return results
