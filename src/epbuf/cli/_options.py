"""What every ``epbuf`` command shares: the parser class (errors are one line, exit status 2),
argument types, the option builders (model, device, plan) and the readers that turn parsed
options into library values (:func:`plan_from_args`, :func:`device_from_args`, ...).

No formulas: the readers build :class:`~epbuf.plan.Plan` and preset lookups; each command
module (:mod:`epbuf.cli`) computes through the library and renders.
"""

from __future__ import annotations

import argparse
import sys

# The defaults of the book example the project started from (docs/derivations/ascend.md §3), DeepSeek-V3-like
DEFAULT_HIDDEN = 7168
DEFAULT_TOPK = 6
DEFAULT_EXPERTS = 256
DEFAULT_RANKS = 8
DEFAULT_TOKENS = 4096

from ._types import (  # noqa: F401
    Formatter, Parser, RawDescriptionFormatter, bytes_arg, int_arg, nonempty_arg, positive_bytes_arg,
)

#: ``--backends a,b`` (compare, fit, sweep) and output file names: given, they are not empty
#: (an empty value would silently mean "all backends" / "no file").
BACKENDS_ARG = nonempty_arg("backend names, e.g. ascend,deepep-v2")
FILE_ARG = nonempty_arg("a file name")

#: The backend without ``--backend`` and ``--device``: the book example (DeepEP-Ascend).
DEFAULT_BACKEND = "ascend"


def add_model_options(p, title: str = "model (explicit --hidden/--topk/--experts override it)") -> None:
    """``--model NAME`` | ``--model-config PATH`` (read by :func:`model_from_args`)."""
    source = p.add_argument_group(title).add_mutually_exclusive_group()
    source.add_argument("--model", metavar="NAME", type=nonempty_arg("a model preset or Hugging Face id"),
                        help="a model preset (epbuf models lists them), e.g. deepseek-v3")
    source.add_argument("--model-config", dest="model_config", metavar="PATH",
                        type=nonempty_arg("a config.json or the folder holding it"),
                        help="a Hugging Face config.json, or the folder holding it (--hidden/--topk/--experts "
                             "fill keys it lacks)")


def add_device_options(group) -> None:
    """``--device NAME`` | ``--hbm SIZE`` in ``group`` (read by :func:`device_from_args`)."""
    device = group.add_mutually_exclusive_group()
    device.add_argument("--device", metavar="NAME", type=nonempty_arg("a device preset, e.g. h200"),
                        help="a device preset (epbuf devices lists them), e.g. h200; without --backend it "
                             "chooses the backend (NVIDIA: deepep-v2, Ascend: ascend, AMD: mori-ep)")
    device.add_argument("--hbm", metavar="SIZE", type=nonempty_arg("a byte size, e.g. 96GiB"),
                        help="device memory, e.g. 96GiB, 80GB, 3e10 (a plain number is bytes; under 1 MiB it is "
                             "refused as a forgotten unit)")


def add_plan_options(p: argparse.ArgumentParser, backend: bool = True, only: tuple[str, ...] | None = None,
                     drop: tuple[str, ...] = ()) -> None:
    """The options of a :class:`~epbuf.plan.Plan` (read by :func:`plan_from_args`), with ``--backend``
    unless the command covers several backends; ``only`` (the backends the command runs) and ``drop``
    leave out what it never reads (:func:`~._library_options.restrict_plan_options`)."""
    _add_plan_options(p, backend)
    if only is not None or drop:
        from ._library_options import restrict_plan_options
        restrict_plan_options(p, BACKEND_OPTIONS, only, drop)


