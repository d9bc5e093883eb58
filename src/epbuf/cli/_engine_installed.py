"""``epbuf engine sglang|megatron --from-installed -- LAUNCH LINE``: resolve the line through the engine
installed next to epbuf (:mod:`epbuf.engines.installed`, the code path of the conformance tier) and add
each argument where the engine's own code and the recipe differ as a finding; where the engine is
not installed or its internals no longer fit the stand-ins, one finding says so and the recipe's
answer stands. No formulas.
"""

from __future__ import annotations

__all__ = ["ENGINES", "with_installed"]

#: Engines whose installed resolver has a ``compare`` (``installed/<engine>.py``).
ENGINES = ("sglang", "megatron")


def _engine_argv(engine: str, tokens: list[str]) -> tuple[list[str], dict]:
    """``(the engine's own arguments, NAME=VALUE variables)`` of a launch line: the variables first, then
    the launcher stripped as the launch-line reader strips it (a positional ``sglang serve MODEL``
    becomes ``--model-path MODEL``)."""
    from ._engine_launch import _strip_program

    env: dict = {}
    rest = list(tokens)
    while rest and (rest[0] == "env" or ("=" in rest[0] and rest[0].split("=", 1)[0].isidentifier())):
        token = rest.pop(0)
        if token != "env":
            name, value = token.split("=", 1)
            env[name] = value
    rest, _, model = _strip_program(rest, [])
    if model is not None and engine == "sglang":
        rest = ["--model-path", model, *rest]
    return rest, env


def _versions(engine: str) -> tuple:
    from ..engines import get_engine

    return tuple(get_engine(engine).versions)


def with_installed(engine: str, tokens: list[str], rep, device: str | None):
    """``rep`` with the findings of the installed engine's resolution of the launch line ``tokens``.

    Raises:
        InvalidArgumentError: an engine without an installed resolver here, or no launch line.
    """
    import importlib

    from ..engines._knobs import EngineProblem
    from ..engines._report import engine_report_to_dict
    from ..engines.installed import InstalledMismatch, NotInstalled, resolve
    from ..errors import InvalidArgumentError
    from ..report import Finding

    if engine not in ENGINES:
        raise InvalidArgumentError([EngineProblem("--from-installed", engine,
                                                  f"allowed for {', '.join(ENGINES)} in this epbuf")])
    if not tokens:
        raise InvalidArgumentError([EngineProblem("--from-installed", "", "needs the launch line after --")])
    argv, env = _engine_argv(engine, tokens)
    options = {"device": device} if engine == "sglang" and device else {}
    try:
        result = resolve(engine, argv, env, **options)
    except (InstalledMismatch, NotInstalled) as error:
        result, why = None, str(error)
    if result is None:
        new = [Finding(severity="warning", code="engine.installed-unavailable",
                       message=f"--from-installed: {why}; the recipe's answer stands")]
    else:
        compare = importlib.import_module(f"epbuf.engines.installed.{engine}").compare
        pairs = compare(result, engine_report_to_dict(rep))
        bad = [p for p in pairs if p[1] != p[2]]
        version = f"{engine} {result['engine_version']}"
        refused = result.get("resolved", {}).get("refused")
        new = [Finding(severity="warning", code="engine.installed-differs",
                       message=f"the installed {version} gives {name} = {ours!r}, the recipe ({rep.version}) {theirs!r}",
                       data={"argument": name, "installed": ours, "recipe": theirs}) for name, ours, theirs in bad]
        if bad and result["engine_version"] in _versions(engine) and rep.version != result["engine_version"]:
            new.append(Finding(severity="info", code="engine.installed-version",
                               message=f"pass --engine-version {result['engine_version']} to size the buffers as the "
                                       "installed release builds them"))
        if not bad:
            new.append(Finding(severity="info", code="engine.installed-agrees",
                               message=f"the installed {version}, run on this launch line up to its EP library call, "
                                       f"agrees with the recipe ({rep.version}) on all {len(pairs)} arguments compared"
                                       + (f" (it refuses the line: {refused})" if refused else ""),
                               data={"arguments": len(pairs), "engine_version": result["engine_version"]}))
    return rep.replace(report=rep.report.replace(findings=rep.report.findings + tuple(new)))
