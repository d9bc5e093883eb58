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

__all__ = ["exports", "module", "optional", "guard", "guard_names"]


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

        raise MissingExtraError(_with_checkout_form(message)) from None


def _with_checkout_form(message: str) -> str:
    """``pip install 'epbuf[sim]'`` followed by the form that works in a checkout, where the
    package is not on an index: ``pip install 'epbuf[sim]' (in a checkout: '.[sim]')`` (short enough
    that the longest such error line stays within 100 columns)."""
    start = message.find("pip install 'epbuf[")
    end = message.find("]'", start)
    if start < 0 or end < 0:
        return message
    extra = message[start + len("pip install 'epbuf["):end]
    cut = end + 2
    return f"{message[:cut]} (in a checkout: '.[{extra}]'){message[cut:]}"


def exports(package: str, where: dict[str, str], wrap=None):
    """``(__getattr__, __dir__)`` for ``package``: each name in ``where`` is read from the
    submodule ``where[name]`` on first use and then kept in the package's namespace; functions
    pass through ``wrap`` first when given (the backends' argument guard, ``epbuf._guard``)."""

    def __getattr__(name: str):
        submodule = where.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(module(f"{package}.{submodule}"), name)
        if wrap is not None and type(value) is type(exports):
            value = wrap(value)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__


def guard(fn):
    """``fn`` with the backends' argument guard (:mod:`epbuf._guard`, imported only once a call
    raises: a hostile argument becomes one ``InvalidArgumentError`` line, an ``int`` subclass the
    ``int`` it is); ``__wrapped__`` is ``fn``."""
    from functools import wraps

    @wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError, AttributeError, AssertionError, LookupError):  # EpbufError is a ValueError
            from ._guard import CAUGHT, recover

            if not isinstance(sys.exc_info()[1], CAUGHT):
                raise
            return recover(fn, guarded, args, kwargs)

    return guarded


def guard_names(namespace: dict, names) -> None:
    """Replace each function among ``names`` in ``namespace`` (a package's globals) by its :func:`guard`."""
    for name in names:
        value = namespace.get(name)
        if type(value) is type(guard) and not hasattr(value, "__wrapped__"):  # a plain function
            namespace[name] = guard(value)