def _add_plan_options(p: argparse.ArgumentParser, backend: bool = True) -> None:
    from ..plan import backend_names

    add_model_options(p)
    add_device_options(p.add_argument_group("device memory (for the share of memory a buffer takes)"))
    g = p.add_argument_group("shape and topology")
    if backend:
        g.add_argument("--backend", choices=backend_names(),
                       help=f"upstream library whose buffer to size (default: from --device, else {DEFAULT_BACKEND})")
    g.add_argument("--hidden", type=int_arg(">= 1"), help=f"hidden size (default {DEFAULT_HIDDEN})")
    g.add_argument("--topk", type=int_arg(">= 0; 0 means unspecified (32)", lo=0),
                   help=f"experts per token; 0 = unspecified (default {DEFAULT_TOPK})")
    g.add_argument("--experts", type=int_arg(">= 1"), help=f"routed experts (default {DEFAULT_EXPERTS})")
    g.add_argument("--ranks", type=int_arg(">= 1"), help=f"expert-parallel size (default {DEFAULT_RANKS})")
    g.add_argument("--tokens", type=int_arg(">= 1"), help=f"num_max_tokens_per_rank (default {DEFAULT_TOKENS})")
    dtype = g.add_mutually_exclusive_group()
    dtype.add_argument("--fp8", dest="fp8", action="store_true", default=True,
                       help="FP8 dispatch with scale factors (default)")
    dtype.add_argument("--bf16", dest="fp8", action="store_false", help="BF16 dispatch")
    g.add_argument("--gpus-per-node", dest="gpus_per_node", type=int_arg(">= 1"),
                   help="scale-up domain size: GPUs/NPUs per node or NVLink domain (default min(ranks, 8))")
    g.add_argument("--nodes", type=int_arg(">= 1"),
                   help="nodes (scale-out size); ranks = nodes x gpus-per-node (default gpus-per-node 8)")
    g.add_argument("--redundant-experts", dest="redundant_experts", type=int_arg(">= 0", lo=0), default=0,
                   help="EPLB redundant experts added to --experts (default 0)")
    g.add_argument("--sf-packs", dest="sf_packs", type=int_arg(">= 0", lo=0),
                   help="Ascend: SF packs a real FP8 dispatch sends (default ceil(hidden/128)*2)")
    u = p.add_argument_group("DeepEP options")
    u.add_argument("--backend-version", "--deepep-version", dest="version", metavar="ID",
                   type=nonempty_arg("a version id or commit id (epbuf versions lists them)"),
                   help="upstream formula generation or commit id (default: the newest); deepep-v2: 2026-04, 2026-07, refactor; "
                        "deepep-v1 / deepep-ll: see `epbuf versions`")
    u.add_argument("--no-hybrid", dest="allow_hybrid_mode", action="store_false", default=None,
                   help="deepep-v2: allow_hybrid_mode=False (one logical scale-out domain)")
    u.add_argument("--single-reduction", dest="allow_multiple_reduction", action="store_false", default=None,
                   help="deepep-v2: allow_multiple_reduction=False (combine sends top-k records)")
    u.add_argument("--no-nvlink", dest="scaleup_is_nvlink", action="store_false", default=None,
                   help="deepep-v2: the scale-up domain is not NVLink")
    u.add_argument("--num-sms", dest="num_sms", type=int_arg(">= 2", lo=2),
                   help="deepep-v1, uccl-ep: Buffer.num_sms for the default configs (default 20)")
    u.add_argument("--topk-idx-bits", dest="topk_idx_bits", type=int_arg("32 or 64"), choices=(32, 64),
                   help="width of topk_idx_t in the DeepEP build: 64 (default) or 32 (built with "
                        "-DEP_NUM_TOPK_IDX_BITS=32)")
    from ._library_options import add_library_options

    add_library_options(p)


def model_from_args(args: argparse.Namespace):
    """The ModelSpec named by --model / --model-config, or None. A config file lacking the
    hidden size, the expert count or the top-k takes them from --hidden / --experts / --topk."""
    if getattr(args, "model", None) is not None:
        from ..models.lookup import get_model

        return get_model(args.model)
    if getattr(args, "model_config", None) is not None:
        from ..models.config_json import read_model_config

        fill = {key: value for key, value in (("hidden", getattr(args, "hidden", None)),
                                               ("num_experts", getattr(args, "experts", None)),
                                               ("num_topk", getattr(args, "topk", None)))
                if isinstance(value, int)}
        return read_model_config(args.model_config, fill=fill or None)
    return None


def device_spec_from_args(args: argparse.Namespace):
    """The :class:`~epbuf.devices.DeviceSpec` of --device, or None."""
    if getattr(args, "device", None) is None:
        return None
    from ..devices import get_device

    return get_device(args.device)


