"""``epbuf engine NAME ...``: the command line of :mod:`epbuf.engines`. No formulas live here.

Registration (one line in ``epbuf.cli.build_parser``)::

    from .engines.cli import add_parser as _add_engine; _add_engine(sub)

:func:`add_parser` registers ``engine`` and one sub-command per engine, cheaply: each
engine's full option set (its own flags, ``--env NAME=VALUE``, the shared epbuf options) is
built only when that engine runs (:func:`build_engine_parser`), so other ``epbuf`` commands
never import the engines. Errors are one line and exit status 2 (``epbuf.cli._Parser``);
``--json`` prints schema ``epbuf.engine/1`` (documented in :mod:`epbuf.engines`).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_parser", "build_engine_parser", "run_engine", "report_from_args", "render_engine_report"]

PROG = "epbuf engine"


def add_parser(sub) -> None:
    """Register ``engine`` with one sub-command per engine on ``sub`` (the subparsers of ``epbuf``)."""
    from ..cli import _Parser
    from . import ENGINES

    p = sub.add_parser("engine", help="what a serving/training engine allocates with its flags; fit and fixes",
                       description="Size the expert-parallel communication buffers an engine allocates per device "
                                   "with the flags and environment it is launched with; report the limits it will "
                                   "hit and what to set instead. `epbuf engine NAME --help` lists NAME's options.")
    engines = p.add_subparsers(dest="engine", metavar="ENGINE", parser_class=_Parser)
    for name, (_, _, description) in ENGINES.items():
        stub = engines.add_parser(name, help=description, add_help=False, prefix_chars="\x00")
        stub.add_argument("engine_args", nargs=argparse.REMAINDER)
    p.set_defaults(run=run_engine, engine=None, engine_args=[])


def build_engine_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of ``epbuf engine NAME`` (shared options, the engine's flags, ``--env``)."""
    from ..cli import _Parser, _add_device_options, _add_model_options, _int_arg, _positive_bytes_arg
    from . import get_engine

    spec = get_engine(name)
    env_knobs = [k for k in spec.knobs if k.is_env]
    epilog = ["environment variables (--env NAME=VALUE, repeatable):"]
    for k in env_knobs:
        default = "unset" if k.default is None else (int(k.default) if isinstance(k.default, bool) else k.default)
        note = "" if k.affects_size else "; no size effect"
        epilog.append(f"  {k.name} (default {default}; {k.allowed()}{note}): {k.help}")
    p = _Parser(prog=f"{PROG} {name}", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
                description=f"{spec.title}: what it allocates per device, the limits it hits, what to set. "
                            f"{spec.ranks_help}.",
                epilog="\n".join(epilog))
    _add_model_options(p, "model (explicit --hidden/--topk/--experts override it; default deepseek-v3)")
    g = p.add_argument_group("shape and topology")
    aliases = spec.aliases
    g.add_argument("--hidden", *aliases.get("hidden", ()), dest="hidden", type=_int_arg(">= 1"), help="hidden size")
    g.add_argument("--topk", *aliases.get("num_topk", ()), dest="topk", type=_int_arg(">= 0", lo=0),
                   help="routed experts per token")
    g.add_argument("--experts", *aliases.get("num_experts", ()), dest="experts", type=_int_arg(">= 1"),
                   help="routed experts")
    g.add_argument("--ranks", *aliases.get("num_ranks", ()), dest="ranks", type=_int_arg(">= 1"),
                   help=f"expert-parallel size ({spec.ranks_help})")
    g.add_argument("--nodes", type=_int_arg(">= 1"), help="nodes the EP group spans")
    g.add_argument("--gpus-per-node", *aliases.get("num_ranks_per_node", ()), dest="gpus_per_node",
                   type=_int_arg(">= 1"), help="devices per node (default min(ranks, 8))")
    d = p.add_argument_group("device memory and planning")
    _add_device_options(d)
    d.add_argument("--budget", type=_positive_bytes_arg, metavar="SIZE",
                   help="memory these buffers may take per device, e.g. 8GiB (adds budget recommendations)")
    d.add_argument("--max-tokens-under-load", dest="max_tokens_under_load", type=_int_arg(">= 1"), metavar="N",
                   help=f"most tokens one rank dispatches in one call under your load: {spec.load_help}")
    v = p.add_argument_group("versions")
    v.add_argument("--engine-version", dest="engine_version", choices=tuple(spec.versions),
                   help="; ".join(f"{k}: {t}" for k, t in spec.versions.items()) + f" (default {spec.default_version})")
    if spec.gpu:
        from ..backends import deepep_v1, deepep_v2

        v.add_argument("--backend-version", "--deepep-version", dest="backend_version", metavar="ID",
                       help="DeepEP formula generation or commit (default newest): V1 "
                            + ", ".join(x.id for x in deepep_v1.list_versions()) + "; V2 " + ", ".join(deepep_v2.VERSIONS))
    e = p.add_argument_group(f"{spec.title} settings (spelled as {spec.title} spells them)")
    for k in spec.knobs:
        if k.is_env:
            continue
        default = "" if k.default is None or k.kind == "flag" else f" (default {k.default})"
        env = f"; or {k.env}" if k.env else ""
        if k.kind == "flag":
            e.add_argument(k.name, *k.aliases, dest=f"knob_{k.dest}", action="store_true", default=None,
                           help=k.help + env)
        else:
            e.add_argument(k.name, *k.aliases, dest=f"knob_{k.dest}", metavar=k.kind.upper() if k.kind != "choice"
                           else "{" + ",".join(k.choices) + "}", help=f"{k.help}{default}; {k.allowed()}{env}")
    e.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable the engine reads (see the list below); repeatable")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.engine/1)")
    o.add_argument("--verbose", action="store_true", help="also regions, notes and every limit")
    return p


