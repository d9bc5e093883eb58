"""Resolve a launch line through the engine installed next to epbuf, running the engine's own
parser and start-up code up to its call into the EP library, with its GPU parts stood in for.

``resolve(engine, launch_argv, env)`` imports ``epbuf.engines.installed.<engine>`` and returns
what it captured::

    {"engine": "vllm", "engine_version": "0.33.0",
     "calls": [{"library": "deep_ep", "name": "Buffer", "args": {...}}, ...],
     "resolved": {...}}

``calls`` lists the EP library calls in order (empty: the engine builds no EP buffer for this
line); ``resolved`` holds the engine's own values epbuf compares with its recipe (tokens, EP size,
backend; ``refused``: the engine's own start-up refusal of the line). ``compare(found, report)``
lists ``(argument, the engine's value, epbuf's value)`` against an ``epbuf.engine/1`` report of the
same line, through the engine module's own ``compare``. The same functions drive ``epbuf engine NAME
--from-installed`` (:mod:`epbuf.cli._engine_installed`) and the conformance tier
(``tests/conformance/``), so both are one code path.

Two ways it cannot answer, the same for every engine: :class:`NotInstalled` (the engine's package is
not importable in this Python) and :class:`InstalledMismatch` (its code no longer fits the stand-ins:
another release renamed or re-signed something); both messages are one line. Importing this package
uses the standard library only; the engine is imported when :func:`resolve` runs.
"""

from __future__ import annotations

import contextlib
import os

from ...errors import EpbufError

__all__ = ["ENGINES", "InstalledMismatch", "NotInstalled", "compare", "resolve", "stand_in_errors", "title"]

#: Engines with a resolver module here (``installed/<name>.py``): (import name, distribution, title).
ENGINES = {"vllm": ("vllm", "vllm", "vLLM"), "sglang": ("sglang", "sglang", "SGLang"),
           "megatron": ("megatron.core", "megatron-core", "megatron-core")}


class InstalledMismatch(EpbufError):
    """The installed engine's internals no longer fit the stand-ins (one line saying where)."""


class NotInstalled(EpbufError):
    """The engine is not importable in this Python."""


def title(engine: str) -> str:
    """The engine's package as its users know it (``vLLM``, ``SGLang``, ``megatron-core``)."""
    return ENGINES[engine][2]


def _installed(engine: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(ENGINES[engine][0]) is not None
    except ModuleNotFoundError:  # a parent package (``megatron``) is missing
        return False


def _version(engine: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(ENGINES[engine][1])
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


@contextlib.contextmanager
def stand_in_errors(engine: str):
    """Turn what the engine's code raises where it no longer fits the stand-ins (a missing attribute or
    module, a changed signature, a renamed key) into one :class:`InstalledMismatch` line;
    ``EPBUF_INSTALLED_TRACEBACK=1`` lets the original through, for whoever updates the stand-ins."""
    try:
        yield
    except (AttributeError, ImportError, TypeError, KeyError) as error:
        if os.environ.get("EPBUF_INSTALLED_TRACEBACK"):
            raise
        text = str(error).splitlines()[0] if str(error) else ""
        raise InstalledMismatch(f"the installed {title(engine)} {_version(engine)} no longer fits epbuf's stand-ins "
                                f"({type(error).__name__}: {text})") from None


def _module(engine: str):
    import importlib

    if engine not in ENGINES:
        raise EpbufError(f"--from-installed = {engine!r}: engines with an installed resolver are {', '.join(ENGINES)}")
    return importlib.import_module(f"{__name__}.{engine}")


def resolve(engine: str, launch_argv: list[str], env: dict | None = None, **options) -> dict:
    """Run ``engine``'s own code on ``launch_argv`` (the launch line's words after the program: for
    vLLM ``["serve", MODEL, ...]``, for SGLang ``["--model-path", MODEL, ...]``, for Megatron-LM the
    training script's flags) with environment ``env``. ``options`` are the engine module's own
    (``device``: an epbuf device name, for vLLM and SGLang; ``uccl``: vLLM's ``deep_ep`` is UCCL-EP's).

    Raises:
        NotInstalled: the engine cannot be imported.
        InstalledMismatch: its code no longer fits the stand-ins.
    """
    module = _module(engine)
    if not _installed(engine):
        import sys

        raise NotInstalled(f"{title(engine)} is not installed in this Python ({sys.executable})")
    return module.resolve(list(launch_argv), dict(env or {}), **options)


def compare(found: dict, rep: dict) -> list[tuple[str, object, object]]:
    """``[(argument, the engine's value, epbuf's value)]`` for every argument compared between what
    :func:`resolve` captured (``found``, whose ``engine`` picks the engine module's ``compare``) and
    an ``epbuf.engine/1`` JSON report ``rep`` of the same line. Equal values agree."""
    return _module(found["engine"]).compare(found, rep)
