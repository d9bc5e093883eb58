"""Accelerator memory presets (``--device``) and ``--hbm`` capacities.

``DeviceSpec.num_bytes`` is the total memory *as the driver reports it* (``nvidia-smi``
``memory.total`` in MiB, ``npu-smi`` HBM total in MB = MiB, ``rocm-smi`` VRAM bytes), not
the marketing label: the labels mix conventions ("141 GB" H200 = 140.40 GiB, "288 GB"
B300 = 288.4 x 10^9 B, "192 GB" MI300X = exactly 192 GiB), so no label is converted with a
fixed unit. The label is kept, as text, in ``label``.

>>> h200 = get_device("H200-141GB")
>>> h200.num_bytes, h200.label, h200.ranks_per_node
(150754820096, '141 GB', 8)
>>> from epbuf.units import format_bytes
>>> format_bytes(h200.num_bytes)
'140.40 GiB'
>>> parse_capacity("96GiB")
103079215104
>>> parse_capacity("96 gigs")
Traceback (most recent call last):
...
epbuf.errors.InvalidArgumentError: --hbm (hbm) = '96 gigs': not a byte size; allowed e.g. 96GiB, 143771MiB, 80GB; or --device NAME
"""

from __future__ import annotations

from ._record import Record
from .errors import InvalidArgumentError, Problem
from .units import GiB, MiB

__all__ = ["DeviceSpec", "DEVICES", "device_names", "get_device", "parse_capacity"]


class DeviceSpec(Record):
    """One accelerator's memory and how many of it share a node.

    Attributes:
        name: preset key, lower-case with dashes (``"h200"``).
        title: display name (``"NVIDIA H200 (SXM)"``).
        num_bytes: total device memory as the driver reports it, in bytes
            (``nvidia-smi`` 143771 MiB for H200).
        label: the vendor's marketing capacity, as text (``"141 GB"``); never used in
            arithmetic.
        vendor: ``"NVIDIA"``, ``"AMD"`` or ``"Huawei"``.
        ranks_per_node: devices (ranks) per server / compute tray.
        scaleup_ranks: devices in one scale-up domain (NVLink / HCCS / XGMI): 8 on HGX,
            72 on GB200/GB300 NVL72, 2 for NVLink-bridged H100 NVL pairs. The value for
            ``Plan.num_ranks_per_node`` where the backend means the scale-up domain.
        source: where ``num_bytes`` and ``label`` come from.
        notes: caveats (``""`` when none).
        aliases: other accepted names.
        verified: ``True`` when ``num_bytes`` was read from driver output.
        compute_capability: NVIDIA compute capability (``"9.0"``); ``""`` for other vendors.
        max_smem_per_block_optin: the most dynamic shared memory one thread block may opt in to
            (``cudaFuncAttributeMaxDynamicSharedMemorySize``), in bytes, from the per-compute-
            capability table of NVIDIA's CUDA C++ Programming Guide ("Technical Specifications
            per Compute Capability", maximum shared memory per thread block): 227 KiB = 232,448 B
            for 9.0 and 10.x, 163 KiB = 166,912 B for 8.0 (99 KiB = 101,376 B for 8.6/8.9, no
            preset); ``None`` for non-NVIDIA devices. DeepEP V1's kernel launches assert against it
            (:mod:`epbuf.backends.deepep_v1.smem`).
    """

    name: str
    title: str
    num_bytes: int
    label: str
    vendor: str
    ranks_per_node: int
    scaleup_ranks: int
    source: str = ""
    notes: str = ""
    aliases: tuple = ()
    verified: bool = True
    compute_capability: str = ""
    max_smem_per_block_optin: int | None = None


_SMEM_SM90 = 227 * 1024  # 232,448 B: compute capability 9.0 and 10.x (CUDA C++ Programming Guide)
_SMEM_SM80 = 163 * 1024  # 166,912 B: compute capability 8.0

_SMI = ("nvidia-smi memory.total quoted in public logs and GitHub issues "
        "(docs/derivations/models_and_devices.md §3.1)")
_AIC = "github.com/ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/systems/"

