"""``epbuf engine NAME ...``: what a serving or training engine allocates with its flags and
environment (:mod:`epbuf.engines`). No formulas live here.

:func:`configure` registers one sub-command per engine, cheaply: each engine's full option set
(its own flags, ``--env NAME=VALUE``, the shared epbuf options) is built only when that engine
runs (:func:`build_engine_parser`), so other ``epbuf`` commands never import the engines.
``--json`` prints schema ``epbuf.engine/1`` (documented in :mod:`epbuf.engines`); ``--strict``
exits with status 1 on any error finding.

Paste what you run: everything after ``--`` is the engine's own launch line
(``vllm serve MODEL ...``, ``python -m sglang.launch_server ...``, ``torchrun ... pretrain_gpt.py
...``, with leading ``NAME=VALUE`` variables). :func:`parse_launch_line` keeps the model and the
settings the engine's recipe reads and lists the rest, unchanged, in one ``engine.ignored``
finding. Options epbuf does not know given before ``--`` are treated the same way, unless they
look like a misspelling of a known option (then one line, exit 2). ``--env-from-shell`` reads
the engine's variables from the current environment (``--env`` and launch-line variables win).
"""

from __future__ import annotations

import argparse
import sys

from ._options import (
    Parser, RawDescriptionFormatter, add_device_options, add_model_options, add_wide_option, budget_from_args,
    device_from_args, device_spec_from_args, has_error_finding, int_arg, model_from_args, nonempty_arg, output_width,
    print_json,
)

from ._engine_launch import EXAMPLES, LaunchLine, parse_launch_line, unknown_options

__all__ = ["configure", "build_engine_parser", "report_from_args", "run", "parse_launch_line", "LaunchLine"]

PROG = "epbuf engine"
def configure(p: argparse.ArgumentParser, command: str) -> None:
    """Add one sub-command per engine to ``p`` (the parser of ``epbuf engine``)."""
    from ..engines import ENGINES

    p.description = ("Size the expert-parallel communication buffers an engine allocates per device with the flags "
                     "and environment it is launched with; report the limits it will hit and what to set instead. "
                     "`epbuf engine NAME --help` lists NAME's options; `epbuf engine NAME [options] -- LAUNCH LINE` "
                     "reads the engine's own command line.")
    engines = p.add_subparsers(dest="engine", metavar="ENGINE", parser_class=Parser)
    for name, (_, _, description) in ENGINES.items():
        stub = engines.add_parser(name, help=description, add_help=False, prefix_chars="\x00")
        stub.add_argument("engine_args", nargs=argparse.REMAINDER)
    p.set_defaults(run=run, engine=None, engine_args=[])


def _version_arg(versions: tuple[str, ...]):
    """``--engine-version``'s type: one of ``versions``, else one line listing them (argparse's
    own "invalid choice" wording runs past 100 columns once release numbers join the names)."""
    def parse(text: str) -> str:
        if text not in versions:
            raise argparse.ArgumentTypeError(f"{text!r} is none of {', '.join(versions)}")
        return text

    parse.__name__ = "engine version"
    return parse


