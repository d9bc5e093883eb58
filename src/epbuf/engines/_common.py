"""Records and helpers shared by every engine recipe: knobs (flags and environment
variables as the engine spells them), resolved settings with their provenance, the
engine report, its JSON form, exact searches over monotone recipes.

Nothing here knows a formula; the recipes in the sibling modules compose backend
functions (``epbuf.backends.*``) and these helpers.
"""

from __future__ import annotations

from .._record import Record
from ..errors import InvalidArgumentError, Problem
from ..report import Buffer, Finding, LimitCheck, Quantity, Region, Report
from ..units import MiB

__all__ = [
    "SCHEMA",
    "Knob",
    "Setting",
    "Recommendation",
    "EngineContext",
    "EngineReport",
    "EngineProblem",
    "parse_knob",
    "resolve_settings",
    "engine_report_to_dict",
    "fixed_buffer",
    "max_buffer",
    "limit",
    "limit_findings",
]

#: JSON schema id of :func:`engine_report_to_dict` (documented in ``epbuf.engines``).
SCHEMA = "epbuf.engine/1"

# Where a setting's value came from.
SOURCES = ("flag", "env", "default", "model", "derived")


class EngineProblem(Problem):
    """One bad flag or environment variable, named as the user wrote it.

    ``str()`` is ``"--env VLLM_MOE_DP_CHUNK_SIZE = 'abc': allowed an integer >= 1 ..."``
    or ``"--max-num-batched-tokens = '0': allowed ..."``.
    """

    __slots__ = ("label",)

    def __init__(self, label: str, value: object, allowed: str) -> None:
        super().__init__(label.lstrip("-").replace("-", "_").replace(" ", "_").lower(), value, allowed)
        self.label = label

    def __str__(self) -> str:
        return f"{self.label} = {self.value!r}: {self.allowed}"


def _fail(label: str, value: object, allowed: str) -> None:
    raise InvalidArgumentError([EngineProblem(label, value, allowed)])


class Knob(Record):
    """One engine setting as the engine spells it: a command-line flag (``--max-num-batched-tokens``)
    or an environment variable (``VLLM_DEEPEP_BUFFER_SIZE_MB``, given to epbuf as ``--env NAME=VALUE``).

    Attributes:
        name: the engine's spelling; flags start with ``-``.
        kind: ``"int"``, ``"bool"`` (``0``/``1`` for variables), ``"flag"`` (``store_true``),
            ``"choice"``, ``"float"``, ``"json"`` (JSON text, or a path to a JSON file), ``"text"``.
        default: the engine's default, parsed (``None``: unset).
        lo, hi: allowed integer/float range (``None``: unbounded), as the engine parses it.
        choices: allowed values of a ``"choice"``.
        help: one line for ``--help``.
        source: upstream ``repo file:line @commit`` where the engine reads it.
        default_note: where the default comes from, when it is not the engine's own.
        aliases: other spellings of the flag (``-tp``).
        env: an environment variable that sets the same value when the flag is absent.
        affects_size: ``False`` for settings epbuf accepts but that change no buffer size.
    """

    name: str
    kind: str
    default: object = None
    lo: object = None
    hi: object = None
    choices: tuple = ()
    help: str = ""
    source: str = ""
    default_note: str = ""
    aliases: tuple = ()
    env: str = ""
    affects_size: bool = True

    @property
    def is_env(self) -> bool:
        return not self.name.startswith("-")

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_").lower()

    @property
    def label(self) -> str:
        return f"--env {self.name}" if self.is_env else self.name

    def allowed(self) -> str:
        """The allowed values in words, for error lines and ``--help``."""
        if self.kind == "choice":
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind == "bool":
            return "0 or 1"
        if self.kind == "flag":
            return "a flag without a value" if not self.is_env else "0 or 1"
        if self.kind in ("int", "float"):
            what = "an integer" if self.kind == "int" else "a number"
            if self.lo is not None and self.hi is not None:
                return f"{what} in {self.lo}..{self.hi}"
            if self.lo is not None:
                return f"{what} >= {self.lo}"
            return what
        if self.kind == "json":
            return "a JSON object, or the path of a file holding one"
        return "text"


def _parse_int(text: str) -> int | None:
    text = text.strip()
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit():  # no underscores, blanks or other digits: what every engine's int() accepts
        return None
    return int(text)


