"""Where a plan runs: which backend a device takes, whether a backend runs on it, and
whether the allocation fits the device's memory or a budget.

The CLI reads these when ``--device`` (or ``--hbm``, ``--budget``) is given; the library's
``report()`` knows nothing of devices. No size formula lives here: the findings compare a
report's total (``Report.num_bytes``) with a capacity.

>>> from epbuf.devices import get_device
>>> backend_for_device(get_device("h200")), backend_for_device(get_device("910b"))
('deepep-v2', 'ascend')
>>> runs_on("ascend", get_device("h200").vendor), runs_on("uccl-ep", "AMD")
(False, True)
"""

from __future__ import annotations

from .report import Finding, Report
from .units import format_bytes, format_int

__all__ = ["BACKEND_VENDORS", "DEVICE_BACKENDS", "backend_for_device", "runs_on", "budget_from_text",
           "placement_findings", "capacity_label", "vendors_text", "DEFAULT_BUDGET_PERCENT"]

#: The vendors whose accelerators each backend runs on (``DeviceSpec.vendor`` values):
#: DeepEP-Ascend is Ascend C on CANN; DeepEP V1/V2 and pplx-kernels are CUDA (NVSHMEM or CUDA
#: IPC); UCCL-EP builds for CUDA and ROCm; MORI-EP is ROCm only.
BACKEND_VENDORS: dict[str, tuple[str, ...]] = {
    "ascend": ("Huawei",),
    "deepep-v2": ("NVIDIA",),
    "deepep-v1": ("NVIDIA",),
    "deepep-ll": ("NVIDIA",),
    "uccl-ep": ("NVIDIA", "AMD"),
    "uccl-ll": ("NVIDIA", "AMD"),
    "mori-ep": ("AMD",),
    "pplx": ("NVIDIA",),
}

#: The backend ``--device`` selects when ``--backend`` is not given, per vendor: NVIDIA ->
#: DeepEP V2 (the newest generation, whose default version is the newest formula); Huawei
#: Ascend -> DeepEP-Ascend; AMD -> MORI-EP, AMD's own library and the one vLLM and SGLang use
#: on ROCm (UCCL-EP also builds for ROCm, but at ``main`` its low-latency dispatch fails a
#: warp-group assert there; ``--backend uccl-ep`` still sizes it).
DEVICE_BACKENDS: dict[str, str] = {"NVIDIA": "deepep-v2", "Huawei": "ascend", "AMD": "mori-ep"}

_VENDOR_WORDS = {"NVIDIA": "NVIDIA GPUs", "Huawei": "Huawei Ascend NPUs", "AMD": "AMD GPUs"}

#: ``fit --device NAME`` without ``--budget`` grants this share of the device's memory: the
#: headroom vLLM leaves outside its memory pool at its default ``--gpu-memory-utilization
#: 0.9``. A rule of thumb for "the buffers next to weights and KV cache", not an upstream limit.
DEFAULT_BUDGET_PERCENT = 10


def backend_for_device(device) -> str:
    """The backend a :class:`~epbuf.devices.DeviceSpec` selects (:data:`DEVICE_BACKENDS`)."""
    return DEVICE_BACKENDS[device.vendor]


def runs_on(backend: str, vendor: str) -> bool:
    """Whether ``backend`` runs on accelerators of ``vendor`` (:data:`BACKEND_VENDORS`)."""
    return vendor in BACKEND_VENDORS.get(backend, ())


def vendors_text(backend: str) -> str:
    """``"NVIDIA GPUs"``, ``"NVIDIA GPUs and AMD GPUs"``: where ``backend`` runs, in words."""
    return " and ".join(_VENDOR_WORDS[v] for v in BACKEND_VENDORS.get(backend, ()))


def capacity_label(name: str, num_bytes: int) -> str:
    """``"the 140.40 GiB of NVIDIA H200 (SXM)"``; ``"the 74.51 GiB of --hbm"`` (whose name,
    ``"--hbm 74.51 GiB"``, already carries the size)."""
    if name.startswith("--hbm"):
        name = "--hbm"
    return f"the {format_bytes(num_bytes)} of {name}"