def _env_pairs(items: list[str]) -> dict[str, str]:
    from ..errors import InvalidArgumentError
    from ._knobs import EngineProblem

    env: dict[str, str] = {}
    problems = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            problems.append(EngineProblem("--env", item, "expected NAME=VALUE, e.g. VLLM_DEEPEP_BUFFER_SIZE_MB=1024"))
            continue
        env[name.strip()] = value
    if problems:
        raise InvalidArgumentError(problems)
    return env


def report_from_args(name: str, opts: argparse.Namespace):
    """The :class:`~epbuf.engines._report.EngineReport` for parsed options (no arithmetic here)."""
    from ..cli import _device_from_args, _model_from_args
    from . import get_engine, report

    spec = get_engine(name)
    flags = {k.name: getattr(opts, f"knob_{k.dest}") for k in spec.knobs if not k.is_env}
    return report(
        name, model=_model_from_args(opts), hidden=opts.hidden, num_topk=opts.topk, num_experts=opts.experts,
        num_ranks=opts.ranks, num_nodes=opts.nodes, num_ranks_per_node=opts.gpus_per_node, flags=flags,
        env=_env_pairs(opts.env), version=opts.engine_version, backend_version=getattr(opts, "backend_version", None),
        max_tokens_under_load=opts.max_tokens_under_load, budget=opts.budget, device=_device_from_args(opts))


def run_engine(args: argparse.Namespace) -> int:
    """Run ``epbuf engine NAME [options]``: table, or JSON with ``--json``."""
    name = getattr(args, "engine", None)
    if name is None:
        from . import ENGINES

        sys.stderr.write("usage: epbuf engine ENGINE [options]; engines: " + ", ".join(ENGINES) + "\n")
        return 2
    opts = build_engine_parser(name).parse_args(args.engine_args)
    rep = report_from_args(name, opts)
    if opts.json:
        from ..cli import _print_json
        from ._report import engine_report_to_dict

        _print_json(engine_report_to_dict(rep))
        return 0
    sys.stdout.write(render_engine_report(rep, verbose=opts.verbose))
    return 0