def parse_knob(knob: Knob, raw: object) -> object:
    """``raw`` (a string from the command line or environment, or a Python value) as
    ``knob`` allows it.

    >>> parse_knob(Knob(name="VLLM_MOE_DP_CHUNK_SIZE", kind="int", lo=1), " 512")
    512
    >>> parse_knob(Knob(name="VLLM_MOE_DP_CHUNK_SIZE", kind="int", lo=1), "0")
    Traceback (most recent call last):
    ...
    epbuf.errors.InvalidArgumentError: --env VLLM_MOE_DP_CHUNK_SIZE = '0': allowed an integer >= 1

    Raises:
        InvalidArgumentError: one line naming the flag or variable, the value and what is allowed.
    """
    allowed = "allowed " + knob.allowed() + (f" ({knob.help})" if knob.help and knob.kind in ("int", "float") else "")
    kind = knob.kind
    if kind in ("bool", "flag"):
        if isinstance(raw, bool):
            return raw
        value = _parse_int(str(raw)) if not isinstance(raw, int) else raw
        if value is None and str(raw).strip().lower() in ("true", "false"):
            return str(raw).strip().lower() == "true"
        if value is None:
            _fail(knob.label, raw, allowed)
        return bool(value)
    if kind == "int":
        if isinstance(raw, bool):
            _fail(knob.label, raw, allowed)
        value = raw if isinstance(raw, int) else _parse_int(str(raw))
        if value is None or (knob.lo is not None and value < knob.lo) or (knob.hi is not None and value > knob.hi):
            _fail(knob.label, raw, allowed)
        return value
    if kind == "float":
        try:
            value = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            _fail(knob.label, raw, allowed)
        if value != value or (knob.lo is not None and value < knob.lo) or (knob.hi is not None and value > knob.hi):
            _fail(knob.label, raw, allowed)
        return value
    if kind == "choice":
        value = str(raw).strip()
        if value not in knob.choices:
            _fail(knob.label, raw, allowed)
        return value
    if kind == "json":
        if isinstance(raw, dict):
            return raw
        return _load_json(knob.label, str(raw))
    return str(raw)


def _load_json(label: str, text: str) -> dict:
    """JSON text, or the path of a JSON file (SGLang's ``load_json_config`` accepts both)."""
    import json
    import os

    body = text
    looks_like_json = text.lstrip()[:1] in ("{", "[")
    if not looks_like_json:
        if not os.path.isfile(text):
            _fail(label, text, "allowed a JSON object, or the path of a file holding one (no such file)")
        try:
            with open(text, encoding="utf-8") as f:
                body = f.read()
        except OSError as error:
            _fail(label, text, f"allowed a readable JSON file ({error.strerror})")
    try:
        data = json.loads(body)
    except ValueError as error:
        _fail(label, text, f"allowed a JSON object ({error.msg} at line {error.lineno} column {error.colno})")
    if not isinstance(data, dict):
        _fail(label, text, f"allowed a JSON object, not {type(data).__name__}")
    return data


class Setting(Record):
    """One resolved setting and where its value came from.

    Attributes:
        name: the engine's spelling (``--max-num-batched-tokens``, ``VLLM_DEEPEP_BUFFER_SIZE_MB``)
            or, for values epbuf derives, a descriptive name (``EP size``).
        value: the value the recipe used.
        source: ``"flag"``, ``"env"``, ``"default"``, ``"model"`` or ``"derived"``.
        note: the upstream default's origin, or how a derived value was computed.
    """

    name: str
    value: object
    source: str
    note: str = ""


def resolve_settings(knobs: tuple[Knob, ...], flags: dict | None, env: dict | None,
                     engine: str) -> dict[str, Setting]:
    """Every knob's value: the flag if given, else its environment variable, else the default.

    Args:
        knobs: the engine's knob table.
        flags: flag name (``"--max-num-batched-tokens"``, or its ``dest``) -> raw value; ``None``
            values count as absent.
        env: variable name -> raw value (the ``--env NAME=VALUE`` pairs).
        engine: the engine's name, for messages.

    Raises:
        InvalidArgumentError: every unknown name and malformed value at once.
    """
    by_flag: dict[str, Knob] = {}
    by_env: dict[str, Knob] = {}
    for k in knobs:
        if k.is_env:
            by_env[k.name] = k
        else:
            for spelling in (k.name, k.dest, *k.aliases):
                by_flag[spelling] = k
            if k.env:
                by_env[k.env] = k
    problems: list[Problem] = []
    given_flags: dict[str, object] = {}
    for name, raw in (flags or {}).items():
        if raw is None:
            continue
        knob = by_flag.get(name)
        if knob is None:
            known = ", ".join(k.name for k in knobs if not k.is_env)
            problems.append(EngineProblem(name if name.startswith("-") else "--" + name.replace("_", "-"), raw,
                                          f"not a setting of engine {engine}; known: {known}"))
            continue
        given_flags[knob.name] = raw
    given_env: dict[str, tuple[Knob, object]] = {}
    for name, raw in (env or {}).items():
        knob = by_env.get(name)
        if knob is None:
            known = ", ".join(sorted(by_env))
            problems.append(EngineProblem(f"--env {name}", raw,
                                          f"not an environment variable epbuf models for engine {engine}; "
                                          f"known: {known}"))
            continue
        given_env[knob.name] = (knob, raw)
    settings: dict[str, Setting] = {}
    for k in knobs:
        try:
            if k.name in given_flags:
                settings[k.name] = Setting(name=k.name, value=parse_knob(k, given_flags[k.name]), source="flag")
            elif k.name in given_env:
                spelled = k.name if k.is_env else k.env
                value = parse_knob(k.replace(name=spelled) if not k.is_env else k, given_env[k.name][1])
                settings[k.name] = Setting(name=k.name, value=value, source="env",
                                           note="" if k.is_env else f"from {spelled}")
            else:
                settings[k.name] = Setting(name=k.name, value=k.default, source="default", note=k.default_note)
        except InvalidArgumentError as error:
            problems.extend(error.problems)
    if problems:
        raise InvalidArgumentError(problems)
    return settings