def budget_from_text(text: str, capacity: int | None, option: str = "--budget") -> int:
    """A budget in bytes from ``"8GiB"``, ``"4G"`` (units as :func:`epbuf.units.parse_bytes`) or
    ``"10%"`` (a share of ``capacity``, the device memory; rounded down to whole bytes).

    Raises:
        InvalidArgumentError: not a positive size; a percentage outside (0, 100] or without a
            ``capacity`` (``--device`` / ``--hbm``). One line naming ``option``.
    """
    from .errors import InvalidArgumentError, Problem

    argument = option.lstrip("-").replace("-", "_")
    stripped = text.strip() if isinstance(text, str) else text
    if isinstance(stripped, str) and stripped.endswith("%"):
        number = stripped[:-1].strip()
        from fractions import Fraction

        try:
            if not number or len(number) > 20 or not number.replace(".", "", 1).isascii() \
                    or not number.replace(".", "", 1).isdigit():
                raise ValueError
            share = Fraction(number)
        except (ValueError, ZeroDivisionError):
            raise InvalidArgumentError([Problem(argument, text, "a percentage is a number followed by %, "
                                                                "e.g. 10%")]) from None
        if not 0 < share <= 100:
            raise InvalidArgumentError([Problem(argument, text, "allowed above 0 % and up to 100 % of the "
                                                                "device memory")])
        if capacity is None:
            raise InvalidArgumentError([Problem(argument, text, "a share needs --device or --hbm; or a size, "
                                                                "e.g. 8GiB")])
        return int(capacity * share / 100)
    from .units import parse_bytes

    try:
        num_bytes = parse_bytes(text)
    except ValueError as error:
        why = "allowed e.g. 8GiB, 80GB, 3e9 or 10% (with --device)" if "not a byte size" in str(error) else str(error)
        raise InvalidArgumentError([Problem(argument, text, why)]) from None
    if num_bytes <= 0:
        raise InvalidArgumentError([Problem(argument, text, "must be more than 0 bytes, e.g. 8GiB or 10%")])
    return num_bytes


def placement_findings(report: Report, *, device=None, capacity: tuple[str, int] | None = None,
                       budget: int | None = None, chosen: bool = False) -> tuple[Finding, ...]:
    """What the device and the budget say about ``report``.

    Args:
        device: the :class:`~epbuf.devices.DeviceSpec` of ``--device`` (``None`` with ``--hbm``
            or no device): its vendor is checked against the backend.
        capacity: ``(name, bytes)`` of the device memory (``--device`` or ``--hbm``).
        budget: ``--budget`` in bytes.
        chosen: the backend was chosen from ``device`` (no ``--backend`` given).

    Returns:
        ``info`` ``device.backend-chosen`` when ``chosen``; ``warning`` ``device.backend-mismatch``
        when the backend does not run on the device's vendor; ``error`` ``device.over-capacity``
        when the total device allocation exceeds the device memory, ``error``
        ``budget.exceeded`` when it exceeds ``budget``.
    """
    out: list[Finding] = []
    backend = report.backend
    if device is not None:
        if chosen:
            out.append(Finding(
                severity="info", code="device.backend-chosen",
                message=f"backend {backend} chosen for the {device.vendor} device {device.title}; "
                        "--backend NAME sizes another", data={"backend": backend, "device": device.name, "vendor": device.vendor}))
        elif not runs_on(backend, device.vendor):
            suggested = DEVICE_BACKENDS[device.vendor]
            out.append(Finding(
                severity="warning", code="device.backend-mismatch",
                message=f"--backend {backend} runs on {vendors_text(backend)}, not on {device.title}; the sizes "
                        f"are {backend}'s, the share of memory is the device's (for this device: --backend "
                        f"{suggested})",
                data={"backend": backend, "device": device.name, "vendor": device.vendor,
                      "runs_on": list(BACKEND_VENDORS.get(backend, ())), "suggested": suggested}))
    total = report.num_bytes
    if capacity is not None and total > capacity[1]:
        name, num_bytes = capacity
        out.append(Finding(
            severity="error", code="device.over-capacity",
            message=f"the allocation, {format_int(total)} B ({format_bytes(total)}), is "
                    f"{total / num_bytes * 100:.2f} % of {capacity_label(name, num_bytes)}: it does not fit "
                    "the device memory",
            data={"num_bytes": total, "capacity": num_bytes, "device": name}))
    if budget is not None and total > budget:
        out.append(Finding(
            severity="error", code="budget.exceeded",
            message=f"the allocation, {format_int(total)} B ({format_bytes(total)}), exceeds --budget "
                    f"{format_bytes(budget)} by {format_int(total - budget)} B",
            data={"num_bytes": total, "budget": budget}))
    return tuple(out)