def device_from_args(args: argparse.Namespace) -> tuple[str, int] | None:
    """``(name, capacity bytes)`` from --device / --hbm, or None."""
    if getattr(args, "device", None) is not None:
        spec = device_spec_from_args(args)
        return spec.title, spec.num_bytes
    if getattr(args, "hbm", None) is not None:
        from ..devices import parse_capacity
        from ..units import format_bytes

        num_bytes = parse_capacity(args.hbm)
        return f"--hbm {format_bytes(num_bytes)}", num_bytes
    return None


def backend_from_args(args: argparse.Namespace) -> tuple[str, object, bool]:
    """``(backend, DeviceSpec or None, chosen from the device)``: ``--backend`` when given; else
    the backend of ``--device``'s vendor (:data:`epbuf.placement.DEVICE_BACKENDS`); else
    :data:`DEFAULT_BACKEND`."""
    device = device_spec_from_args(args)
    if args.backend is not None:
        return args.backend, device, False
    if device is not None:
        from ..placement import backend_for_device

        return backend_for_device(device), device, True
    return DEFAULT_BACKEND, None, False


def budget_from_args(args: argparse.Namespace, capacity: tuple[str, int] | None) -> int | None:
    """``--budget`` in bytes (a size, or a percentage of ``capacity``), or None when not given."""
    text = getattr(args, "budget", None)
    if text is None:
        return None
    from ..placement import budget_from_text

    return budget_from_text(text, capacity[1] if capacity is not None else None)


# Options only some backends read: (argparse dest, option, the backends that read it). Given
# for a backend that does not read it, the option is refused with one line (check_backend_options).
BACKEND_OPTIONS = (
    ("version", "--backend-version", ("deepep-v2", "deepep-v1", "deepep-ll", "uccl-ep", "uccl-ll", "mori-ep", "pplx")),
    ("allow_hybrid_mode", "--no-hybrid", ("deepep-v2",)),
    ("allow_multiple_reduction", "--single-reduction", ("deepep-v2",)),
    ("scaleup_is_nvlink", "--no-nvlink", ("deepep-v2",)),
    ("num_sms", "--num-sms", ("deepep-v1", "uccl-ep")),
    ("sf_packs", "--sf-packs", ("ascend",)),
    ("topk_idx_bits", "--topk-idx-bits", ("ascend", "deepep-v2", "deepep-v1", "deepep-ll")),
    ("platform", "--platform", ("uccl-ep", "uccl-ll")),
    ("nic", "--nic", ("uccl-ep", "uccl-ll")),
    ("per_expert_batching", "--per-expert-batching", ("uccl-ll",)),
    ("kernel_type", "--kernel-type", ("mori-ep", "pplx")),
    ("max_total_recv_tokens", "--max-total-recv-tokens", ("mori-ep",)),
    ("quant_type", "--quant-type", ("mori-ep",)),
    ("max_token_type_size", "--max-token-type-size", ("mori-ep",)),
    ("dp_group_size", "--dp-group-size", ("pplx",)),
    ("num_scale_bytes", "--num-scale-bytes", ("mori-ep", "pplx")),
    ("env", "--env", ("mori-ep", "pplx")),
)


def _given(value: object) -> bool:
    """Whether an option of :data:`BACKEND_OPTIONS` was typed (their defaults are None or [])."""
    return value is not None and value != []