class Recommendation(Record):
    """What to set instead, and why.

    Attributes:
        setting: the flag or environment variable to set (``VLLM_MOE_DP_CHUNK_SIZE``).
        value: the value to set (``None`` when no value satisfies the goal).
        goal: ``"load"`` (the smallest value that serves ``--max-tokens-under-load``),
            ``"budget"`` (the largest value whose allocation fits ``--budget``), ``"limit"``
            (the largest value an upstream hard limit allows) or ``"fix"`` (a value that
            repairs a broken check).
        num_bytes: total device allocation with that value (``None`` when not computed).
        message: one sentence for people.
    """

    setting: str
    value: object
    goal: str
    message: str
    num_bytes: int | None = None


class EngineContext(Record):
    """Everything a recipe reads: the model shape, the topology, the resolved settings."""

    engine: str
    version: str
    hidden: int
    num_topk: int
    num_experts: int
    num_shared_experts: int
    model: str
    num_ranks: int | None
    num_nodes: int | None
    num_ranks_per_node: int | None
    settings: dict
    base_settings: tuple
    backend_version: str | None = None
    load: int | None = None
    budget: int | None = None
    device_name: str = ""
    device_num_bytes: int | None = None

    def value(self, name: str) -> object:
        return self.settings[name].value

    def setting(self, name: str) -> Setting:
        return self.settings[name]


class EngineReport(Record):
    """What an engine allocates per device with the given flags, whether it fits, and what to set.

    Attributes:
        engine: registry name (``"vllm"``).
        version: the engine version whose recipe applied (``"main"``).
        version_note: that version in words, with its upstream reference.
        title: one line for people.
        settings: every setting the recipe used, with its source.
        report: the allocations (one :class:`~epbuf.report.Buffer` per allocation the engine
            makes), limits and findings, as an :class:`~epbuf.report.Report`.
        recommendations: what to set instead (smallest for the load, largest for the budget,
            largest a limit allows).
        device_name, device_num_bytes: the device the share refers to (``""``/``None``: none given).
        budget: ``--budget`` bytes, or ``None``.
    """

    engine: str
    version: str
    version_note: str
    title: str
    settings: tuple
    report: Report
    recommendations: tuple = ()
    device_name: str = ""
    device_num_bytes: int | None = None
    budget: int | None = None

    @property
    def num_bytes(self) -> int:
        """Total bytes the engine allocates per device for these buffers."""
        return self.report.num_bytes

    @property
    def num_bytes_needed(self) -> int:
        return self.report.num_bytes_needed

    @property
    def share(self) -> float | None:
        """``num_bytes`` as a fraction of the device's memory (``None`` without a device)."""
        return self.num_bytes / self.device_num_bytes if self.device_num_bytes else None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.report.findings

    @property
    def limits(self) -> tuple[LimitCheck, ...]:
        return self.report.limits

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    def recommendation(self, setting: str, goal: str) -> Recommendation:
        for r in self.recommendations:
            if r.setting == setting and r.goal == goal:
                return r
        raise KeyError((setting, goal))

    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.report.findings if f.severity == "error")


