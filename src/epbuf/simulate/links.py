"""Link presets for the time estimate: per-rank scale-up and scale-out bandwidth and latency.

Bandwidths are per rank and per direction, in GB/s = 10^9 bytes/s (as vendors and
DeepEP's tables count). Each preset names its public source; where a source gives no
latency, :data:`DEFAULT_LATENCY_US` is used and the source says so.

>>> get_links("h800").scaleup_gbps, get_links("h800").scaleout_gbps
(160.0, 50.0)
>>> get_links("H200-SXM").name
'h200'
"""

from __future__ import annotations

from ..errors import InvalidArgumentError, Problem, UnknownNameError
from .records import LinkSpec

__all__ = ["LINKS", "NETWORKS", "DEFAULT_LATENCY_US", "link_names", "get_links", "custom_links"]

_AIC = "github.com/ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/systems/"
_DEEPEP_LEGACY = "github.com/deepseek-ai/DeepEP@dd758ca docs/legacy.md:17, 26"

#: Latency added per link that carries bytes, when a preset's source gives none:
#: aiconfigurator's ``p2p_latency: 0.00001  # 10us`` (an "nonofficial correction based on
#: observations", h100_sxm.yaml / h200_sxm.yaml / b200_sxm.yaml ``node`` section).
DEFAULT_LATENCY_US = 10.0
#: aiconfigurator gb200.yaml ``inter_rack_latency: 0.000005  # 5us typical for InfiniBand``.
IB_LATENCY_US = 5.0

_IB = f"RDMA latency {IB_LATENCY_US:g} us: {_AIC}gb200.yaml inter_rack_latency"
_P2P = f"scale-up latency {DEFAULT_LATENCY_US:g} us: {_AIC}h100_sxm.yaml p2p_latency"


def _l(**fields) -> LinkSpec:
    return LinkSpec(**fields)


_PRESETS = (
    _l(name="h800", title="NVIDIA H800 (NVLink ~160 GB/s) + CX7 400 Gb/s", scaleup="NVLink", scaleup_gbps=160.0,
       scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=50.0, scaleout_latency_us=IB_LATENCY_US,
       source=f"{_DEEPEP_LEGACY}: 'H800 (~160 GB/s NVLink maximum bandwidth) ... CX7 InfiniBand 400 Gb/s RDMA "
              f"network card (~50 GB/s maximum bandwidth)'; {_P2P}; {_IB}"),
    _l(name="h100", title="NVIDIA H100 SXM (NVLink 4) + CX7 400 Gb/s", scaleup="NVLink", scaleup_gbps=450.0,
       scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=50.0, scaleout_latency_us=IB_LATENCY_US,
       source=f"{_AIC}h100_sxm.yaml node: intra_node_bw 450e9 B/s per GPU single direction, inter_node_bw 50e9 "
              f"(1:1 CX7 NDR 400Gb/s), p2p_latency 10 us; {_IB}"),
    _l(name="h200", title="NVIDIA H200 SXM (NVLink 4) + CX7 400 Gb/s", scaleup="NVLink", scaleup_gbps=450.0,
       scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=50.0, scaleout_latency_us=IB_LATENCY_US,
       source=f"{_AIC}h200_sxm.yaml node: intra_node_bw 450e9, inter_node_bw 50e9 (CX7 NDR 400Gb/s), "
              f"p2p_latency 10 us; {_IB}"),
    _l(name="b200", title="NVIDIA B200 (NVLink 5) + CX8 800 Gb/s", scaleup="NVLink", scaleup_gbps=900.0,
       scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=100.0, scaleout_latency_us=IB_LATENCY_US,
       source=f"{_AIC}b200_sxm.yaml node: intra_node_bw 900e9, inter_node_bw 100e9 (CX8 XDR 800Gb/s), "
              f"p2p_latency 10 us; {_IB}"),
    _l(name="b300", title="NVIDIA B300 (NVLink 5) + CX8 800 Gb/s", scaleup="NVLink", scaleup_gbps=900.0,
       scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=100.0, scaleout_latency_us=IB_LATENCY_US,
       source=f"{_AIC}b300_sxm.yaml node: intra_node_bw 900e9 (1.8 TB/s NVLink bidir / 2), inter_node_bw 100e9; "
              f"p2p_latency 10 us; {_IB}"),
    _l(name="gb200", title="NVIDIA GB200 NVL72 (NVLink 5, 72 per domain) + CX8 800 Gb/s", scaleup="NVLink",
       scaleup_gbps=900.0, scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=100.0,
       scaleout_latency_us=IB_LATENCY_US, scaleup_domain=72,
       source=f"{_AIC}gb200.yaml node: inter_node_bw (NVLink within rack) 900e9, inter_rack_bw 100e9 "
              f"(CX8 XDR 800Gb/s), p2p_latency 10 us, inter_rack_latency 5 us"),
    _l(name="a100-80gb", title="NVIDIA A100 SXM (NVLink 3) + CX6 200 Gb/s", scaleup="NVLink", scaleup_gbps=300.0,
       scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RDMA", scaleout_gbps=25.0, scaleout_latency_us=IB_LATENCY_US,
       source=f"{_AIC}a100_sxm.yaml node: intra_node_bw 300e9, inter_node_bw 25e9 (1:1 CX6), p2p_latency 10 us; {_IB}"),
    _l(name="ascend-910b", title="Huawei Ascend 910B (Atlas A2, HCCS full mesh of 8)", scaleup="HCCS",
       scaleup_gbps=196.0, scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RoCE", scaleout_gbps=None,
       scaleout_latency_us=IB_LATENCY_US, scaleup_peer_gbps=28.0,
       source="arthurchiao.art 'GPU notes' §3.1 and table §4: 910B HCCS peer-to-peer (no switch), "
              "bi-directional GPU-to-GPU max 56 GB/s, one-to-many total 392 GB/s: per direction 28 GB/s per "
              f"peer, 196 GB/s in all; no public per-NPU RoCE figure found: give --rdma-gbps; {_P2P}"),
    _l(name="ascend-a3", title="Huawei Ascend 910C die (Atlas A3 / CloudMatrix384, UB) + RoCE", scaleup="UB",
       scaleup_gbps=196.0, scaleup_latency_us=DEFAULT_LATENCY_US, scaleout="RoCE", scaleout_gbps=25.0,
       scaleout_latency_us=IB_LATENCY_US, scaleup_domain=768,
       source="Zuo et al., 'Serving Large Language Models on Huawei CloudMatrix384' (arXiv:2506.12708, 2025) "
              "§3, as summarized in public write-ups: UB plane 'over 392 GB/s of unidirectional bandwidth' per "
              "910C, RDMA plane 'up to 400 Gbps of unidirectional' per NPU, 384 NPUs in one UB domain; a rank is "
              "one of the 910C's two dies (epbuf devices ascend-a3), so each die gets half: 196 GB/s UB, "
              f"25 GB/s RoCE, 768 ranks per domain; {_P2P}; {_IB}"),
)