_PRESETS = (
    DeviceSpec(
        name="a100-40gb", title="NVIDIA A100 40GB (SXM4 / PCIe)", num_bytes=40960 * MiB, label="40 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'A100-SXM4-40GB ... / 40960MiB', 'A100-PCIE-40GB ... / 40960MiB' "
        "(totals listed in modal-labs/modal-client#2797); label: A100 datasheet",
        notes="CUDA reports a little less (42,405,855,232 B)",
        aliases=("a100-sxm4-40gb", "a100-pcie-40gb", "a100-40g"),
        compute_capability="8.0", max_smem_per_block_optin=_SMEM_SM80,
    ),
    DeviceSpec(
        name="a100-80gb", title="NVIDIA A100 80GB (SXM4 / PCIe)", num_bytes=81920 * MiB, label="80 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'A100-SXM4-80GB ... / 81920MiB' (A800-SXM4-80GB identical; modal-labs/modal-client#2797); "
        "label: A100 datasheet",
        aliases=("a100-sxm4-80gb", "a100-pcie-80gb", "a100-80g", "a800-80gb", "a800-sxm4-80gb"),
        compute_capability="8.0", max_smem_per_block_optin=_SMEM_SM80,
    ),
    DeviceSpec(
        name="h100", title="NVIDIA H100 80GB (SXM5 / PCIe)", num_bytes=81559 * MiB, label="80 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'H100 80GB HBM3 ... / 81559MiB' (NVIDIA/nccl#1264, modal-labs/modal-client#2797; "
        "H100 PCIe 80GB also 81559MiB)",
        notes="HGX/DGX H100: 8 GPUs on NVLink4 / NVSwitch; 80 GB label = 79.65 GiB usable",
        aliases=("h100-sxm", "h100-sxm5", "h100-pcie", "h100-80gb", "h100-sxm5-80gb", "h100-80gb-hbm3"),
        compute_capability="9.0", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="h100-nvl", title="NVIDIA H100 NVL", num_bytes=95830 * MiB, label="94 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=2,
        source=_SMI + ": 'H100 NVL ... / 95830MiB' (NVIDIA/gpu-admin-tools#4); label from secondary copies of "
        "the datasheet",
        notes="PCIe cards joined in NVLink-bridged pairs ('188GB' is the pair); 8 per server is typical, "
        "not a fixed platform",
        aliases=("h100-nvl-94gb",),
        compute_capability="9.0", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="h20", title="NVIDIA H20 (HGX)", num_bytes=97871 * MiB, label="96 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'H20 ... / 97871MiB'; label from press copies of NVIDIA's spec sheet",
        aliases=("h20-96gb",),
        compute_capability="9.0", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="h200", title="NVIDIA H200 (SXM)", num_bytes=143771 * MiB, label="141 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'H200 ... / 143771MiB' (sgl-project/sglang#3196); label: MLPerf v4.1 NVIDIA system "
        "H200-SXM-141GBx8 "
        "(accelerator_memory_capacity '141 GB', 8 per node)",
        notes="141 GB label = 140.40 GiB usable (aiconfigurator's h200_sxm.yaml uses 141 GiB, which is more "
        "than the card has)",
        aliases=("h200-141gb", "h200-sxm", "h200-sxm-141gb"),
        compute_capability="9.0", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="b200", title="NVIDIA B200 (HGX / DGX)", num_bytes=183359 * MiB, label="180 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'B200 ... / 183359MiB' (NVIDIA/TensorRT-LLM#10278); label: MLPerf v6.0 Nebius "
        "B200-SXM-180GB "
        "(accelerator_memory_capacity '180 GB', 8 per node)",
        notes="'180 GB' (179.06 GiB) and the launch figure '192 GB' (192.27 x 10^9 B) describe the same memory",
        aliases=("b200-180gb", "b200-192gb", "b200-sxm", "b200-sxm-180gb"),
        compute_capability="10.0", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="b300", title="NVIDIA B300 (SXM6 AC, HGX / DGX)", num_bytes=275040 * MiB, label="288 GB",
        vendor="NVIDIA", ranks_per_node=8, scaleup_ranks=8,
        source=_SMI + ": 'B300 SXM6 AC ... / 275040MiB'; " + _AIC + "b300_sxm.yaml; label: NVIDIA BioNeMo "
        "Boltz-2 NIM 1.7.0 release notes ('288GB HBM3e memory per GPU')",
        notes="'288 GB' here is 10^9 bytes (268.59 GiB)",
        aliases=("b300-288gb", "b300-sxm", "b300-sxm6", "b300-sxm6-ac"),
        compute_capability="10.3", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="gb200", title="NVIDIA GB200 (per GPU, GB200 NVL72)", num_bytes=189471 * MiB, label="186 GB",
        vendor="NVIDIA", ranks_per_node=4, scaleup_ranks=72,
        source=_SMI + ": 'GB200 ... / 189471MiB'; " + _AIC + "gb200.yaml (num_gpus_per_node 4, "
        "num_gpus_per_rack 72); label: MLPerf v6.1 Crusoe GB200-NVL72_GB200-186GB (4 per node)",
        notes="4 GPUs per compute tray (2 Grace x 2 GPU); NVLink domain = 72 GPUs (NVL72, 18 trays)",
        aliases=("gb200-186gb", "gb200-nvl72"),
        compute_capability="10.0", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="gb300", title="NVIDIA GB300 (per GPU, GB300 NVL72)", num_bytes=284208 * MiB, label="288 GB",
        vendor="NVIDIA", ranks_per_node=4, scaleup_ranks=72,
        source=_SMI + ": 'GB300 ... / 284208MiB'; " + _AIC + "gb300.yaml (4 per node, 72 per rack)",
        notes="4 GPUs per compute tray; NVLink domain = 72 GPUs (NVL72). The '288 GB' label is commonly "
        "quoted, not read from a datasheet line, and matches neither GiB (277.55) nor 10^9 B (298.01)",
        aliases=("gb300-288gb", "gb300-nvl72"),
        compute_capability="10.3", max_smem_per_block_optin=_SMEM_SM90,
    ),
    DeviceSpec(
        name="mi300x", title="AMD Instinct MI300X", num_bytes=192 * GiB, label="192 GB",
        vendor="AMD", ranks_per_node=8, scaleup_ranks=8,
        source="rocm-smi --showmeminfo vram 'Total Memory (B): 206158430208' in public logs; label: MLPerf v4.1 "
        "AMD 8xMI300X_2xEPYC-9374F (MI300X-NPS1-SPX-192GB-750W, 8 per node)",
        notes="some driver stacks report 205822885888 B (191.69 GiB); 8 OAM GPUs on Infinity Fabric (XGMI)",
        aliases=("mi300x-192gb", "instinct-mi300x"),
    ),
    DeviceSpec(
        name="mi325x", title="AMD Instinct MI325X", num_bytes=256 * GiB, label="256 GB",
        vendor="AMD", ranks_per_node=8, scaleup_ranks=8,
        source="AMD's label '256 GB HBM3E' per GPU, 8 per platform (UBB 2.0, '2 TB' per 8 GPUs; "
        "tensorwave.com/blog/mi325x-vs-mi300x-whats-new-what-matters-and-why-it-changes-your-ai-stack, 2025-05-20); "
        "bytes read as GiB, the convention rocm-smi shows for MI300X's '192 GB' (exactly 192 GiB)",
        notes="no driver total seen in public text: num_bytes is the label read as GiB (unverified); the driver may "
        "report a little less, as some MI300X stacks do; gfx942, wave64; 8 OAM GPUs on Infinity Fabric (XGMI)",
        aliases=("mi325x-256gb", "instinct-mi325x"), verified=False,
    ),
    DeviceSpec(
        name="mi355x", title="AMD Instinct MI355X", num_bytes=288 * GiB, label="288 GB",
        vendor="AMD", ranks_per_node=8, scaleup_ranks=8,
        source="AMD's label '288 GB of HBM3E' per GPU (launch 2025-06-12; theregister.com/2025/06/12/amd_mi355x); "
        "bytes read as GiB, the convention rocm-smi shows for MI300X's '192 GB' (exactly 192 GiB)",
        notes="no driver total seen in public text: num_bytes is the label read as GiB (unverified); gfx950, wave64; "
        "8 OAM GPUs per platform on Infinity Fabric (XGMI); MI350X has the same memory",
        aliases=("mi355x-288gb", "instinct-mi355x"), verified=False,
    ),
    DeviceSpec(
        name="ascend-910b", title="Huawei Ascend 910B (Atlas 800T/800I A2)", num_bytes=65536 * MiB, label="64 GB",
        vendor="Huawei", ranks_per_node=8, scaleup_ranks=8,
        source="npu-smi info HBM total 65536 MB for 910B2 (vllm-ascend issue #975), 910B3 (vllm-ascend #1903, "
        "lmdeploy #2585), 910B4-1 (Project-HAMi/HAMi-WebUI #47)",
        notes="8 NPUs per A2 node, HCCS full mesh; about 3.2-3.4 GB in use at idle. 910B1 not checked; "
        "plain 910B4 is reported as 32 GB elsewhere, so it is not an alias",
        aliases=("910b", "a2", "ascend-a2", "atlas-a2", "ascend-910b2", "ascend-910b3", "ascend-910b4-1",
                 "910b2", "910b3", "910b4-1", "atlas-800t-a2", "atlas-800i-a2"),
    ),
    DeviceSpec(
        name="ascend-a3", title="Huawei Ascend 910C die (Atlas 800T/800I A3)", num_bytes=65536 * MiB,
        label="64 GB per die (128 GB per 910C)",
        vendor="Huawei", ranks_per_node=16, scaleup_ranks=16,
        source="npu-smi info on A3 lists each 910C as 2 chips of 65536 MB (vllm-ascend issue #2534 and others); "
        "16 dies per node: hiascend.com MindCluster affinity documentation",
        notes="each 910C package is 2 dies (one rank each); an A3 server has 8 packages = 16 dies. "
        "Atlas 900 A3 SuperPoD / CloudMatrix384: 384 packages = 768 dies in one supernode",
        aliases=("a3", "ascend-910c", "910c", "atlas-a3", "atlas-800t-a3", "atlas-800i-a3"),
    ),
)

