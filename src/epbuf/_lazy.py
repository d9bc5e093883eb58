"""Lazy re-exports: a package keeps its public names importable while only the submodule a
caller uses is loaded.

Why: cold start. ``epbuf hint`` renders one report; loading the compare, sweep and engine
renderers (or every model preset and the ``config.json`` reader for a device lookup) only to
re-export them would cost what splitting the modules saved (benchmarks/cold_start.py). A
package built with :func:`exports` answers ``from epbuf.render import render_report`` by
importing ``epbuf.render.report`` on first use (PEP 562 module ``__getattr__``).

>>> import epbuf.models
>>> getattr_, dir_ = exports("epbuf.models", {"model_names": "presets"})
>>> getattr_("model_names")()[:2]
('deepseek-v3', 'deepseek-r1')
>>> "model_names" in dir_()
True
"""

from __future__ import annotations

import sys

__all__ = ["exports", "module", "optional"]


def module(name: str):
    """The module ``name``, imported if need be: ``importlib.import_module`` without importing
    ``importlib`` (its package is not loaded at start-up; importing it cost 0.2 ms of every
    command's cold start)."""
    found = sys.modules.get(name)
    if found is None or getattr(getattr(found, "__spec__", None), "_initializing", False):
        # Absent, or another thread is still running its body (``epbuf serve`` runs commands in
        # threads): ``__import__`` waits on the module's import lock as the import statement does.
        __import__(name)
        found = sys.modules[name]
    return found


def optional(name: str, message: str):
    """The optional dependency ``name`` (numpy, torch, matplotlib), imported on first use, or
    :class:`~epbuf.errors.MissingExtraError` with ``message`` (which names the extra). An import
    that Ctrl-C interrupted stays a ``KeyboardInterrupt``: a C extension interrupted while it
    loads can surface as an ``ImportError``, which is not a missing library."""
    try:
        return module(name)
    except ImportError as error:
        cause = error
        while cause is not None:
            if isinstance(cause, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            cause = cause.__cause__ or cause.__context__
        from .errors import MissingExtraError

        raise MissingExtraError(message) from None


def exports(package: str, where: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package``: each name in ``where`` is read from the
    submodule ``where[name]`` on first use and then kept in the package's namespace."""

    def __getattr__(name: str):
        submodule = where.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(module(f"{package}.{submodule}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
