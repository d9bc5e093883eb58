"""The exceptions epbuf raises. All of them are ``ValueError`` subclasses.

Every message is one line that names the argument (its Python name and its
command-line option), the offending value and what is allowed, so the CLI can
print ``str(error)`` as it is and exit with status 2.

``EpbufError``
    Root of everything below; catch this to guard a configuration.
``InvalidArgumentError``
    One or more arguments are malformed or out of the range upstream accepts
    (e.g. a negative ``hidden``, hidden bytes beyond the int32 upstream computes them in). Carries
    ``problems``: a tuple of :class:`Problem`.
``UnknownNameError``
    A model, device, backend or engine name that epbuf does not know.
``NotInReportError``
    A name ``Report.buffer`` / ``record`` / ``quantity`` or ``RecordLayout.field`` does not have
    (an ``UnknownNameError`` and a ``KeyError``).
``ConfigFileError``
    A ``config.json`` (or other input file) that is missing, unreadable, not JSON or
    lacks a key.
``MissingExtraError``
    An optional dependency (numpy, torch, matplotlib) is not installed; the message
    names the extra to install (``pip install 'epbuf[codec]'``).

One warning, not an error: ``UpstreamRefusalWarning`` (a ``UserWarning``), when a feature that
runs a plan anyway (the runtime) is given one whose report has ``error`` findings.
"""

from __future__ import annotations

__all__ = [
    "EpbufError",
    "InvalidArgumentError",
    "UnknownNameError",
    "NotInReportError",
    "ConfigFileError",
    "MissingExtraError",
    "UpstreamRefusalWarning",
    "Problem",
    "ArgumentProblem",
    "Checker",
    "option_for",
    "shown_value",
    "check_int",
    "check_bool",
]

# Python argument name -> command-line option. One table, so messages name both.
_OPTIONS = {
    "hidden": "--hidden",
    "num_topk": "--topk",
    "num_experts": "--experts",
    "num_ranks": "--ranks",
    "num_max_tokens_per_rank": "--tokens",
    "num_ranks_per_node": "--gpus-per-node",
    "num_nodes": "--nodes",
    "num_redundant_experts": "--redundant-experts",
    "num_shared_experts": "--shared-experts",
    "num_sf_packs": "--sf-packs",
    "num_sms": "--num-sms",
    "version": "--backend-version",
    "backend_version": "--backend-version",
    "num_topk_idx_bits": "--topk-idx-bits",
    "budget": "--budget",
    "hbm": "--hbm",
    "backend": "--backend",
    "allow_hybrid_mode": "--no-hybrid",
    "allow_multiple_reduction": "--single-reduction",
    "scaleup_is_nvlink": "--no-nvlink",
    "model": "--model",
    "device": "--device",
}


#: The most characters of a value an error message quotes (the rest is cut with ``…``), so
#: that a message stays one line of at most 100 columns.
SHOWN_VALUE = 48


def shown_value(value: object, limit: int = SHOWN_VALUE) -> str:
    """``repr(value)``, cut to ``limit`` characters with ``…`` (a 5,000-character value stays a
    short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def option_for(argument: str) -> str:
    """The CLI option of a Python argument name (``num_ranks -> --ranks``)."""
    return _OPTIONS.get(argument, "--" + argument.replace("_", "-"))


class EpbufError(ValueError):
    """Root of all epbuf errors (a ``ValueError``)."""


class Problem:
    """One invalid argument: its name, the value given and what upstream allows."""

    __slots__ = ("argument", "value", "allowed")

    def __init__(self, argument: str, value: object, allowed: str) -> None:
        self.argument = argument
        self.value = value
        self.allowed = allowed

    def __str__(self) -> str:
        return f"{option_for(self.argument)} ({self.argument}) = {shown_value(self.value)}: {self.allowed}"

    def __repr__(self) -> str:
        return f"Problem({self.argument!r}, {self.value!r}, {self.allowed!r})"


class ArgumentProblem(Problem):
    """A :class:`Problem` of a Python API argument that has no command-line option
    (the codec's fields, the runtime's tensors): printed as ``argument = value: allowed``."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.argument} = {shown_value(self.value)}: {self.allowed}"


