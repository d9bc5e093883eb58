"""What every engine recipe reads and the building blocks it composes: the
:class:`EngineContext` (shape, topology, resolved settings), fixed and max-of-hints buffers,
limits and their error findings, the topology of the EP group.

Nothing here knows a formula; the recipes in the sibling modules compose backend
functions (``epbuf.backends.*``) and these helpers.
"""

from __future__ import annotations

from .._record import Record
from ..errors import InvalidArgumentError, Problem
from ..report import Buffer, Finding, LimitCheck, Region
from ..units import MiB, format_bytes
from ._knobs import EngineProblem, Setting

__all__ = ["EngineContext", "fixed_buffer", "max_buffer", "limit", "limit_findings", "mib_ceil", "topology",
           "budget_findings"]


class EngineContext(Record):
    """Everything a recipe reads: the model shape, the topology, the resolved settings."""

    engine: str
    version: str
    hidden: int
    num_topk: int
    num_experts: int
    num_shared_experts: int
    model: str
    num_ranks: int | None
    num_nodes: int | None
    num_ranks_per_node: int | None
    settings: dict
    base_settings: tuple
    backend_version: str | None = None
    load: int | None = None
    budget: int | None = None
    device_name: str = ""
    device_num_bytes: int | None = None
    #: The device preset (:class:`~epbuf.devices.DeviceSpec`) when one was named: its per-block shared
    #: memory bounds DeepEP's kernel launches. ``None`` for none or a bare ``(name, bytes)``.
    device: object = None
    #: How the user spelled the EP size (``--ranks``, an engine alias such as ``--ep-size``, or
    #: ``num_ranks`` from Python), for the settings table and error lines.
    ranks_flag: str = "num_ranks"
    #: The model's notes (weight quantization, e.g. ``block 128x128``), ``""`` without a model.
    model_notes: str = ""
    #: The model's weights are block-FP8 128 x 128 (:attr:`epbuf.models.ModelSpec.block_fp8`).
    model_block_fp8: bool = False
    #: The settings were read from a pasted launch line: a flag the line leaves out is the engine's default.
    launch: bool = False

    def value(self, name: str) -> object:
        return self.settings[name].value

    def setting(self, name: str) -> Setting:
        return self.settings[name]


# --- building blocks of engine reports --------------------------------------------------
def fixed_buffer(name: str, num_bytes: int, formula: str, source: str, *, needed: int | None = None,
                 region: str = "") -> Buffer:
    """An allocation whose size the engine fixes (an environment variable in MiB, an HCCL
    window): one region; ``needed`` is what the library's own sizing says it needs."""
    used = num_bytes if needed is None else needed
    return Buffer.combine(name, [Region(name=region or name, num_bytes=num_bytes, num_bytes_used=used,
                                        formula=formula, source=source)], "sum", 1, source=source)


def max_buffer(name: str, regions: list[Region], source: str) -> Buffer:
    """An allocation sized as the max of candidate hints (``num_bytes = max(...)``, as the
    engines write it): regions with rule ``"max"``, no further rounding (the hints are aligned)."""
    return Buffer.combine(name, regions, "max", 1, source=source)


def limit(name: str, value: int, relation: str, bound: int, source: str, enforced: str = "host") -> LimitCheck:
    """A :class:`LimitCheck` whose ``ok`` is computed from ``relation``."""
    ok = {"<=": value <= bound, "<": value < bound, ">=": value >= bound, ">": value > bound,
          "==": value == bound}[relation]
    return LimitCheck(name=name, value=value, relation=relation, bound=bound, ok=ok, source=source,
                      enforced=enforced)


def limit_findings(prefix: str, limits: list[LimitCheck], what: dict | None = None) -> list[Finding]:
    """One ``error`` finding per broken limit; ``what`` maps a limit name to the consequence."""
    out = []
    for lim in limits:
        if lim.ok:
            continue
        consequence = (what or {}).get(lim.name, "upstream refuses this configuration")
        out.append(Finding(severity="error", code=f"{prefix}.limit",
                           message=f"{lim.name}: {lim.value:,} breaks {lim.relation} {lim.bound:,} "
                                   f"({lim.source}); {consequence}",
                           data={"limit": lim.name, "value": lim.value, "bound": lim.bound}))
    return out


def mib_ceil(num_bytes: int) -> int:
    """Whole MiB that hold ``num_bytes``."""
    return -(-num_bytes // MiB)


def topology(ctx: EngineContext, num_ranks: int) -> tuple[int, int]:
    """``(ranks_per_node, num_nodes)`` for ``num_ranks`` from ``--gpus-per-node`` / ``--nodes``
    (default ``min(num_ranks, 8)`` per node).

    Raises:
        InvalidArgumentError: a node size or count that does not divide the ranks, or both given
            and disagreeing.
    """
    per_node, nodes = ctx.num_ranks_per_node, ctx.num_nodes
    problems: list[Problem] = []
    if per_node is not None and num_ranks % per_node:
        problems.append(EngineProblem("--gpus-per-node", per_node, f"must divide the EP size {num_ranks}"))
    if nodes is not None and num_ranks % nodes:
        problems.append(EngineProblem("--nodes", nodes, f"must divide the EP size {num_ranks}"))
    if not problems and per_node is not None and nodes is not None and per_node * nodes != num_ranks:
        problems.append(EngineProblem("--nodes", nodes, f"--nodes x --gpus-per-node = {nodes * per_node} "
                                                        f"must equal the EP size {num_ranks}"))
    if problems:
        raise InvalidArgumentError(problems)
    if per_node is None:
        per_node = num_ranks // nodes if nodes is not None else min(num_ranks, 8)
    return per_node, num_ranks // per_node


def budget_findings(prefix: str, ctx: EngineContext, total: int, per: str = "GPU") -> list[Finding]:
    """An ``error`` when ``total`` bytes per device exceed ``--budget`` (as ``epbuf hint`` says it)
    or the device's memory."""
    out = []
    if ctx.budget is not None and total > ctx.budget:
        out.append(Finding(severity="error", code=f"{prefix}.over-budget",
                           message=f"the buffers take {format_bytes(total)} per {per}, above --budget "
                                   f"{format_bytes(ctx.budget)}", data={"num_bytes": total, "budget": ctx.budget}))
    if ctx.device_num_bytes is not None and total > ctx.device_num_bytes:
        out.append(Finding(severity="error", code=f"{prefix}.exceeds-device",
                           message=f"the buffers take {format_bytes(total)} per {per}, more than the "
                                   f"{format_bytes(ctx.device_num_bytes)} of {ctx.device_name}",
                           data={"num_bytes": total, "device_num_bytes": ctx.device_num_bytes}))
    return out