def build_engine_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of ``epbuf engine NAME`` (shared options, the engine's flags, ``--env``)."""
    from ..engines import get_engine

    spec = get_engine(name)
    env_knobs = [k for k in spec.knobs if k.is_env]
    epilog = ["environment variables (--env NAME=VALUE, repeatable; --env-from-shell reads them from your shell):"]
    for k in env_knobs:
        default = "unset" if k.default is None else (int(k.default) if isinstance(k.default, bool) else k.default)
        note = "" if k.affects_size else "; no size effect"
        epilog.append(f"  {k.name} (default {default}; {k.allowed()}{note}): {k.help}")
    epilog += ["", f"paste a launch line after --, e.g. {PROG} {name} --device h200 -- {EXAMPLES.get(name, '...')}; "
                   "options epbuf does not model are listed in one warning and ignored"]
    p = Parser(prog=f"{PROG} {name}", allow_abbrev=False, formatter_class=RawDescriptionFormatter,
               description=f"{spec.title}: what it allocates per device, the limits it hits, what to set. "
                           f"{spec.ranks_help}.",
               epilog="\n".join(epilog))
    add_model_options(p, "model (explicit --hidden/--topk/--experts override it; default deepseek-v3; a Hugging "
                         "Face id works when its config.json is cached or it is a released variant of a preset)")
    g = p.add_argument_group("shape and topology")
    aliases = spec.aliases
    g.add_argument("--hidden", *aliases.get("hidden", ()), dest="hidden", type=int_arg(">= 1"), help="hidden size")
    g.add_argument("--topk", *aliases.get("num_topk", ()), dest="topk", type=int_arg(">= 0", lo=0),
                   help="routed experts per token")
    g.add_argument("--experts", *aliases.get("num_experts", ()), dest="experts", type=int_arg(">= 1"),
                   help="routed experts")
    g.add_argument("--ranks", *aliases.get("num_ranks", ()), dest="ranks", type=int_arg(">= 1"),
                   help=f"expert-parallel size ({spec.ranks_help})")
    g.add_argument("--nodes", type=int_arg(">= 1"), help="nodes the EP group spans")
    g.add_argument("--gpus-per-node", *aliases.get("num_ranks_per_node", ()), dest="gpus_per_node",
                   type=int_arg(">= 1"), help="devices per node (default min(ranks, 8))")
    d = p.add_argument_group("device memory and planning")
    add_device_options(d)
    d.add_argument("--budget", type=nonempty_arg("a byte size, e.g. 8GiB, or a share such as 10%"), metavar="SIZE",
                   help="memory these buffers may take per device, e.g. 8GiB, 4G, or 10%% (of --device / --hbm); "
                        "over it is an error finding (adds budget recommendations)")
    d.add_argument("--max-tokens-under-load", dest="max_tokens_under_load", type=int_arg(">= 1"), metavar="N",
                   help=f"most tokens one rank dispatches in one call under your load: {spec.load_help}")
    v = p.add_argument_group("versions")
    from ..engines.installed import ENGINES as INSTALLED  # the standard library only: no engine imported

    if name in INSTALLED:
        v.add_argument("--from-installed", dest="from_installed", action="store_true",
                       help="also run the launch line through the engine installed in this Python (its own parser "
                            "and start-up code, GPU parts stood in for) and report where it differs from the recipe; "
                            "where it is not installed or no longer fits the stand-ins, one warning says so and the "
                            "recipe's answer stands")
    v.add_argument("--engine-version", dest="engine_version", type=_version_arg(tuple(spec.versions)), metavar="VERSION",
                   help="; ".join(f"{k}: {t}" for k, t in spec.versions.items()) + f" (default {spec.default_version})")
    if spec.gpu:
        from ..plan import backend_versions

        v.add_argument("--backend-version", "--deepep-version", dest="backend_version", metavar="ID",
                       help="DeepEP formula generation or commit (default newest): V1 "
                            + ", ".join(backend_versions("deepep-v1")[1]) + "; V2 "
                            + ", ".join(backend_versions("deepep-v2")[1]))
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
    e.add_argument("--env-from-shell", dest="env_from_shell", action="store_true",
                   help="read the variables below from the current environment (--env and the launch line win)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.engine/1)")
    o.add_argument("--verbose", action="store_true", help="also regions, notes and every limit")
    add_wide_option(o)
    o.add_argument("--strict", action="store_true",
                   help="exit with status 1 when the configuration breaks an upstream limit (an error finding)")
    return p


def _env_pairs(items: list[str]) -> dict[str, str]:
    from ..engines._knobs import EngineProblem
    from ..errors import InvalidArgumentError

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


def _shell_env(name: str) -> dict[str, str]:
    """The engine's variables set in the current environment (``--env-from-shell``)."""
    import os

    from ..engines import get_engine

    spec = get_engine(name)
    names = [k.name for k in spec.knobs if k.is_env] + [k.env for k in spec.knobs if k.env]
    return {n: os.environ[n] for n in names if n in os.environ}


def _ranks_spelling(argv: list[str], parser: argparse.ArgumentParser) -> str | None:
    """How the EP size was typed (``--ranks``, ``--ep-size``, ...): the last of its spellings in ``argv``."""
    action = next((a for a in parser._actions if a.dest == "ranks"), None)
    if action is None:
        return None
    spelled = None
    for token in argv:
        flag = token.partition("=")[0]
        if flag in action.option_strings:
            spelled = flag
    return spelled


def report_from_args(name: str, opts: argparse.Namespace, *, ranks_flag: str | None = None,
                     launch: LaunchLine | None = None, ignored: tuple = ()):
    """The :class:`~epbuf.engines._report.EngineReport` for parsed options (no arithmetic here).
    ``ranks_flag``: how the EP size was spelled; ``launch`` adds its variables and marks the report
    as read from a launch line; ``ignored`` lists what changes no buffer."""
    from ..engines import get_engine, report

    spec = get_engine(name)
    flags = {k.name: getattr(opts, f"knob_{k.dest}") for k in spec.knobs if not k.is_env}
    env = _shell_env(name) if getattr(opts, "env_from_shell", False) else {}
    if launch is not None:
        env.update(launch.env)
    env.update(_env_pairs(opts.env))
    return report(
        name, model=model_from_args(opts), hidden=opts.hidden, num_topk=opts.topk, num_experts=opts.experts,
        num_ranks=opts.ranks, num_nodes=opts.nodes, num_ranks_per_node=opts.gpus_per_node, flags=flags,
        env=env, version=opts.engine_version, backend_version=getattr(opts, "backend_version", None),
        max_tokens_under_load=opts.max_tokens_under_load, budget=budget_from_args(opts, device_from_args(opts)),
        device=device_spec_from_args(opts) or device_from_args(opts),
        ranks_flag=ranks_flag or ("--ranks" if opts.ranks is not None else None), ignored=tuple(ignored),
        launch=launch is not None)


def _refuse_before_launch(name: str, flags: list[str]) -> None:
    """An option before ``--`` that epbuf does not know, when a launch line follows: never ignored
    (``epbuf engine vllm --dp 16 -- vllm serve ...`` would size EP 8); one line saying where it goes."""
    from ..engines._knobs import EngineProblem
    from ..errors import InvalidArgumentError

    flag, _, value = flags[0].partition("=")
    hint = ""
    if name == "vllm":
        from ..engines import _vllm_flags

        full, candidates = _vllm_flags.expand(flag.replace("_", "-") if flag.startswith("--") else flag)
        hint = f"vLLM's {full}: " if full else ""
    # What to do first: the line keeps 100 columns (the guard cuts what follows a "; ")
    raise InvalidArgumentError([EngineProblem(flag, value or flag, f"{hint}not {PROG}'s: put it in the launch line, "
                                                                   "after --")])


def run(args: argparse.Namespace) -> int:
    """Run ``epbuf engine NAME [options] [-- LAUNCH LINE]``: table, or JSON with ``--json``; status 1
    with ``--strict`` when an error finding is reported."""
    name = getattr(args, "engine", None)
    if name is None:
        from ..engines import ENGINES

        sys.stderr.write("usage: epbuf engine ENGINE [options] [-- LAUNCH LINE]; engines: " + ", ".join(ENGINES) + "\n")
        return 2
    tokens = list(args.engine_args)
    launch = None
    tokens_after: list[str] = []
    if "--" in tokens:
        cut = tokens.index("--")
        tokens_after = tokens[cut + 1:]
        tokens, launch = tokens[:cut], parse_launch_line(tokens_after, name)
    parser = build_engine_parser(name)
    argv = (list(launch.argv) if launch is not None else []) + tokens
    opts, extras = parser.parse_known_args(argv)
    before = set(tokens)
    if launch is not None and any(e in before or e.partition("=")[0] in before for e in extras if e.startswith("-")):
        flag = next(e for e in extras if e.startswith("-") and (e in before or e.partition("=")[0] in before))
        at = extras.index(flag)
        value = extras[at + 1] if "=" not in flag and at + 1 < len(extras) and not extras[at + 1].startswith("-") else ""
        _refuse_before_launch(name, [flag + (f"={value}" if value else "")])
    ignored = (launch.ignored if launch is not None else ()) + tuple(unknown_options(extras, parser))
    rep = report_from_args(name, opts, ranks_flag=_ranks_spelling(argv, parser), launch=launch, ignored=ignored)
    if getattr(opts, "from_installed", False):
        from ._engine_installed import with_installed

        rep = with_installed(name, tokens_after, rep, opts, _env_pairs(opts.env))
    status = 1 if opts.strict and has_error_finding(rep.findings) else 0
    from ..api._tools import engine_document

    data = engine_document(rep)
    if opts.json:
        print_json(data)
        return status
    from ..render.engine import render_engine_report
    from ..verdict import verdict_text

    width = output_width(opts)
    sys.stdout.write(verdict_text(data["summary"], width) + render_engine_report(rep, verbose=opts.verbose, width=width))
    return status