def _value(v: object) -> str:
    from ..units import format_int

    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return format_int(v)
    if isinstance(v, dict):
        import json

        return json.dumps(v, separators=(",", ":"))
    return str(v)


def render_engine_report(rep, verbose: bool = False) -> str:
    """The human form of an engine report: settings, allocations per device, findings, limits,
    what to set."""
    from ..render import bytes_cell, table
    from ..units import format_bytes, format_int

    r = rep.report
    out = [rep.title, f"  version:  {rep.engine} {rep.version} - {rep.version_note}", f"  upstream: {r.upstream}", ""]
    out.append("Settings")
    # Without --verbose, switches left at their default "off" are not listed.
    rows = [[s.name, _value(s.value), s.source, s.note] for s in rep.settings
            if verbose or not (s.source == "default" and s.value is False)]
    out.append(table(["setting", "value", "from", "note"], rows))
    out.append("")
    out.append("Allocations per device")
    if r.buffers:
        rows = []
        for b in r.buffers:
            formula = (b.regions[0].formula if len({x.formula for x in b.regions}) == 1
                       else f"{b.rule} of {len(b.regions)} regions")
            needed = format_int(b.num_bytes_needed) if b.num_bytes_needed != b.num_bytes else "same"
            rows.append([b.name, format_int(b.num_bytes), format_bytes(b.num_bytes), needed, formula])
        rows.append(["total", format_int(rep.num_bytes), format_bytes(rep.num_bytes),
                     format_int(rep.num_bytes_needed) if rep.num_bytes_needed != rep.num_bytes else "same", ""])
        out.append(table(["buffer", "bytes", "", "needed", "formula"], rows, right={1, 2, 3}))
    else:
        out.append("  (none)")
    if rep.device_num_bytes:
        out.append(f"  share of {rep.device_name} ({format_bytes(rep.device_num_bytes)}): {rep.share * 100:.2f} %")
    if rep.budget is not None:
        state = "fits" if rep.num_bytes <= rep.budget else f"over by {bytes_cell(rep.num_bytes - rep.budget)}"
        out.append(f"  --budget {format_bytes(rep.budget)}: {state}")
    if verbose:
        for b in r.buffers:
            if len(b.regions) < 2 and not b.source:
                continue
            out.append("")
            out.append(f"{b.name} = {b.rule} of its regions   [{b.source}]")
            rows = [[x.name, format_int(x.num_bytes), format_bytes(x.num_bytes), x.formula, x.source] for x in b.regions]
            out.append(table(["region", "bytes", "", "formula", "source"], rows, right={1, 2}))
    out.append("")
    shown = [f for f in r.findings if verbose or f.severity != "info"]
    notes = len(r.findings) - len(shown)
    if shown:
        out.append("Findings")
        out += [f"  {f.severity}: {f.message}  [{f.code}]" for f in shown]
    if notes:
        out.append(f"  ({notes} notes; --verbose shows them)")
    broken = r.failed_limits()
    limits = r.limits if verbose else broken
    if limits:
        out.append("")
        out.append("Limits" + ("" if verbose else " broken"))
        rows = [[lim.name, format_int(lim.value), lim.relation, format_int(lim.bound), "ok" if lim.ok else "BROKEN",
                 lim.source] for lim in limits]
        out.append(table(["limit", "value", "", "bound", "", "source"], rows, right={1, 3}))
    elif r.limits:
        out.append(f"Limits: all {len(r.limits)} hold (--verbose lists them)")
    if rep.recommendations:
        out.append("")
        out.append("What to set")
        rows = []
        for x in rep.recommendations:
            value = f"{x.setting}={_value(x.value)}" if x.value is not None else f"{x.setting}: none"
            total = format_bytes(x.num_bytes) if x.num_bytes is not None else ""
            rows.append([value, x.goal, total, x.message])
        out.append(table(["setting", "goal", "total", "why"], rows, right={2}))
    return "\n".join(out).rstrip() + "\n"
