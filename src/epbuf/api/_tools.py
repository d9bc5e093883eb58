"""The documents of the other commands: ``engine`` (``epbuf.engine/1``), ``simulate``
(``epbuf.simulate/1``), ``replay`` (``epbuf.replay/1``) and the preset listings ``models``,
``devices``, ``versions``. As in :mod:`epbuf.api._plan`, each document is built in one
function, which ``--json``, :mod:`epbuf.api` and ``epbuf serve`` all call.
"""

from __future__ import annotations

import argparse

__all__ = ["engine_document", "simulate_backend", "simulate_run", "simulate_document", "replay_run", "replay_document",
           "models_document", "devices_document", "versions_data", "versions_document", "MAX_SELECTIONS"]

#: The most token selections (ranks x tokens x top-k) a generated routing may have: about 0.5 GiB
#: of int64 indices, a few seconds of simulation (benchmarks/README.md measures 8 M in 0.2-0.6 s).
MAX_SELECTIONS = 1 << 26


def engine_document(rep) -> dict:
    """``epbuf engine NAME --json`` (schema ``epbuf.engine/1``) of an
    :class:`~epbuf.engines._report.EngineReport`."""
    from ..engines._report import engine_report_to_dict
    from ..verdict import summary

    data = engine_report_to_dict(rep)
    data["summary"] = summary("engine", data)
    return data


def simulate_backend(args: argparse.Namespace) -> tuple[str, str]:
    """``(backend, why)``: --backend; else the backend of --device's vendor (a device preset, or
    a link preset's vendor: ``h800`` is NVIDIA); else the default."""
    from ..cli._options import DEFAULT_BACKEND

    if args.backend is not None or args.device is None:
        return args.backend or DEFAULT_BACKEND, ""
    from ..devices import get_device
    from ..errors import UnknownNameError
    from ..placement import DEVICE_BACKENDS

    try:
        spec = get_device(args.device)
        return DEVICE_BACKENDS[spec.vendor], f"chosen for {spec.title}"
    except UnknownNameError:
        from ..simulate.links import get_links

        title = get_links(args.device).title  # the one-line error for a name neither knows
        vendor = title.split(" ", 1)[0]
        if vendor not in DEVICE_BACKENDS:
            return DEFAULT_BACKEND, ""
        return DEVICE_BACKENDS[vendor], f"chosen for {title}"


def _check_size(plan, num_tokens: int | None) -> None:
    """Refuse, before any array is allocated, a generated routing too large to hold."""
    tokens = num_tokens if num_tokens is not None else plan.num_max_tokens_per_rank
    selections = plan.num_ranks * tokens * max(plan.num_topk, 1)
    if selections > MAX_SELECTIONS:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem(
            "num_tokens" if num_tokens is not None else "num_max_tokens_per_rank", tokens,
            f"allowed up to {MAX_SELECTIONS:,} selections (ranks x tokens x top-k), not {selections:,}")])


def simulate_run(args: argparse.Namespace, progress=None):
    """``(Simulation, routing, backend, why)`` of ``simulate``'s options. ``progress(stage,
    done=None, total=None)`` as :func:`epbuf.simulate.simulate_options` calls it (it may raise
    to stop the simulation). Checks every option before any array is made."""
    from ..cli._options import check_backend_options, plan_from_args
    from ..simulate import simulate_options

    if getattr(args, "plot", None):  # its format, before the simulation runs
        from ..plot import plot_format

        plot_format(args.plot)
    backend, why = simulate_backend(args)
    check_backend_options(args, (backend,), why)
    plan = plan_from_args(args)
    if args.routing_file is None:
        _check_size(plan, args.num_tokens)
    sim, routing = simulate_options(
        plan, backend, routing=args.routing, routing_file=args.routing_file,
        seed=args.seed, num_tokens=args.num_tokens, masked_ratio=args.masked_ratio,
        expert_alignment=args.expert_alignment, device=args.device, network=args.network,
        nvlink_gbps=args.nvlink_gbps, rdma_gbps=args.rdma_gbps, latency_us=args.latency_us,
        adopt_file_topk=args.topk is None and not args.model and not args.model_config, progress=progress)
    return sim, routing, backend, why


def simulate_document(sim) -> dict:
    """``epbuf simulate --json`` (schema ``epbuf.simulate/1``) of a Simulation."""
    from ..simulate import to_dict
    from ..verdict import summary

    data = to_dict(sim)
    data["summary"] = summary("simulate", data)
    return data


def replay_run(args: argparse.Namespace):
    """The :class:`~epbuf.codec.replay` result of ``replay``'s options (its parser offers only
    DeepEP-Ascend's shape options: no device, no other backend's)."""
    from ..cli._options import check_backend_options, plan_from_args
    from ..codec.replay import replay

    check_backend_options(args, ("ascend",), "replay replays DeepEP-Ascend", can_choose=False)
    return replay(plan_from_args(args))


def replay_document(result) -> dict:
    """``epbuf replay --json`` (schema ``epbuf.replay/1``)."""
    from ..codec.replay import replay_to_dict
    from ..verdict import summary

    data = replay_to_dict(result)
    data["summary"] = summary("replay", data)
    return data


def models_document() -> dict:
    """``epbuf models --json`` (schema ``epbuf.models/1``)."""
    from ..models.presets import MODELS

    return _summarised("models", {"schema": "epbuf.models/1", "models": [m.as_dict() for m in MODELS.values()]})


def devices_document() -> dict:
    """``epbuf devices --json`` (schema ``epbuf.devices/1``)."""
    from ..devices import DEVICES

    return _summarised("devices", {"schema": "epbuf.devices/1", "devices": [d.as_dict() for d in DEVICES.values()]})


def versions_data() -> dict:
    """backend -> ``{"default": id, "versions": {id: text}}``."""
    from ..plan import backend_names, backend_versions

    data = {}
    for name in backend_names():
        default, versions = backend_versions(name)
        data[name] = {"default": default, "versions": versions}
    return data


def versions_document() -> dict:
    """``epbuf versions --json`` (schema ``epbuf.versions/1``)."""
    return _summarised("versions", {"schema": "epbuf.versions/1", "backends": versions_data()})


def _summarised(command: str, data: dict) -> dict:
    """``data`` with its ``summary`` (:func:`epbuf.verdict.summary`)."""
    from ..verdict import summary

    data["summary"] = summary(command, data)
    return data
