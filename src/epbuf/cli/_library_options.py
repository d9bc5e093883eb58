"""Plan options of the EP libraries beyond DeepEP: UCCL-EP, MORI-EP and pplx-kernels.

Kept apart from :mod:`epbuf.cli._options` so each library's knobs sit in one place;
:func:`add_library_options` adds the groups, :func:`library_fields` reads them into
:class:`~epbuf.plan.Plan` keyword arguments (no formulas here).
"""

from __future__ import annotations

import argparse

from ._types import int_arg, nonempty_arg

__all__ = ["add_library_options", "library_fields", "ENV_READERS", "env_name_problems", "restrict_plan_options"]


def add_library_options(p: argparse.ArgumentParser) -> None:
    x = p.add_argument_group("UCCL-EP options (uccl-ep, uccl-ll)")
    x.add_argument("--platform", choices=("cuda", "rocm"),
                   help="GPU platform of the build (default cuda; rocm when --device names an AMD GPU)")
    x.add_argument("--nic", choices=("ib", "efa", "intel", "host-memory"),
                   help="network path: ib (GPU memory registered, default), efa (EFA configs, atomic buffer in host "
                        "memory), intel (atomic buffer in host memory), host-memory (RDMA and atomic buffers in "
                        "pinned host memory)")
    x.add_argument("--per-expert-batching", dest="per_expert_batching", action="store_true", default=None,
                   help="uccl-ll: UCCL-EP built with PER_EXPERT_BATCHING=1 (low-latency send buffer per expert)")
    o = p.add_argument_group("MORI-EP / pplx-kernels options")
    o.add_argument("--kernel-type", dest="kernel_type", metavar="NAME", type=nonempty_arg("a kernel type name"),
                   help="mori-ep: IntraNode, IntraNodeLL, InterNode, InterNodeV1, InterNodeV1LL, AsyncLL; "
                        "pplx: intranode, internode (default: from the topology)")
    o.add_argument("--max-total-recv-tokens", dest="max_total_recv_tokens", type=int_arg(">= 0; 0 means no cap", lo=0),
                   help="mori-ep: cap on the tokens one rank receives per dispatch (default 0: no cap)")
    o.add_argument("--quant-type", dest="quant_type", metavar="NAME", type=nonempty_arg("a quantization name"),
                   help="mori-ep: combine quantization none, fp8_direct_cast, fp8_blockwise, fp4_blockwise (default none)")
    o.add_argument("--dp-group-size", dest="dp_group_size", type=int_arg(">= 1"),
                   help="pplx: dp_size, the ranks that share one DP group's tokens (attention TP size; default 1)")
    o.add_argument("--num-scale-bytes", dest="num_scale_bytes", type=int_arg(">= 0", lo=0),
                   help="mori-ep, pplx: scale bytes per token (default FP8: ceil(hidden/128) x 4, BF16: 0)")
    o.add_argument("--max-token-type-size", dest="max_token_type_size", type=int_arg("1..8"),
                   help="mori-ep: bytes of the widest token element (default 2, BF16)")
    o.add_argument("--env", dest="env", metavar="NAME=VALUE", action="append", default=[],
                   help="an environment variable the library reads (MORI_SHMEM_HEAP_SIZE, MORI_SHMEM_MODE, "
                        "MORI_EP_COMM, MORI_FP8_COMBINE_SCALE_DIM, NVSHMEM_SYMMETRIC_SIZE); repeatable")


def library_fields(args: argparse.Namespace) -> dict:
    """The Plan fields of :func:`add_library_options`."""
    return {
        "platform": _platform_from_args(args),
        "nic": args.nic,
        "per_expert_batching": bool(args.per_expert_batching),
        "kernel_type": args.kernel_type,
        "max_total_recv_tokens": args.max_total_recv_tokens if args.max_total_recv_tokens is not None else 0,
        "quant_type": args.quant_type if args.quant_type is not None else "none",
        "dp_group_size": args.dp_group_size if args.dp_group_size is not None else 1,
        "num_scale_bytes": args.num_scale_bytes,
        "max_token_type_size": args.max_token_type_size,
        "env": env_pairs(args.env, "env"),
    }


def _platform_from_args(args: argparse.Namespace) -> str | None:
    """``--platform``, else ``rocm`` when ``--device`` names an AMD GPU, else None."""
    if args.platform is not None:
        return args.platform
    if getattr(args, "device", None) is not None:
        from ..devices import get_device
        from ..errors import UnknownNameError

        try:
            return "rocm" if get_device(args.device).vendor == "AMD" else None
        except UnknownNameError:  # the command names the unknown device itself (simulate: link presets)
            return None
    return None