class InvalidArgumentError(EpbufError):
    """Arguments outside what upstream accepts; ``problems`` lists each one."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


class UnknownNameError(EpbufError):
    """A model / device / backend / engine name epbuf does not know."""


class NotInReportError(UnknownNameError, KeyError):
    """A buffer, record, field or quantity name that a report (or record) does not have. Also a
    ``KeyError``, which these look-ups raised before; the message lists the names there are."""

    __str__ = BaseException.__str__  # KeyError's own would quote the whole line


class ConfigFileError(EpbufError):
    """An input file that is missing, unreadable, not JSON or lacks a key."""


class MissingExtraError(EpbufError):
    """An optional dependency is not installed; the message names the extra to install."""


class UpstreamRefusalWarning(UserWarning):
    """A feature that runs a plan anyway (the runtime) was given one that upstream would refuse:
    its report has ``error`` findings, which the message names by code."""


class Checker:
    """Collects every problem of one configuration, then raises them together.

    >>> c = Checker()
    >>> c.int_range("num_topk", 40, 0, 32, "kNumTopk <= 32")
    False
    >>> c.raise_if_any()
    Traceback (most recent call last):
    ...
    epbuf.errors.InvalidArgumentError: --topk (num_topk) = 40: allowed 0..32 (kNumTopk <= 32)
    """

    __slots__ = ("problems", "subclassed")

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.subclassed: list[str] = []  # arguments given as an int subclass (IntEnum ...), which pass

    def add(self, argument: str, value: object, allowed: str) -> None:
        self.problems.append(Problem(argument, value, allowed))

    def integer(self, argument: str, value: object) -> bool:
        """True when ``value`` is a plain ``int`` (bools are rejected)."""
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(argument, value, "must be an integer")
            return False
        if type(value) is not int:
            self.subclassed.append(argument)
        return True

    def int_range(self, argument: str, value: object, lo: int, hi: int | None, why: str = "") -> bool:
        """Check ``lo <= value <= hi`` (``hi=None``: no upper bound)."""
        if not self.integer(argument, value):
            return False
        assert isinstance(value, int)
        if value < lo or (hi is not None and value > hi):
            allowed = f"allowed {lo}..{hi}" if hi is not None else f"allowed >= {lo}"
            self.add(argument, value, allowed + (f" ({why})" if why else ""))
            return False
        return True

    def raise_if_any(self) -> None:
        if self.problems:
            raise InvalidArgumentError(self.problems)


def check_int(argument: str, value: object, lo: int = 0, hi: int | None = None, why: str = "") -> int:
    """``value`` when it is a plain ``int`` in ``lo..hi``, else :class:`InvalidArgumentError`.

    The guard of every public upstream-named size function: one type test and two
    comparisons on the good path, so validation never dominates the arithmetic
    (benchmarks/api_speed.py measures it against the bare formula).

    >>> check_int("hidden", 7168, 1)
    7168
    >>> check_int("hidden", -7168, 1)
    Traceback (most recent call last):
    ...
    epbuf.errors.InvalidArgumentError: --hidden (hidden) = -7168: allowed >= 1
    >>> check_int("hidden", 7168.0, 1)
    Traceback (most recent call last):
    ...
    epbuf.errors.InvalidArgumentError: --hidden (hidden) = 7168.0: must be an integer
    """
    if type(value) is int and value >= lo and (hi is None or value <= hi):
        return value
    c = Checker()
    c.int_range(argument, value, lo, hi, why)
    c.raise_if_any()
    return value  # unreachable: int_range added a problem  # pragma: no cover


def check_bool(argument: str, value: object) -> bool:
    """``value`` when it is ``True`` or ``False`` (not 0/1, not a string), else :class:`InvalidArgumentError`."""
    if value is True or value is False:
        return value
    raise InvalidArgumentError([Problem(argument, value, "must be True or False")])
