"""``epbuf engine vllm|sglang|megatron --from-installed -- LAUNCH LINE``: resolve the line through the
engine installed next to epbuf (:mod:`epbuf.engines.installed`, the code path of the conformance tier)
and add what it finds to the recipe's report. No formulas.

The findings, the same for every engine:

* ``engine.installed-differs`` (warning), one per compared argument where the installed engine and the
  recipe differ; ``data``: ``argument``, ``installed``, ``recipe``;
* ``engine.installed-version`` (info) with them, when the installed release is one ``--engine-version``
  knows and the recipe followed another;
* ``engine.installed-agrees`` (info) when every compared argument agrees; ``data``: ``arguments``,
  ``engine_version``;
* ``engine.installed-unavailable`` (warning) when the engine cannot answer: not installed in this Python
  (``data.reason`` ``"not-installed"``) or its internals no longer fit the stand-ins (``"stand-ins"``).
  One line says why; the recipe's answer stands and the exit status is the recipe's.
"""

from __future__ import annotations

__all__ = ["with_installed"]


def _engine_argv(engine: str, tokens: list[str]) -> tuple[list[str], dict]:
    """``(the engine's own arguments, NAME=VALUE variables)`` of a launch line: the variables first, then
    the launcher stripped as the launch-line reader strips it; a positional model becomes vLLM's
    ``serve MODEL`` and SGLang's ``--model-path MODEL``."""
    from ._engine_launch import _strip_program

    env: dict = {}
    rest = list(tokens)
    while rest and (rest[0] == "env" or ("=" in rest[0] and rest[0].split("=", 1)[0].isidentifier())):
        token = rest.pop(0)
        if token != "env":
            name, value = token.split("=", 1)
            env[name] = value
    rest, _, model = _strip_program(rest, [])
    if engine == "vllm":
        rest = ["serve", *([model] if model is not None else []), *rest]
    elif model is not None and engine == "sglang":
        rest = ["--model-path", model, *rest]
    return rest, env


def _options(engine: str, opts) -> dict:
    """The resolver's options from epbuf's: the device the engine is told it runs on (vLLM, SGLang) and
    whether vLLM's ``deep_ep`` is UCCL-EP's drop-in (``--uccl-ep``)."""
    options = {}
    if engine in ("vllm", "sglang") and getattr(opts, "device", None):
        options["device"] = opts.device
    if engine == "vllm" and getattr(opts, "knob_uccl_ep", None):
        options["uccl"] = True
    return options


def _finding(severity: str, code: str, message: str, **data):
    from ..report import Finding

    return Finding(severity=severity, code=code, message=message, data=data)


def with_installed(engine: str, tokens: list[str], rep, opts, env: dict | None = None):
    """``rep`` with the findings (module docstring) of the installed engine's resolution of the launch
    line ``tokens`` (the words after ``--``), read with epbuf's options ``opts`` (``--device``,
    ``--uccl-ep``); ``env`` (epbuf's ``--env`` pairs) joins the line's own variables.

    Raises:
        InvalidArgumentError: no launch line.
    """
    from ..engines._knobs import EngineProblem
    from ..engines._report import engine_report_to_dict
    from ..engines import get_engine
    from ..engines.installed import InstalledMismatch, NotInstalled, compare, resolve
    from ..errors import InvalidArgumentError

    if not tokens:
        raise InvalidArgumentError([EngineProblem("--from-installed", "", "needs the engine's launch line after --")])
    argv, line_env = _engine_argv(engine, tokens)
    line_env.update(env or {})
    try:
        result = resolve(engine, argv, line_env, **_options(engine, opts))
    except (NotInstalled, InstalledMismatch) as error:
        reason = "not-installed" if isinstance(error, NotInstalled) else "stand-ins"
        new = [_finding("warning", "engine.installed-unavailable",
                        f"--from-installed: {error}; the recipe's answer stands", engine=engine, reason=reason)]
        return rep.replace(report=rep.report.replace(findings=rep.report.findings + tuple(new)))
    pairs = compare(result, engine_report_to_dict(rep))
    bad = [p for p in pairs if p[1] != p[2]]
    installed = result["engine_version"]
    version = f"{engine} {installed}"
    refused = result.get("resolved", {}).get("refused")
    new = [_finding("warning", "engine.installed-refuses", f"the installed {version} refuses this line at start-up: "
                    f"{refused}", engine_version=installed, refused=refused)] if refused and bad else []
    new += [_finding("warning", "engine.installed-differs",
                    f"the installed {version} gives {name} = {ours!r}, the recipe ({rep.version}) {theirs!r}",
                    argument=name, installed=ours, recipe=theirs) for name, ours, theirs in bad]
    if bad and installed in get_engine(engine).versions and rep.version != installed:
        new.append(_finding("info", "engine.installed-version", f"pass --engine-version {installed} to size the "
                            "buffers as the installed release builds them", engine_version=installed))
    if not bad:
        new.append(_finding("info", "engine.installed-agrees",
                            f"the installed {version}, run on this launch line up to its EP library call, agrees "
                            f"with the recipe ({rep.version}) on all {len(pairs)} arguments compared"
                            + (f" (it refuses the line: {refused})" if refused else ""),
                            arguments=len(pairs), engine_version=installed))
    return rep.replace(report=rep.report.replace(findings=rep.report.findings + tuple(new)))