def env_pairs(items: list[str], argument: str = "env") -> tuple:
    """``--env NAME=VALUE`` options as ``(name, value)`` pairs."""
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            from ..errors import InvalidArgumentError, Problem

            raise InvalidArgumentError([Problem(argument, item, "use NAME=VALUE, e.g. --env MORI_SHMEM_HEAP_SIZE=8G")])
        pairs.append((name.strip(), value))
    return tuple(pairs)


#: The environment variables each backend's model reads (``--env NAME=VALUE``): mori-ep's
#: ``epbuf.backends.mori_ep.env``, pplx's ``NVSHMEM_SYMMETRIC_SIZE``.
ENV_READERS = {
    "MORI_SHMEM_HEAP_SIZE": ("mori-ep",), "MORI_SHMEM_MODE": ("mori-ep",), "MORI_EP_COMM": ("mori-ep",),
    "MORI_FP8_COMBINE_SCALE_DIM": ("mori-ep",), "NVSHMEM_SYMMETRIC_SIZE": ("pplx",),
}


def env_name_problems(items: list[str], backends: tuple[str, ...]) -> list:
    """A problem for each ``--env NAME=...`` whose NAME none of ``backends`` reads: a typo gets
    the nearest name (``MORI_SHMEM_HEAP_SZE`` -> ``MORI_SHMEM_HEAP_SIZE``), as ``engine`` refuses
    names it does not model."""
    if not items:
        return []
    from .._names import closest
    from ..errors import Problem

    read = sorted(name for name, readers in ENV_READERS.items() if any(b in readers for b in backends))
    problems = []
    for item in items:
        name, sep, _ = item.partition("=")
        name = name.strip()
        if not sep or not name or name in read or not any(b in r for r in ENV_READERS.values() for b in backends):
            continue  # malformed (env_pairs names it), read, or --env refused as a whole above
        near = closest(name, ENV_READERS)
        if name in ENV_READERS:
            what = f"only {', '.join(ENV_READERS[name])} reads {name}; known: " + ", ".join(read)
        else:  # the suggestion first: an error line keeps 100 columns, the list comes after
            what = (f"did you mean {near}? " if near else f"not read by {'/'.join(backends)}; ") \
                + "known: " + ", ".join(read)
        problems.append(Problem("env", item, what))
    return problems


#: The options of :func:`add_library_options` and the backends that read them.
LIBRARY_OPTION_READERS = {
    "--platform": ("uccl-ep", "uccl-ll"), "--nic": ("uccl-ep", "uccl-ll"), "--per-expert-batching": ("uccl-ll",),
    "--kernel-type": ("mori-ep", "pplx"), "--max-total-recv-tokens": ("mori-ep",), "--quant-type": ("mori-ep",),
    "--dp-group-size": ("pplx",), "--num-scale-bytes": ("mori-ep", "pplx"), "--max-token-type-size": ("mori-ep",),
    "--env": ("mori-ep", "pplx"),
}


def restrict_plan_options(p: argparse.ArgumentParser, backend_options: tuple, only: tuple[str, ...] | None,
                          drop: tuple[str, ...]) -> None:
    """Take out of ``p`` the plan options a command never reads: those only backends outside
    ``only`` read (``backend_options``: ``epbuf.cli._options.BACKEND_OPTIONS``, and
    :data:`LIBRARY_OPTION_READERS`) and those in ``drop``; ``--backend`` offers ``only``. Each
    option taken out keeps its default in the parsed namespace, so the readers need no change."""
    unwanted = set(drop)
    if only is not None:
        readers = {option: who for _, option, who in backend_options} | LIBRARY_OPTION_READERS
        unwanted |= {option for option, who in readers.items() if not any(b in who for b in only)}
    for action in list(p._actions):
        if action.dest == "backend" and only is not None:
            action.choices = tuple(only)
        if unwanted & set(action.option_strings):
            p._remove_action(action)
            for container in [*p._action_groups, *p._mutually_exclusive_groups]:
                if action in container._group_actions:
                    container._group_actions.remove(action)
            for option in action.option_strings:
                p._option_string_actions.pop(option, None)
            p.set_defaults(**{action.dest: action.default})
    p._mutually_exclusive_groups[:] = [g for g in p._mutually_exclusive_groups if g._group_actions]
    p._action_groups[:] = [g for g in p._action_groups if g._group_actions or g.title in ("options", "positional arguments")]