def check_backend_options(args: argparse.Namespace, backends: tuple[str, ...], why: str = "",
                          can_choose: bool = True) -> None:
    """Refuse, in one line, the options none of ``backends`` reads (``--no-hybrid`` with
    ``deepep-ll``, ``--backend-version`` with ``ascend``) and ``--sf-packs`` where it means
    nothing (BF16 dispatch sends no scale factors; an FP8 dispatch sends at least one pack).
    ``why`` says where the backend came from (``"chosen for NVIDIA H200"``); ``can_choose=False``
    for a command without ``--backend`` (the message then does not suggest it)."""
    from ..errors import InvalidArgumentError, Problem

    problems = []
    for dest, option, readers in BACKEND_OPTIONS:
        value = getattr(args, dest, None)
        if not _given(value) or any(b in readers for b in backends):
            continue
        shown = value if not isinstance(value, list) else " ".join(value)
        if len(backends) == 1:
            where = f"the backend is {backends[0]}" + (f" ({why})" if why else "")
        else:
            where = f"none of {', '.join(backends)} reads it"
        verb = "reads" if len(readers) == 1 else "read"
        choose = f" or choose one of them with --backend{'s' if len(backends) > 1 else ''}" if can_choose else ""
        problems.append(Problem(dest, shown, f"only {', '.join(readers)} {verb} {option}; {where}: remove it{choose}"))
    from ._library_options import env_name_problems
    problems += env_name_problems(getattr(args, "env", None) or [], backends)
    packs = getattr(args, "sf_packs", None)
    if packs is not None and "ascend" in backends:
        if not getattr(args, "fp8", True):
            problems.append(Problem("sf_packs", packs, "with --bf16 none are sent: remove it (it counts the "
                                                       "scale-factor packs of an FP8 dispatch)"))
        elif packs == 0:
            problems.append(Problem("sf_packs", packs, "an FP8 dispatch sends scale factors: allowed >= 1 "
                                                       "(default ceil(hidden/128) x 2), or use --bf16"))
    if problems:
        raise InvalidArgumentError(problems)


def shape_from_args(args: argparse.Namespace) -> dict:
    """hidden / num_topk / num_experts: explicit options, else the model, else the seed's defaults."""
    model = model_from_args(args)
    pick = lambda explicit, from_model, default: (  # noqa: E731
        explicit if explicit is not None else from_model if model is not None else default)
    return {
        "hidden": pick(args.hidden, model and model.hidden, DEFAULT_HIDDEN),
        "num_topk": pick(args.topk, model and model.num_topk, DEFAULT_TOPK),
        "num_experts": pick(args.experts, model and model.num_experts, DEFAULT_EXPERTS),
        "model": (model.title or model.name) if model is not None else "",
    }


def topology_from_args(args: argparse.Namespace) -> tuple[int, int | None]:
    """``(num_ranks, num_ranks_per_node)`` from --ranks, --nodes and --gpus-per-node: any two
    give the third (``--nodes 4 --ranks 16``: 4 per node); --nodes alone means 8 per node."""
    ranks, per_node, nodes = args.ranks, args.gpus_per_node, getattr(args, "nodes", None)
    if nodes is None:
        return (ranks if ranks is not None else DEFAULT_RANKS), per_node
    from ..errors import InvalidArgumentError, Problem

    if per_node is None and ranks is not None:
        if ranks % nodes:
            raise InvalidArgumentError([Problem("num_nodes", nodes, f"--ranks {ranks} is not a multiple of --nodes "
                                                                    f"{nodes}; ranks = nodes x gpus-per-node")])
        return ranks, ranks // nodes
    per_node = per_node if per_node is not None else 8
    if ranks is not None and ranks != nodes * per_node:
        raise InvalidArgumentError([Problem("num_nodes", nodes, f"--nodes {nodes} x --gpus-per-node {per_node} = "
                                                                f"{nodes * per_node} ranks, but --ranks is {ranks}; "
                                                                "ranks = nodes x gpus-per-node")])
    return nodes * per_node, per_node


