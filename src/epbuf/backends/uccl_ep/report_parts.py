"""What both UCCL-EP reports share: the upstream line, the plan's platform and NIC, the allocations every plan makes (workspace, proxies and runtime, pinned
host memory) and the findings about them. Limit rows become checks and findings through
:mod:`epbuf.backends._limits`, as in every backend."""

from __future__ import annotations

from ...report import Buffer, Finding
from ...units import format_bytes, format_int
from . import _deepep
from .memory import device_runtime_allocation, host_allocation, placement, workspace_allocation
from .versions import Version, cite

__all__ = ["CFG", "upstream_line", "platform_of", "nic_of", "runtime_buffers",
           "host_memory_finding", "dropped_checks_finding"]

CFG = "include/ep_config.hpp"


def upstream_line(v: Version) -> str:
    return f"UCCL-EP {v.id} @ {v.commit} ({v.date})"


def platform_of(plan) -> str:
    return plan.platform or "cuda"


def nic_of(plan) -> str:
    return plan.nic or "ib"


def runtime_buffers(ranks_per_node: int, platform: str, nic: str) -> tuple[Buffer, Buffer, Buffer]:
    """``(workspace, UCCL proxies and runtime, pinned host memory)``: the same for every plan
    with this topology and build."""
    _, atomic_in_host, _, atomic_why = placement(platform, nic)
    return (workspace_allocation(), device_runtime_allocation(ranks_per_node, atomic_in_host, atomic_why),
            host_allocation(atomic_in_host, atomic_why))


def host_memory_finding(prefix: str, host_buffers: tuple[Buffer, ...], runtime: Buffer) -> Finding:
    host = sum(b.num_bytes for b in host_buffers)
    names = [r.name for b in host_buffers for r in b.regions]
    extra = (", the atomic buffer" if "atomic buffer" in names else "") + (
        ", the RDMA buffer" if any(b.name.startswith("RDMA buffer") for b in host_buffers) else "")
    return Finding(
        severity="info", code=f"{prefix}.host-memory",
        message=f"per GPU, UCCL-EP also pins {format_int(host)} B ({format_bytes(host)}) of host memory (proxy FIFO "
                f"triggers and tails, receive counters{extra}); "
                f"it is listed under host memory and not counted in the device total. UCCL-only device memory "
                f"(atomic buffer when on the device, FIFO heads, D2H handles, IPC table): "
                f"{format_int(runtime.num_bytes)} B",
        data={"host_num_bytes": host, "uccl_device_runtime_num_bytes": runtime.num_bytes})


def dropped_checks_finding(prefix: str, low_latency: bool, hint: int) -> Finding:
    ceiling = _deepep.deepep_ll_max_bytes()
    text = (f"UCCL-EP's Buffer drops two of DeepEP V1's constructor checks: num_*_bytes / sizeof(int4) < INT_MAX "
            f"(DeepEP 4623c67; at most {format_int(ceiling)} B) and num_rdma_bytes > 0 => internode or low-latency "
            f"(commented out, {cite('src/uccl_ep.cc', '471-472')}); it checks the topology against LOCAL_WORLD_SIZE")
    if low_latency and hint > ceiling:
        text += f"; this {format_int(hint)} B buffer is accepted by UCCL-EP but DeepEP V1 main would reject it"
    return Finding(severity="info", code=f"{prefix}.dropped-checks", message=text,
                   data={"deepep_max_num_bytes": ceiling, "num_rdma_bytes": hint})
