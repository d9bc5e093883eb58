"""What every ``epbuf`` command shares: the parser class (errors are one line, exit status 2),
argument types, the option builders (model, device, plan) and the readers that turn parsed
options into library values (:func:`plan_from_args`, :func:`device_from_args`, ...).

No formulas: the readers build :class:`~epbuf.plan.Plan` and preset lookups; each command
module (:mod:`epbuf.cli`) computes through the library and renders.
"""

from __future__ import annotations

import argparse
import sys

# The defaults of the book example the project started from (docs/derivations/ascend.md §3):
# DeepSeek-V3-like shapes on 8 ranks.
DEFAULT_HIDDEN = 7168
DEFAULT_TOPK = 6
DEFAULT_EXPERTS = 256
DEFAULT_RANKS = 8
DEFAULT_TOKENS = 4096


from ._types import Formatter, Parser, RawDescriptionFormatter, bytes_arg, int_arg, positive_bytes_arg  # noqa: F401


def add_model_options(p, title: str = "model (explicit --hidden/--topk/--experts override it)") -> None:
    """``--model NAME`` | ``--model-config PATH`` (read by :func:`model_from_args`)."""
    source = p.add_argument_group(title).add_mutually_exclusive_group()
    source.add_argument("--model", metavar="NAME", help="a model preset (epbuf models lists them), e.g. deepseek-v3")
    source.add_argument("--model-config", dest="model_config", metavar="PATH",
                        help="a Hugging Face config.json, or the folder holding it")


def add_device_options(group) -> None:
    """``--device NAME`` | ``--hbm SIZE`` in ``group`` (read by :func:`device_from_args`)."""
    device = group.add_mutually_exclusive_group()
    device.add_argument("--device", metavar="NAME", help="a device preset (epbuf devices lists them), e.g. h200")
    device.add_argument("--hbm", metavar="SIZE", help="device memory, e.g. 96GiB, 80GB, 3e10")


def add_plan_options(p: argparse.ArgumentParser, backend: bool = True) -> None:
    """The options of a :class:`~epbuf.plan.Plan` (read by :func:`plan_from_args`), with
    ``--backend`` unless the command covers several backends."""
    from ..plan import backend_names

    add_model_options(p)
    add_device_options(p.add_argument_group("device memory (for the share of memory a buffer takes)"))
    g = p.add_argument_group("shape and topology")
    if backend:
        g.add_argument("--backend", choices=backend_names(), default="ascend",
                       help="upstream library whose buffer to size (default: ascend)")
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
                   help="upstream formula generation or commit id (default: the newest); deepep-v2: 2026-04, 2026-07, refactor; "
                        "deepep-v1 / deepep-ll: see `epbuf versions`")
    u.add_argument("--no-hybrid", dest="allow_hybrid_mode", action="store_false",
                   help="deepep-v2: allow_hybrid_mode=False (one logical scale-out domain)")
    u.add_argument("--single-reduction", dest="allow_multiple_reduction", action="store_false",
                   help="deepep-v2: allow_multiple_reduction=False (combine sends top-k records)")
    u.add_argument("--no-nvlink", dest="scaleup_is_nvlink", action="store_false",
                   help="deepep-v2: the scale-up domain is not NVLink")
    u.add_argument("--num-sms", dest="num_sms", type=int_arg(">= 2", lo=2),
                   help="deepep-v1, uccl-ep: Buffer.num_sms for the default configs (default 20)")
    u.add_argument("--topk-idx-bits", dest="topk_idx_bits", type=int, choices=(32, 64),
                   help="width of topk_idx_t in the DeepEP build: 64 (default) or 32 (built with "
                        "-DEP_NUM_TOPK_IDX_BITS=32)")
    from ._library_options import add_library_options

    add_library_options(p)


def model_from_args(args: argparse.Namespace):
    """The ModelSpec named by --model / --model-config, or None."""
    if getattr(args, "model", None):
        from ..models import get_model

        return get_model(args.model)
    if getattr(args, "model_config", None):
        from ..models import read_model_config

        return read_model_config(args.model_config)
    return None


def device_from_args(args: argparse.Namespace) -> tuple[str, int] | None:
    """``(name, capacity bytes)`` from --device / --hbm, or None."""
    if getattr(args, "device", None):
        from ..devices import get_device

        spec = get_device(args.device)
        return spec.title, spec.num_bytes
    if getattr(args, "hbm", None):
        from ..devices import parse_capacity
        from ..units import format_bytes

        num_bytes = parse_capacity(args.hbm)
        return f"--hbm {format_bytes(num_bytes)}", num_bytes
    return None


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
    """``(num_ranks, num_ranks_per_node)`` from --ranks, --nodes and --gpus-per-node."""
    ranks, per_node, nodes = args.ranks, args.gpus_per_node, getattr(args, "nodes", None)
    if nodes is None:
        return (ranks if ranks is not None else DEFAULT_RANKS), per_node
    per_node = per_node if per_node is not None else 8
    if ranks is not None and ranks != nodes * per_node:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("num_nodes", nodes, f"--nodes {nodes} x --gpus-per-node {per_node} = "
                                                                f"{nodes * per_node} ranks, but --ranks is {ranks}; "
                                                                "give two of the three, or consistent values")])
    return nodes * per_node, per_node


def plan_from_args(args: argparse.Namespace):
    """The :class:`~epbuf.plan.Plan` of the options :func:`add_plan_options` added."""
    from ..plan import Plan
    from ._library_options import library_fields

    shape = shape_from_args(args)
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
        allow_hybrid_mode=args.allow_hybrid_mode,
        allow_multiple_reduction=args.allow_multiple_reduction,
        scaleup_is_nvlink=args.scaleup_is_nvlink,
        num_sms=args.num_sms,
        num_topk_idx_bits=args.topk_idx_bits,
        **library_fields(args),
    )


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


def print_json(data: object) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def has_error_finding(findings) -> bool:
    """Whether ``--strict`` fails: any finding of severity ``error``."""
    return any(f.severity == "error" for f in findings)