#: Preset name -> :class:`DeviceSpec`.
DEVICES: dict[str, DeviceSpec] = {spec.name: spec for spec in _PRESETS}

_DEVICE_INDEX: dict[str, str] = {}


def device_names() -> tuple[str, ...]:
    """Preset names, in table order."""
    return tuple(DEVICES)


def get_device(name: str) -> DeviceSpec:
    """The preset called ``name`` (a preset name or alias such as ``"h200-141gb"``,
    ``"910b"``, ``"a2"``, ``"a3"``), ignoring case and the separators ``- _ .`` and spaces.

    Raises:
        UnknownNameError: no preset matches; the message suggests the closest names.
    """
    from ._names import _index, _lookup

    if not _DEVICE_INDEX:
        _DEVICE_INDEX.update(_index(DEVICES, titles=False))  # titles are descriptions
    return _lookup(DEVICES, _DEVICE_INDEX, name, "device", "or --hbm SIZE")


#: A unitless ``--hbm`` below this is refused as a forgotten unit (no device has under 1 MiB).
MIN_UNITLESS_CAPACITY = 1 << 20

_CAPACITY_FORMS = (
    "allowed e.g. 96GiB, 143771MiB, 80GB; or --device NAME"
)


def parse_capacity(text: str) -> int:
    """Bytes of device memory given as ``--hbm``: ``"96GiB"``, ``"143771MiB"``, ``"141GB"``.

    A plain number is bytes (``3e10``); one under :data:`MIN_UNITLESS_CAPACITY` (1 MiB) is
    refused, naming the GB and GiB readings, since ``--hbm 80`` means 80 GB, not 80 bytes.

    Units as :func:`epbuf.units.parse_bytes`: ``GB`` is 10^9 bytes, ``GiB`` 2^30 — note
    that vendor labels are neither (H200 "141 GB" is 140.40 GiB); ``--device`` gives the
    driver-reported figure.

    Raises:
        InvalidArgumentError: ``text`` is not a whole, positive number of bytes.
    """
    from .units import parse_bytes

    try:
        num_bytes = parse_bytes(text)
    except ValueError as error:
        why = "not a whole number of bytes" if "whole number" in str(error) else "not a byte size"
        if "out of range" in str(error):  # a byte size, but beyond what upstream's int64 sizes hold
            from .units import MAX_BYTES

            why = f"out of range; allowed 1..{MAX_BYTES:,} B (int64)"
        raise InvalidArgumentError([Problem("hbm", text, f"{why}; {_CAPACITY_FORMS}")]) from None
    if num_bytes <= 0:
        raise InvalidArgumentError([Problem("hbm", text, f"must be more than 0 bytes; {_CAPACITY_FORMS}")])
    if num_bytes < MIN_UNITLESS_CAPACITY and text.strip().replace(".", "", 1).isdigit():
        number = text.strip()
        raise InvalidArgumentError([Problem("hbm", text, (
            f"{number} bytes is no device memory; did you mean {number}GB or {number}GiB?"))])
    return num_bytes
