"""epbuf._jsonout.dumps writes what json.dumps(indent=2) writes (cold start: --json does not
import json)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf._jsonout import dumps

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(10**40), 10**40),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(), st.text(st.characters(max_codepoint=0x80)))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False)),
                    inner, max_size=5)), max_leaves=30)


@given(VALUES)
@settings(max_examples=400)
def test_same_text_as_json_dumps_indent_2(value):
    assert dumps(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize("text", ["", "\x00\x1f\x7f", "\"\\/", "é€😀", "\ud800", "line\nbreak\ttab"])
def test_strings(text):
    assert dumps(text) == json.dumps(text)


def test_non_finite_floats_and_refusals():
    assert dumps([math.nan, math.inf, -math.inf]) == json.dumps([math.nan, math.inf, -math.inf], indent=2)
    with pytest.raises(TypeError):
        dumps({"a": object()})
    with pytest.raises(TypeError):
        dumps({(1, 2): 1})


def test_hint_json_does_not_import_json(tmp_path):
    import subprocess
    import sys

    probe = ("import sys, io, contextlib\nfrom epbuf.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()) as out: main(['hint', '--json'])\n"
             "print('json' in sys.modules, 'locale' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
