"""Engine settings as the engine spells them: :class:`Knob` (a flag or an environment
variable, with its default and range), :func:`parse_knob`, and :func:`resolve_settings`, which
turns the flags and ``--env`` pairs a user gives into :class:`Setting` values with their
provenance. No formulas.
"""

from __future__ import annotations

from .._record import Record
from ..errors import InvalidArgumentError, Problem

__all__ = ["SOURCES", "Knob", "Setting", "EngineProblem", "parse_knob", "resolve_settings"]

#: The widest integer any engine setting reaches upstream (C++ ``int64_t`` / ``long``); Python
#: engines accept more, but every size they compute ends in a 64-bit integer.
INT_SETTING_MAX = (1 << 63) - 1
#: Nesting a JSON setting may have (real ones nest 2-3 deep; 10,000 deep overflows the parser's stack).
MAX_JSON_DEPTH = 64

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


def _shown(value: object, limit: int = 20) -> object:
    """``value`` for an error line: long text cut to ``limit`` characters with the total length,
    integers of hundreds of digits named by their length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'thousands of'} digits>"
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}… ({len(value):,} characters)"
    return value


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
            what = "an integer" if self.kind == "int" else "a finite number"
            if self.lo is not None and self.hi is not None:
                return f"{what} in {self.lo}..{self.hi}"
            if self.lo is not None:
                return f"{what} >= {self.lo}"
            return what
        if self.kind == "json":
            return "a JSON object, or the path of a file holding one"
        return "text"


def _parse_int(text: str) -> int | None:
    """ASCII decimal digits with an optional sign (what ``int()``, ``std::stoi`` and ``strtol`` all
    accept), else ``None``. ``str.isdigit`` alone would pass ``'²'``, which ``int()`` rejects; a
    value of more than 19 digits is beyond every setting's 64-bit range and is not converted
    (``int()`` refuses 4,301 digits and more)."""
    text = text.strip()
    body = text[1:] if text[:1] in "+-" else text
    if not (body.isascii() and body.isdigit()) or len(body.lstrip("0")) > 19:
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
    allowed = "allowed " + knob.allowed()
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
        hi = knob.hi if knob.hi is not None else INT_SETTING_MAX
        if value is None or (knob.lo is not None and value < knob.lo) or value > hi:
            digits = str(raw).strip().lstrip("+")
            huge = value is None and digits.isascii() and digits.isdigit()  # digits, but more than 19 of them
            if (huge or (value is not None and value > hi)) and knob.hi is None:
                allowed += "; at most 2^63-1 (64-bit)"
            _fail(knob.label, _shown(raw), allowed)
        return value
    if kind == "float":
        import math

        if isinstance(raw, bool):
            _fail(knob.label, raw, allowed)
        try:
            value = float(raw) if isinstance(raw, (int, float)) else float(str(raw).strip())
        except (TypeError, ValueError, OverflowError):
            _fail(knob.label, _shown(raw), allowed)
        if not math.isfinite(value) or (knob.lo is not None and value < knob.lo) or \
                (knob.hi is not None and value > knob.hi):
            _fail(knob.label, _shown(raw), allowed)
        return value
    if kind == "choice":
        value = str(raw).strip()
        if value not in knob.choices:
            from .._names import closest

            close = closest(value, map(str, knob.choices))
            _fail(knob.label, raw, (f"did you mean {close}? " if close else "") + allowed)
        return value
    if kind == "json":
        if isinstance(raw, dict):
            return raw
        return load_json(knob.label, str(raw))
    if knob.name.startswith("-") and not str(raw).strip():
        # An empty flag value is a script's unset variable, not a setting: the engines' own parsers
        # refuse it or read it as something else. (An empty environment variable stays text.)
        _fail(knob.label, raw, "allowed a non-empty value")
    return str(raw)


def _json_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON ``text``, strings skipped — checked before parsing, so
    10,000 nested brackets give one line instead of ``RecursionError``."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def load_json(label: str, text: str) -> dict:
    """JSON text, or the path of a JSON file (SGLang's ``load_json_config`` accepts both). Files are
    read only when regular and at most 64 MiB (``models.MAX_CONFIG_BYTES``); nesting beyond
    :data:`MAX_JSON_DEPTH` and integers of more than 4,300 digits are refused with one line."""
    body = text
    looks_like_json = text.lstrip()[:1] in ("{", "[")
    if not looks_like_json:
        from ..models.config_json import read_config_text  # regular files only, size-capped

        body = read_config_text(text, lambda why: InvalidArgumentError(
            [EngineProblem(label, _shown(text), "a JSON object or file: "
                          + why.replace("; give a config.json file", "").replace("a config.json", "a JSON setting"))]))
    return parse_json_object(label, body, shown=text)


def parse_json_object(label: str, body: str, *, shown: str | None = None) -> dict:
    """``body`` parsed as one JSON object; ``shown`` is what the user gave (text or path) for the
    error line. Nesting beyond :data:`MAX_JSON_DEPTH` and integers beyond ``int()``'s digit limit
    are one line, not ``RecursionError`` / ``ValueError``."""
    import json

    shown = body if shown is None else shown
    if _json_depth(body) > MAX_JSON_DEPTH:
        _fail(label, _shown(shown), f"allowed a JSON object nested at most {MAX_JSON_DEPTH} deep")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as error:
        _fail(label, _shown(shown), f"allowed a JSON object ({error.msg} at line {error.lineno} column {error.colno})")
    except (ValueError, RecursionError) as error:  # int() digit limit; a stack limit lower than our depth
        _fail(label, _shown(shown), f"allowed a JSON object ({str(error).split(';')[0]})")
    if not isinstance(data, dict):
        _fail(label, _shown(shown), f"allowed a JSON object, not {type(data).__name__}")
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
            from .._names import closest

            near = closest(name, sorted(by_env))
            if near:  # the name is what is wrong, not its value (and the line keeps 100 columns)
                problems.append(EngineProblem("--env", name, f"did you mean {near}?"))
            else:
                problems.append(EngineProblem(f"--env {name}", raw, f"not a variable engine {engine} reads; see "
                                                                    f"epbuf engine {engine} --help"))
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