def _json_value(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return str(value)


def engine_report_to_dict(rep: EngineReport) -> dict:
    """The stable JSON form (schema ``epbuf.engine/1``, documented in :mod:`epbuf.engines`)."""
    from ..report import report_to_dict

    device = None
    if rep.device_num_bytes:
        device = {"name": rep.device_name, "num_bytes": rep.device_num_bytes, "share": rep.share}
    return {
        "schema": SCHEMA,
        "engine": rep.engine,
        "version": rep.version,
        "version_note": rep.version_note,
        "title": rep.title,
        "settings": [{"name": s.name, "value": _json_value(s.value), "source": s.source, "note": s.note}
                     for s in rep.settings],
        "num_bytes": rep.num_bytes,
        "num_bytes_needed": rep.num_bytes_needed,
        "device": device,
        "budget": rep.budget,
        "fits_budget": None if rep.budget is None else rep.num_bytes <= rep.budget,
        "errors": [f.code for f in rep.errors()],
        "recommendations": [{"setting": r.setting, "value": _json_value(r.value), "goal": r.goal,
                             "num_bytes": r.num_bytes, "message": r.message} for r in rep.recommendations],
        "report": report_to_dict(rep.report),
    }


# --- exact searches over monotone recipes ------------------------------------------------
# --- building blocks of engine reports --------------------------------------------------
def fixed_buffer(name: str, num_bytes: int, formula: str, source: str, *, needed: int | None = None,
                 region: str = "") -> Buffer:
    """An allocation whose size the engine fixes (an environment variable in MiB, an HCCL
    window): one region; ``needed`` is what the library's own sizing says it needs."""
    used = num_bytes if needed is None else needed
    return Buffer.combine(name, [Region(name=region or name, num_bytes=num_bytes, num_bytes_used=used,
                                        formula=formula, source=source)], "sum", 1, source=source)


def max_buffer(name: str, regions: list[Region], source: str) -> Buffer:
    """An allocation sized as the max of candidate hints (``num_bytes = max(...)``, as the
    engines write it): regions with rule ``"max"``, no further rounding (the hints are aligned)."""
    return Buffer.combine(name, regions, "max", 1, source=source)


def limit(name: str, value: int, relation: str, bound: int, source: str, enforced: str = "host") -> LimitCheck:
    """A :class:`LimitCheck` whose ``ok`` is computed from ``relation``."""
    ok = {"<=": value <= bound, "<": value < bound, ">=": value >= bound, ">": value > bound,
          "==": value == bound}[relation]
    return LimitCheck(name=name, value=value, relation=relation, bound=bound, ok=ok, source=source,
                      enforced=enforced)


def limit_findings(prefix: str, limits: list[LimitCheck], what: dict | None = None) -> list[Finding]:
    """One ``error`` finding per broken limit; ``what`` maps a limit name to the consequence."""
    out = []
    for lim in limits:
        if lim.ok:
            continue
        consequence = (what or {}).get(lim.name, "upstream refuses this configuration")
        out.append(Finding(severity="error", code=f"{prefix}.limit",
                           message=f"{lim.name}: {lim.value:,} breaks {lim.relation} {lim.bound:,} "
                                   f"({lim.source}); {consequence}",
                           data={"limit": lim.name, "value": lim.value, "bound": lim.bound}))
    return out


def mib_ceil(num_bytes: int) -> int:
    """Whole MiB that hold ``num_bytes``."""
    return -(-num_bytes // MiB)


def quantity(name: str, value: int, unit: str = "", source: str = "") -> Quantity:
    return Quantity(name=name, value=value, unit=unit, source=source)


def topology(ctx: EngineContext, num_ranks: int) -> tuple[int, int]:
    """``(ranks_per_node, num_nodes)`` for ``num_ranks`` from ``--gpus-per-node`` / ``--nodes``
    (default ``min(num_ranks, 8)`` per node).

    Raises:
        InvalidArgumentError: a node size or count that does not divide the ranks, or both given
            and disagreeing.
    """
    per_node, nodes = ctx.num_ranks_per_node, ctx.num_nodes
    problems: list[Problem] = []
    if per_node is not None and num_ranks % per_node:
        problems.append(EngineProblem("--gpus-per-node", per_node, f"must divide the EP size {num_ranks}"))
    if nodes is not None and num_ranks % nodes:
        problems.append(EngineProblem("--nodes", nodes, f"must divide the EP size {num_ranks}"))
    if not problems and per_node is not None and nodes is not None and per_node * nodes != num_ranks:
        problems.append(EngineProblem("--nodes", nodes, f"--nodes x --gpus-per-node = {nodes * per_node} "
                                                        f"must equal the EP size {num_ranks}"))
    if problems:
        raise InvalidArgumentError(problems)
    if per_node is None:
        per_node = num_ranks // nodes if nodes is not None else min(num_ranks, 8)
    return per_node, num_ranks // per_node
