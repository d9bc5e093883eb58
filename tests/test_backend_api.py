"""The upstream-named functions of DeepEP-Ascend and DeepEP V2: hostile arguments and argument order.

Every public function rejects negative, float, NaN, string and bool values where upstream takes
an ``int`` (and non-bools where it takes a ``bool``) with an ``EpbufError`` that names the
argument (issue 9), instead of computing a negative or NaN size.
"""

from __future__ import annotations

import math

import pytest

import epbuf
from epbuf import EpbufError, Plan
from epbuf.backends import ascend
from epbuf.backends import deepep_v2 as v2


# The exact inputs of the hostile-input campaign (issue 9).
@pytest.mark.parametrize(("fn", "args", "argument"), [
    (ascend.get_combine_buffer_size, (8, 4096, -7168, 6), "hidden"),  # was -351,535,104
    (ascend.get_dispatch_buffer_size, (4096, 7168, 112, 6, 1, -8), "num_ranks"),
    (v2.get_combine_buffer_size, (4096, 7168, 6, -1, 8, True, True), "num_scaleout_ranks"),
], ids=["ascend-combine-negative-hidden", "ascend-dispatch-negative-ranks", "v2-combine-negative-scaleout"])
def test_campaign_inputs(fn, args, argument):
    with pytest.raises(EpbufError) as info:
        fn(*args)
    assert [p.argument for p in info.value.problems] == [argument]
    assert str(info.value).count("\n") == 0


I, B = "int", "bool"  # what upstream takes in each position

# name -> (function, valid arguments, kind of each argument, expected result for the valid ones).
# The expected values are the docstring examples and docs/derivations/ (ascend.md §3, deepep_v2.md §C.1).
API = {
    "ascend.calculate_buffer_size": (ascend.calculate_buffer_size, (8, 4096, 7168, 6, True), (I, I, I, I, B),
                                     354_418_688),
    "ascend.get_dispatch_buffer_size": (ascend.get_dispatch_buffer_size, (4096, 7168, 224, 6, 1, 8),
                                        (I, I, I, I, I, I), 252_706_816),
    "ascend.get_combine_buffer_size": (ascend.get_combine_buffer_size, (8, 4096, 7168, 6), (I, I, I, I), 353_107_968),
    "ascend.dispatch_buffer_layout": (ascend.dispatch_buffer_layout, (4096, 7168, 224, 6, 1, 8), (I, I, I, I, I, I),
                                      None),
    "ascend.combine_buffer_layout": (ascend.combine_buffer_layout, (8, 4096, 7168, 6), (I, I, I, I), None),
    "ascend.get_dispatch_token_layout": (ascend.get_dispatch_token_layout, (7168, 224, 6), (I, I, I), None),
    "ascend.get_combine_token_layout": (ascend.get_combine_token_layout, (14336, 6), (I, I), None),
    "ascend.effective_topk": (ascend.effective_topk, (0,), (I,), 32),
    "ascend.hint_num_sf_packs": (ascend.hint_num_sf_packs, (7168, True), (I, B), 224),
    "ascend.actual_num_sf_packs": (ascend.actual_num_sf_packs, (7168, True), (I, B), 112),
    "ascend.element_size": (ascend.element_size, (True,), (B,), 1),
    "v2.calculate_buffer_size": (v2.calculate_buffer_size, (32, 8, 4096, 7168, 8, True, True, True),
                                 (I, I, I, I, I, B, B, B), 2_434_793_472),
    "v2.calculate_buffer_size_logical": (v2.calculate_buffer_size_logical, (4, 8, True, 4096, 7168, 8, True, True),
                                         (I, I, B, I, I, I, B, B), 2_434_793_472),
    "v2.get_buffer_size_hint": (v2.get_buffer_size_hint, (8, 4096, 7168, 8, True, True, True),
                                (I, I, I, I, B, B, B), 471_859_200),
    "v2.get_dispatch_buffer_size": (v2.get_dispatch_buffer_size, (4096, 7168, 224, 8, 1, 4, 8, True),
                                    (I, I, I, I, I, I, I, B), 1_283_457_024),
    "v2.get_combine_buffer_size": (v2.get_combine_buffer_size, (4096, 7168, 8, 4, 8, True, True),
                                   (I, I, I, I, I, B, B), 2_433_024_000),
    "v2.dispatch_buffer_layouts": (v2.dispatch_buffer_layouts, (4096, 7168, 224, 8, 1, 4, 8, True),
                                   (I, I, I, I, I, I, I, B), None),
    "v2.combine_buffer_layouts": (v2.combine_buffer_layouts, (4096, 7168, 8, 4, 8, True, True),
                                  (I, I, I, I, I, B, B), None),
    "v2.get_dispatch_token_layout": (v2.get_dispatch_token_layout, (7168, 1, 224, 8), (I, I, I, I), None),
    "v2.get_combine_token_layout": (v2.get_combine_token_layout, (7168, 2, 8), (I, I, I), None),
    "v2.get_physical_domain_size": (v2.get_physical_domain_size, (32, 8), (I, I), (4, 8)),
    "v2.get_logical_domain_size": (v2.get_logical_domain_size, (32, 8, False), (I, I, B), (1, 32)),
    "v2.logical_domain": (v2.logical_domain, (32, 8, True), (I, I, B), None),
    "v2.effective_topk": (v2.effective_topk, (0,), (I,), 32),
    "v2.hint_num_sf_packs": (v2.hint_num_sf_packs, (7168, True), (I, B), 224),
    "v2.actual_num_sf_packs": (v2.actual_num_sf_packs, (7168, True), (I, B), 56),
    "v2.element_size": (v2.element_size, (False,), (B,), 2),
}
BAD = {I: [-7, 7.0, math.nan, "7", True, None], B: ["yes", 1, 0, None, math.nan]}