#: Preset name -> :class:`LinkSpec`. Keys follow ``epbuf devices`` names where the device exists there.
LINKS: dict[str, LinkSpec] = {spec.name: spec for spec in _PRESETS}

#: ``--network`` presets: the scale-out link alone, ``(title, GB/s, latency us, source)``.
NETWORKS: dict[str, tuple[str, float, float, str]] = {
    "cx7": ("NVIDIA ConnectX-7 400 Gb/s", 50.0, IB_LATENCY_US,
            f"{_DEEPEP_LEGACY}: 'CX7 InfiniBand 400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)'; {_IB}"),
    "cx8": ("NVIDIA ConnectX-8 800 Gb/s", 100.0, IB_LATENCY_US,
            f"{_AIC}b200_sxm.yaml inter_node_bw 100e9 '1:1 CX8 XDR 800Gb/s'; {_IB}"),
}


def link_names() -> tuple[str, ...]:
    return tuple(LINKS)


def get_links(name: str) -> LinkSpec:
    """The preset ``name``, also accepting ``epbuf devices`` names and aliases (``h200-sxm``,
    ``a2``, ``910c`` ...)."""
    key = name.strip().lower()
    if key in LINKS:
        return LINKS[key]
    try:
        from ..devices import get_device

        device = get_device(name).name
    except Exception:  # noqa: BLE001 - any unknown name ends in the one error below
        device = ""
    if device in LINKS:
        return LINKS[device]
    if device == "a100-40gb":
        return LINKS["a100-80gb"]
    raise UnknownNameError(f"--device (device) = {name!r}: no link preset; known: {', '.join(LINKS)} "
                           "(or give --nvlink-gbps / --rdma-gbps / --latency-us)")


def custom_links(base: LinkSpec, *, nvlink_gbps: float | None = None, rdma_gbps: float | None = None,
                 latency_us: float | None = None, network: str | None = None) -> LinkSpec:
    """``base`` with the given numbers replaced; ``network`` replaces the scale-out link with
    a :data:`NETWORKS` preset.

    >>> custom_links(get_links("h800"), rdma_gbps=25).scaleout_gbps
    25.0
    """
    import math

    def number(value: object) -> bool:  # inf would model a link without cost: 0 ms, 0.0 GB/s in the accounting
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        try:
            return math.isfinite(float(value))
        except OverflowError:  # an int beyond float range
            return False

    problems = []
    for argument, value in (("nvlink_gbps", nvlink_gbps), ("rdma_gbps", rdma_gbps)):
        if value is not None and not (number(value) and value > 0):
            problems.append(Problem(argument, value, "allowed a finite number > 0 (GB/s, one direction)"))
    if latency_us is not None and not (number(latency_us) and latency_us >= 0):
        problems.append(Problem("latency_us", latency_us, "allowed a finite number >= 0 (microseconds)"))
    if network is not None and network.lower() not in NETWORKS:
        problems.append(Problem("network", network, f"known: {', '.join(NETWORKS)}"))
    if problems:
        raise InvalidArgumentError(problems)
    spec = base
    changes: dict = {}
    notes = []
    if network is not None:
        title, gbps, lat, src = NETWORKS[network.lower()]
        changes.update(scaleout=f"RDMA ({title})", scaleout_gbps=gbps, scaleout_latency_us=lat)
        notes.append(f"--network {network}: {src}")
    if nvlink_gbps is not None:
        changes["scaleup_gbps"] = float(nvlink_gbps)
        notes.append(f"--nvlink-gbps {nvlink_gbps:g}")
    if rdma_gbps is not None:
        changes["scaleout_gbps"] = float(rdma_gbps)
        notes.append(f"--rdma-gbps {rdma_gbps:g}")
    if latency_us is not None:
        changes.update(scaleup_latency_us=float(latency_us), scaleout_latency_us=float(latency_us))
        notes.append(f"--latency-us {latency_us:g}")
    if not changes:
        return spec
    return spec.replace(title=f"{spec.title}, with {', '.join(notes)}", source=f"{spec.source}; {'; '.join(notes)}",
                        **changes)
