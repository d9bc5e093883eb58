"""Issue 21: the Python API validates every public function like the rest. A sweep over the
public functions of every backend package (and epbuf's own): hostile arguments give one
``EpbufError`` line (never AttributeError, TypeError, AssertionError or a NaN size), and an
``int`` subclass counts as the ``int`` it is."""

from __future__ import annotations

import inspect
import math
import pkgutil
import re
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import epbuf
import epbuf.backends
from epbuf import Plan
from epbuf.errors import EpbufError


class Count(int):
    """An int subclass, as an IntEnum or a counter type is."""


PACKAGES = [m.name for m in pkgutil.iter_modules(epbuf.backends.__path__, "epbuf.backends.") if m.ispkg]
PUBLIC = []
for _name in PACKAGES + ["epbuf", "epbuf.fit"]:
    _mod = __import__(_name, fromlist=["*"])
    for _fn_name in getattr(_mod, "__all__", []):
        _fn = getattr(_mod, _fn_name)
        if inspect.isfunction(_fn):
            PUBLIC.append((f"{_name}.{_fn_name}", _fn))
HOSTILE = [1, -1, 0, math.nan, math.inf, "x", None, True, 10**30, Count(3), 2.5, [1], ()]


def _positional(fn) -> list:
    sig = inspect.signature(fn)
    return [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


TEXT_FIELDS = {"name", "source", "formula", "message", "record", "title", "upstream"}  # words, not sizes


def _has_nan(value, depth=0) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if depth > 3:
        return False
    if isinstance(value, (list, tuple)):
        return any(_has_nan(v, depth + 1) for v in value)
    fields = [f for f in getattr(type(value), "_record_fields", ()) if f not in TEXT_FIELDS]
    return any(_has_nan(getattr(value, f), depth + 1) for f in fields)


def test_the_sweep_covers_every_backend_package():
    names = {name.rsplit(".", 1)[0] for name, _ in PUBLIC}
    assert set(PACKAGES) <= names and len(PUBLIC) > 100


@pytest.mark.parametrize(("name", "fn"), PUBLIC, ids=[n for n, _ in PUBLIC])
@given(bad=st.sampled_from(HOSTILE), how_many=st.integers(0, 8))
@settings(max_examples=25, deadline=None)
def test_hostile_arguments_give_one_epbuf_error_line(name, fn, bad, how_many):
    params = _positional(fn)
    required = sum(1 for p in params if p.default is p.empty)
    args = [bad] * max(required, min(how_many, len(params)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            result = fn(*args)
        except EpbufError as error:
            assert "\n" not in str(error)
            return
    assert not _has_nan(result), f"{name}{tuple(args)} returned a NaN size"


DOCTEST_CALL = re.compile(r">>> (\w+)\((.*)\)\s*(?:#.*)?$")
EXAMPLES = []
for _name in PACKAGES:
    _mod = __import__(_name, fromlist=["*"])
    for _fn_name in _mod.__all__:
        _fn = getattr(_mod, _fn_name)
        for _line in (inspect.getdoc(_fn) or "").splitlines() if inspect.isfunction(_fn) else ():
            match = DOCTEST_CALL.match(_line.strip())
            if match and match.group(1) == _fn_name and re.search(r"\d", match.group(2)):
                EXAMPLES.append((_name, _fn_name, match.group(2)))


def test_there_are_examples_to_check():
    assert len(EXAMPLES) > 10


@pytest.mark.parametrize(("package", "fn_name", "arguments"), EXAMPLES,
                         ids=[f"{p}.{f}({a})" for p, f, a in EXAMPLES])
def test_an_int_subclass_counts_as_the_int(package, fn_name, arguments):
    """Every docstring example of a backend package, each bare integer made a ``Count``."""
    namespace = {**vars(__import__(package, fromlist=["*"])), "Count": Count}
    want = eval(f"{fn_name}({arguments})", namespace)
    # only integers outside strings: a quoted version id such as "2026-07" stays as it is
    pieces = re.split(r"(\"[^\"]*\"|'[^']*')", arguments)
    counted = "".join(p if p[:1] in "\"'" else re.sub(r"(?<![\w.])(\d+)(?![\w.])", r"Count(\1)", p) for p in pieces)
    assert eval(f"{fn_name}({counted})", namespace) == want


@pytest.mark.parametrize("backend", epbuf.backend_names())
def test_a_plan_of_int_subclasses_is_the_plan_of_ints(backend):
    ints = dict(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=128)
    counted = {k: Count(v) for k, v in ints.items()}
    plan = Plan(**counted)
    assert all(type(getattr(plan, k)) is int for k in ints)
    assert epbuf.report(plan, backend).num_bytes == epbuf.report(Plan(**ints), backend).num_bytes


def test_the_issues_exact_inputs():
    from epbuf.backends import deepep_v1, deepep_v2

    with pytest.raises(EpbufError, match=r"\(num_fifo_slots\) = nan: must be an integer"):
        deepep_v1.nvl_metadata_regions(1, 1, float("nan"))
    with pytest.raises(EpbufError, match="v = 1: must be a Version"):
        deepep_v1.workspace_allocation(1)
    assert deepep_v2.calculate_buffer_size(Count(32), 8, 4096, 7168, 8, True, True, True) == \
        deepep_v2.calculate_buffer_size(32, 8, 4096, 7168, 8, True, True, True)