def plan_from_args(args: argparse.Namespace):
    """The :class:`~epbuf.plan.Plan` of the options :func:`add_plan_options` added."""
    from ..plan import Plan
    from ._library_options import library_fields

    shape = shape_from_args(args)
    if shape["num_topk"] > shape["num_experts"] >= 1:  # each token picks num_topk distinct experts
        from ..errors import InvalidArgumentError, Problem
        raise InvalidArgumentError([Problem("num_topk", shape["num_topk"], f"allowed 0..{shape['num_experts']}: "
                                            f"each token picks num_topk distinct experts of --experts "
                                            f"{shape['num_experts']} (torch.topk refuses k > n)")])
    num_ranks, num_ranks_per_node = topology_from_args(args)
    return Plan(
        hidden=shape["hidden"],
        num_topk=shape["num_topk"],
        num_experts=shape["num_experts"],
        model=shape["model"],
        num_ranks=num_ranks,
        num_max_tokens_per_rank=args.tokens if args.tokens is not None else DEFAULT_TOKENS,
        use_fp8_dispatch=args.fp8,
        num_ranks_per_node=num_ranks_per_node,
        num_redundant_experts=args.redundant_experts,
        num_sf_packs=args.sf_packs,
        version=args.version,
        allow_hybrid_mode=args.allow_hybrid_mode is not False,
        allow_multiple_reduction=args.allow_multiple_reduction is not False,
        scaleup_is_nvlink=args.scaleup_is_nvlink is not False,
        num_sms=args.num_sms,
        num_topk_idx_bits=args.topk_idx_bits,
        device=_memory_preset(args),
        **library_fields(args),
    )


def _memory_preset(args: argparse.Namespace) -> str | None:
    """``--device`` as a memory preset name for ``Plan.device`` (DeepEP V1's and UCCL-EP's shared-memory
    bound); ``None`` without one, or where ``--device`` names something else (``simulate``'s link presets
    such as h800)."""
    if getattr(args, "device", None) is None:
        return None
    from ..devices import get_device
    from ..errors import UnknownNameError

    try:
        return get_device(args.device).name
    except UnknownNameError:
        return None  # the commands reading --device as memory refuse it themselves (device_spec_from_args)


def report_from_args(args: argparse.Namespace):
    """The report of the one backend ``--backend`` / ``--device`` selects, with the device's and the
    budget's findings first; and ``(capacity or None, budget or None)``. The options of other
    backends are refused first (:func:`check_backend_options`)."""
    from ..plan import report

    backend, device, chosen = backend_from_args(args)
    check_backend_options(args, (backend,), f"chosen for {device.title}" if chosen else "")
    rep = report(plan_from_args(args), backend)
    capacity = device_from_args(args)
    budget = budget_from_args(args, capacity)
    if capacity is not None or budget is not None:  # (placement is imported only then: cold start)
        from ..placement import placement_findings

        found = placement_findings(rep, device=device, capacity=capacity, budget=budget, chosen=chosen)
        if found:
            rep = rep.replace(findings=found + rep.findings)
    return rep, capacity, budget


def chosen_backends(text: str | None) -> tuple[str, ...]:
    """``--backends a,b``: the named backends in order (default: all)."""
    from ..plan import backend_names

    names = backend_names()
    if not text:
        return names
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in names]
    if unknown or not chosen:
        from ..errors import UnknownNameError

        raise UnknownNameError(f"--backends = {text!r}: unknown {', '.join(unknown) or '(empty)'}; "
                               f"choose from {', '.join(names)}")
    return tuple(chosen)


def add_wide_option(p) -> None:
    """``--wide``: lines as long as their content (no wrapping to the terminal), every source."""
    p.add_argument("--wide", action="store_true",
                   help="do not wrap lines to the terminal width; show every source")


#: The width text output wraps to when standard output is not a terminal and COLUMNS is unset.
DEFAULT_WIDTH = 100


def output_width(args: argparse.Namespace) -> int | None:
    """The column text output wraps at: None with ``--wide``; else ``COLUMNS``, else the
    terminal's width when standard output is one, else :data:`DEFAULT_WIDTH`; at least 60."""
    if getattr(args, "wide", False):
        return None
    import os

    env = os.environ.get("COLUMNS", "")
    if env.isascii() and env.isdigit() and 0 < len(env) < 6:
        return max(60, int(env))
    try:
        if sys.stdout is not None and sys.stdout.isatty():
            return max(60, os.get_terminal_size(sys.stdout.fileno()).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_WIDTH


def print_json(data: object) -> None:
    from .._jsonout import dumps  # json.dumps(data, indent=2) without importing json (cold start)

    sys.stdout.write(dumps(data) + "\n")


def has_error_finding(findings) -> bool:
    """Whether ``--strict`` fails: any finding of severity ``error``."""
    return any(f.severity == "error" for f in findings)
