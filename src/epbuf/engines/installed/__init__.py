"""Resolve a launch line through the engine installed next to epbuf, running the engine's own
parser and start-up code up to its call into the EP library, with its GPU parts stood in for.

``resolve(engine, launch_argv, env)`` imports ``epbuf.engines.installed.<engine>`` and returns
what it captured::

    {"engine": "vllm", "engine_version": "0.33.0",
     "calls": [{"library": "deep_ep", "name": "Buffer", "args": {...}}, ...],
     "resolved": {...}}

``calls`` lists the EP library calls in order (empty: the engine builds no EP buffer for this
line); ``resolved`` holds the engine's own values epbuf compares with its recipe (tokens, EP size,
backend). The same modules drive ``epbuf engine NAME --from-installed`` and the conformance tier
(``tests/conformance/``), so both are one code path. Importing this package uses the standard
library only; the engine is imported when :func:`resolve` runs.
"""

from __future__ import annotations

from ...errors import EpbufError

__all__ = ["InstalledMismatch", "NotInstalled", "resolve", "ENGINES"]

#: Engines with a resolver module here (``installed/<name>.py``).
ENGINES = ("vllm", "sglang", "megatron")


class InstalledMismatch(EpbufError):
    """The installed engine's internals no longer fit the stand-ins (one line saying where)."""


class NotInstalled(EpbufError):
    """The engine is not importable in this Python."""


def resolve(engine: str, launch_argv: list[str], env: dict | None = None, **options) -> dict:
    """Run ``engine``'s own code on ``launch_argv`` (the launch line's words after the program,
    e.g. ``["serve", "deepseek-ai/DeepSeek-V3", "-dp", "16", ...]``) with environment ``env``.

    Raises:
        NotInstalled: the engine cannot be imported.
        InstalledMismatch: its code no longer fits the stand-ins.
    """
    import importlib

    if engine not in ENGINES:
        raise EpbufError(f"--from-installed = {engine!r}: engines with an installed resolver are {', '.join(ENGINES)}")
    try:
        module = importlib.import_module(f"{__name__}.{engine}")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith(__name__):
            raise EpbufError(f"--from-installed: no resolver for {engine} in this epbuf") from None
        raise
    return module.resolve(list(launch_argv), dict(env or {}), **options)