@pytest.mark.parametrize("name", list(API))
def test_every_argument_rejects_hostile_values(name):
    """Valid arguments give the documented value; any one argument replaced by a negative, float,
    NaN, string or bool (or, where a bool belongs, anything else) raises an EpbufError naming it
    on one line."""
    fn, args, kinds, expected = API[name]
    result = fn(*args)
    if expected is not None:
        assert result == expected
    for position, kind in enumerate(kinds):
        for bad in BAD[kind]:
            hostile = args[:position] + (bad,) + args[position + 1:]
            with pytest.raises(EpbufError) as info:
                fn(*hostile)
            message = str(info.value)
            assert message.count("\n") == 0 and repr(bad) in message, (name, position, bad, message)


@pytest.mark.parametrize("cls", [ascend.TokenLayout, v2.TokenLayout])
@pytest.mark.parametrize("bad", [-32, 32.0, math.nan, "32", True])
def test_records_reject_hostile_values(cls, bad):
    for field in ("num_hidden_bytes", "num_sf_bytes", "num_topk"):
        values = dict(num_hidden_bytes=7168, num_sf_bytes=224, num_topk=8, with_metadata=True)
        values[field] = bad
        with pytest.raises(EpbufError, match=field):
            cls(**values)
    with pytest.raises(EpbufError, match="with_metadata"):
        cls(num_hidden_bytes=7168, num_sf_bytes=224, num_topk=8, with_metadata=1)


@pytest.mark.parametrize("module", [ascend, v2])
def test_buffers_reject_hostile_values(module):
    record = module.TokenLayout(num_hidden_bytes=7168, num_sf_bytes=224, num_topk=8, with_metadata=True)
    for bad in (-1, 1.5, math.nan, "8", True, 2**31):
        with pytest.raises(EpbufError, match="num_ranks"):
            module.BufferLayout(token_layout=record, num_ranks=bad, num_max_tokens_per_rank=8)
        with pytest.raises(EpbufError, match="num_max_tokens_per_rank"):
            module.BufferLayout(token_layout=record, num_ranks=8, num_max_tokens_per_rank=bad)
    with pytest.raises(EpbufError, match="token_layout"):
        module.BufferLayout(token_layout="record", num_ranks=8, num_max_tokens_per_rank=8)
    with pytest.raises(EpbufError, match="token_layout"):
        module.check_record("record")


@pytest.mark.parametrize("fn", [ascend.report, ascend.summarize, v2.report, v2.summarize, v2.plan_domain])
def test_plan_functions_reject_what_is_not_a_plan(fn):
    for bad in (None, "plan", {"num_ranks": 8}, 8):
        with pytest.raises(EpbufError, match=r"\(plan\)"):
            fn(bad)


@pytest.mark.parametrize("fn", [v2.get_generation, v2.workspace_regions, v2.get_workspace_num_bytes,
                                v2.num_workspace_bytes])
def test_versions_reject_hostile_values(fn):
    for bad in (7, 7.0, math.nan, True, "v9", "", ["refactor"]):
        with pytest.raises(EpbufError, match="--backend-version"):
            fn(bad)


def test_get_buffer_size_hint_group():
    """``group`` is a size or ``(num_rdma_ranks, num_nvl_ranks)``; nothing else."""
    for bad in (8.0, "8", True, (4,), (4, 8, 1), (4, -8), (4.0, 8), None):
        with pytest.raises(EpbufError):
            v2.get_buffer_size_hint(bad, 4096, 7168, 8, True)


