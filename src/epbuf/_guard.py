"""The argument guard of the backends' public functions: every hostile argument becomes one
:class:`~epbuf.errors.InvalidArgumentError` line, and ``int`` subclasses count as the ``int``
they are.

The upstream-named size functions validate their integers themselves (``check_int``, one type
test on the good path, ``benchmarks/api_speed.py``); functions that take a record (a
:class:`~epbuf.plan.Plan`, a ``Version``, a ``Buffer``) or a name used them without a check, so
``workspace_allocation(1)`` raised ``AttributeError``. The wrapper (:func:`epbuf._lazy.guard`,
where the packages get it without importing this module) adds nothing to a call that
succeeds: only when the function raises does it import this module and look at the arguments:

* an argument that is an ``int`` subclass (``IntEnum``, a counter type; not ``bool``), alone or
  in a tuple/list, is made a plain ``int`` and the call is made again (the fast paths test
  ``type(x) is int``);
* an argument that is not of its annotated type (``int``, ``str``, ``bool``, ``Plan``,
  ``Version`` ... resolved in the function's module; an unannotated ``plan`` is a ``Plan``) is
  named in an ``InvalidArgumentError``;
* otherwise the original exception goes on (a real error of the function).

>>> from epbuf.backends import deepep_v1
>>> deepep_v1.workspace_allocation(1)
Traceback (most recent call last):
...
epbuf.errors.InvalidArgumentError: v = 1: must be a Version
"""

from __future__ import annotations

import functools

from .errors import _OPTIONS, ArgumentProblem, EpbufError, InvalidArgumentError, Problem

__all__ = ["CAUGHT", "recover", "plain"]

_BUILTINS = {"int": int, "str": str, "bool": bool, "float": (int, float), "list": list, "tuple": tuple,
             "dict": dict, "bytes": bytes}
#: What the wrapper hands to :func:`recover`; anything else passes through untouched.
CAUGHT = (EpbufError, TypeError, AttributeError, AssertionError, KeyError, IndexError)


def plain(value: object) -> tuple[object, bool]:
    """``(value with int subclasses made int, whether anything changed)``."""
    if isinstance(value, int) and type(value) is not int and not isinstance(value, bool):
        return int(value), True
    if type(value) in (tuple, list):
        items = [plain(v) for v in value]
        if any(changed for _, changed in items):
            return type(value)(v for v, _ in items), True
    return value, False


def _expected(annotation: str, namespace: dict) -> tuple[tuple, bool, str] | None:
    """``(classes, None allowed, words)`` of an annotation string, or None when it cannot be
    resolved to classes (then the argument is not checked)."""
    classes: list = []
    allow_none = False
    words = []
    for part in annotation.split("|"):
        base = part.split("[", 1)[0].strip()
        if base == "None":
            allow_none = True
            continue
        if base in ("object", "Any", ""):
            return None
        found = _BUILTINS.get(base) or namespace.get(base)
        if not isinstance(found, (type, tuple)):
            return None
        classes += list(found) if isinstance(found, tuple) else [found]
        words.append(base)
    return tuple(classes), allow_none, " or ".join(words + (["None"] if allow_none else []))


def _type_problems(fn, args: tuple, kwargs: dict) -> list[Problem]:
    import inspect

    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return []  # wrong arity: Python's own message says it
    problems: list[Problem] = []
    for name, value in bound.arguments.items():
        annotation = fn.__annotations__.get(name)
        if annotation is None and name == "plan":  # the backends' report(plan), summarize(plan)
            import sys  # epbuf/__init__ loaded epbuf.plan before any backend (no import cycle here)

            annotation, namespace = "Plan", {"Plan": sys.modules["epbuf.plan"].Plan}
        else:
            namespace = fn.__globals__
        if not isinstance(annotation, str):
            continue
        expected = _expected(annotation, namespace)
        if expected is None:
            continue
        classes, allow_none, words = expected
        if value is None and allow_none:
            continue
        ok = isinstance(value, classes) and not (isinstance(value, bool) and bool not in classes)
        if not ok and name == "plan":
            problems.append(Problem(name, value, "must be an epbuf.Plan"))
        elif not ok:
            article = "an" if words[:1].lower() in "aeiou" else "a"
            kind = Problem if name in _OPTIONS else ArgumentProblem
            problems.append(kind(name, value, f"must be {article} {words}"))
    return problems


def recover(fn, guarded, args: tuple, kwargs: dict):
    """What :func:`epbuf._lazy.guard`'s wrapper does once ``fn(*args, **kwargs)`` raised (the
    exception is being handled): call again with int subclasses made ``int``, or raise one
    ``InvalidArgumentError`` naming the arguments of the wrong type, or re-raise."""
    import sys

    error = sys.exc_info()[1]
    new_args, changed = plain(args)
    new_kwargs = {}
    for key, value in kwargs.items():
        new_kwargs[key], moved = plain(value)
        changed = changed or moved
    if changed:
        return guarded(*new_args, **new_kwargs)
    if isinstance(error, EpbufError):
        raise error  # the function's own message names the argument already
    problems = _type_problems(fn, args, kwargs)
    if problems:
        raise InvalidArgumentError(problems) from None
    raise error