def test_large_values_beyond_the_upstream_int_are_invalid():
    """int32 arguments beyond int32, sizes beyond int64: one-line errors, not numbers."""
    with pytest.raises(EpbufError, match="--tokens"):
        ascend.get_dispatch_buffer_size(2**31, 7168, 224, 6, 1, 8)
    with pytest.raises(EpbufError, match="beyond int64"):
        ascend.get_dispatch_buffer_size(2**31 - 1, 2**20, 0, 1, 1, 2**31 - 1)
    with pytest.raises(EpbufError, match="beyond int64"):
        v2.get_dispatch_buffer_size(2**31 - 1, 2**20, 0, 1, 1, 1, 2**31 - 1, False)
    with pytest.raises(EpbufError, match="beyond int64"):
        v2.report(Plan(hidden=2**20, num_topk=1, num_experts=2048, num_ranks=2048, num_ranks_per_node=2048,
                       num_max_tokens_per_rank=2**31 - 1, use_fp8_dispatch=False))


# The quantity names every backend reports with the same meaning (README, "JSON schemas").
VOCABULARY = ("num_topk", "element_size", "hidden_bytes", "dispatch_record_num_bytes", "hint_dispatch_record_num_bytes",
              "combine_record_num_bytes", "hint_num_sf_packs", "real_num_sf_packs", "num_scaleup_ranks",
              "num_scaleout_ranks", "workspace_num_bytes")


@pytest.mark.parametrize("backend", ["ascend", "deepep-v2"])
@pytest.mark.parametrize(("hidden", "topk", "ranks", "fp8"), [(7168, 6, 8, True), (4096, 0, 32, False)])
def test_shared_quantity_vocabulary(backend, hidden, topk, ranks, fp8):
    from epbuf.plan import report

    r = report(Plan(hidden=hidden, num_topk=topk, num_experts=256, num_ranks=ranks, num_max_tokens_per_rank=512,
                    use_fp8_dispatch=fp8), backend)
    q = {x.name: x.value for x in r.quantities}
    assert set(VOCABULARY) <= set(q)
    assert q["num_topk"] == (topk or 32) and q["element_size"] == (1 if fp8 else 2)
    assert q["hidden_bytes"] == hidden * q["element_size"]
    assert q["num_scaleup_ranks"] * q["num_scaleout_ranks"] == ranks
    assert q["dispatch_record_num_bytes"] == r.record("dispatch").num_bytes
    assert q["combine_record_num_bytes"] == r.record("combine").num_bytes
    assert q["hint_dispatch_record_num_bytes"] >= q["dispatch_record_num_bytes"]
    assert q["hint_num_sf_packs"] >= q["real_num_sf_packs"] and (q["real_num_sf_packs"] > 0) is fp8
    assert 0 < q["workspace_num_bytes"] <= r.buffer("workspace").num_bytes


def test_backends_have_no_import_cycle():
    """The modules of epbuf.backends import each other (at module level) without a cycle."""
    import ast
    import pathlib

    import epbuf.backends

    root = pathlib.Path(epbuf.backends.__file__).parent
    assert root.name == "backends"
    graph = {}
    for path in root.rglob("*.py"):
        module = ".".join(path.relative_to(root.parent.parent).with_suffix("").parts).removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        deps = set()
        for node in ast.parse(path.read_text()).body:  # module level only: lazy imports in functions are fine
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
                if node.module:  # `from . import x` needs x, not the package's __init__ (already running)
                    deps.add(target)
                deps.update(f"{target}.{alias.name}" for alias in node.names)
        graph[module] = deps
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}

    def visit(module, stack):
        assert module not in stack, " -> ".join([*stack, module])
        for dep in graph[module]:
            visit(dep, [*stack, module])

    assert {"epbuf.backends.ascend.report", "epbuf.backends.deepep_v2.report"} <= set(graph)
    for module in graph:
        visit(module, [])


def test_a_name_a_report_lacks_is_one_line_listing_the_names():
    """Report.buffer/record/quantity and RecordLayout.field raised a bare KeyError; now a
    NotInReportError (an UnknownNameError, still a KeyError) that lists what there is."""
    from epbuf.errors import NotInReportError, UnknownNameError

    rep = epbuf.report(epbuf.Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8,
                                  num_max_tokens_per_rank=4096), "ascend")
    for lookup, message in [
            (lambda: rep.buffer("EP"), "buffer 'EP' is not in the ascend report; it has: 'EP buffer', 'workspace'"),
            (lambda: rep.record("x"), "record 'x' is not in the ascend report; it has: 'dispatch', 'dispatch (hint)', "
                                      "'combine'"),
            (lambda: rep.record("dispatch").field("sf "), "field 'sf ' is not in record 'dispatch'; it has: 'hidden', "
                                                          "'sf', 'topk_idx', 'topk_weights', 'src_token_global_idx', "
                                                          "'padding'")]:
        with pytest.raises(NotInReportError) as caught:
            lookup()
        assert str(caught.value) == message
        assert isinstance(caught.value, UnknownNameError) and isinstance(caught.value, KeyError)
    with pytest.raises(KeyError, match="quantity 'nope' is not in the ascend report; it has: 'num_topk', "):
        rep.quantity("nope")
