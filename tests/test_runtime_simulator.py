"""epbuf.runtime.Simulator (N virtual ranks, numpy or torch) against the dense refs.py-style
reference; every input error raised before anything is exchanged; the torch.distributed
Buffer's own checks on a one-rank gloo group."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))

from _moe_reference import Case, bits, check_case, expert_output, local_partial, make_inputs  # noqa: E402

import epbuf  # noqa: E402
from epbuf.codec import region_slots, unpack  # noqa: E402
from epbuf.errors import EpbufError, InvalidArgumentError  # noqa: E402
from epbuf.runtime import PeerError, Simulator  # noqa: E402

# The reference cases include shapes upstream refuses (hidden % 128 != 0 for Ascend's combine):
# the runtime runs them with a warning, checked on its own below.
pytestmark = pytest.mark.filterwarnings("ignore::epbuf.errors.UpstreamRefusalWarning")

T = 24
CASES = [
    Case("bf16 h7168 top8, 0 tokens on rank 1", 7168, 8, 16, [17, 0], T, fp8=False, seed=1),
    Case("fp8 h7168 top8", 7168, 8, 16, [T, 5], T, fp8=True, seed=2),
    Case("bf16 h2880 top1 no weights", 2880, 1, 8, [3, 20], T, fp8=False, weights=False, seed=3),
    Case("fp8 h2880 top1 2-D y", 2880, 1, 8, [0, 11], T, fp8=True, y_2d=True, seed=4),
    Case("4 ranks fp8 h7168 top8", 7168, 8, 32, [5, 0, T, 13], T, fp8=True, minus_one=0.4, seed=5),
    Case("3 ranks bf16 h2880 top8 2-D y", 2880, 8, 24, [9, 1, 0], T, fp8=False, y_2d=True, seed=6),
]


def simulate(case: Case, array: str):
    """Dispatch and combine ``case`` on a Simulator; inputs converted to numpy for ``array="numpy"``
    (BF16 as uint16 bits, FP8 as uint8 codes) and results converted back to torch."""
    sim = Simulator(case.plan(), array=array)
    inputs = [make_inputs(case, r) for r in range(case.num_ranks)]

    def conv(t):
        if t is None or array == "torch":
            return t
        if isinstance(t, tuple):
            return tuple(conv(v) for v in t)
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        if t.dtype == torch.float8_e4m3fn:
            return t.view(torch.uint8).numpy()
        return t.numpy()

    def back(a):
        if a is None or array == "torch":
            return a
        if isinstance(a, tuple):
            return tuple(back(v) for v in a)
        if a.dtype == np.uint16:
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(a))

    out = sim.dispatch([conv(i[0]) for i in inputs], [conv(i[1]) for i in inputs],
                       [conv(i[2]) for i in inputs] if case.weights else None)
    ys = []
    for r in range(case.num_ranks):
        src = back(out[r].recv_src_token_global_idx)
        y = expert_output(case, src)
        if case.y_2d:
            y = local_partial(case, y, back(out[r].recv_topk_weights), back(out[r].recv_topk_idx))
        ys.append(conv(y))
    combined = sim.combine(ys, [o.handle for o in out], [o.recv_topk_weights for o in out] if case.weights else None)
    sim.test_ys = ys  # what each rank sent back, for the tests that read the combine region
    return sim, out, combined, back


@pytest.fixture(params=[0, 1 << 62], ids=["own records in place", "own records exchanged"])
def self_bypass(request, monkeypatch):
    """A rank's records to itself skip the exchange (threshold 0) or travel through it."""
    from epbuf.runtime._core import RankState

    monkeypatch.setattr(RankState, "SELF_BYPASS_BYTES", request.param)
    return request.param


@pytest.mark.parametrize("array", ["torch", "numpy"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulator_equals_the_dense_reference(case, array, self_bypass):
    sim, out, combined, back = simulate(case, array)

    class AsTorch:
        def __init__(self, result):
            self.result = result

        def __getattr__(self, name):
            value = getattr(self.result, name)
            if name == "handle":
                return value
            if name == "recv_x" and case.fp8 and array == "numpy":  # uint8 codes -> float8_e4m3fn
                return back(value[0]).view(torch.float8_e4m3fn), back(value[1])
            return back(value)

    problems = []
    for r in range(case.num_ranks):
        problems += check_case(case, r, lambda *a, r=r: AsTorch(out[r]), lambda *a, r=r: AsTorch(combined[r]))
    assert problems == []


def test_the_buffer_holds_deepeps_image_after_dispatch(self_bypass):
    """Slot (r, t) of rank q's dispatch region holds the t-th token rank r sent to q, as
    DeepEP-Ascend's receive buffer does: read back straight from the buffer bytes (combine
    reuses the memory, so only dispatch runs here)."""
    case = CASES[4]
    sim = Simulator(case.plan(), array="torch")
    data = [make_inputs(case, r) for r in range(case.num_ranks)]
    out = sim.dispatch([d[0] for d in data], [d[1] for d in data], [d[2] for d in data])
    grid = region_slots(sim.layout.report, "dispatch")
    for q in range(case.num_ranks):
        counts = out[q].num_recv_tokens_per_rank.tolist()
        src = out[q].recv_src_token_global_idx.tolist()
        first = 0
        for r, count in enumerate(counts):
            slots = [grid.slot_index(r, t) for t in range(count)]
            fields = unpack(grid.record, sim.buffers[q][grid.offset:], slots=slots)
            assert fields["src_token_global_idx"].reshape(-1).tolist() == src[first:first + count]
            assert all(s // T == r for s in src[first:first + count])
            first += count


@pytest.mark.parametrize("case", [CASES[4], CASES[5]], ids=["4 ranks, 3-D y", "3 ranks, 2-D y"])
def test_the_buffer_holds_the_reduce_slots_after_combine(case, self_bypass):
    """Slot (k, i) of rank q's combine region holds what token i's k-th destination sent
    back (destinations in the order of their last top-k slot, refs.py's accumulation
    order): its BF16 partial and the token's weights; slots past a token's destinations
    hold zeros."""
    sim, out, combined, back = simulate(case, "torch")
    grid = region_slots(sim.layout.report, "combine")
    inputs = [make_inputs(case, r) for r in range(case.num_ranks)]
    per_rank = case.num_experts // case.num_ranks
    sent = [y if case.y_2d else local_partial(case, y, o.recv_topk_weights, o.recv_topk_idx)  # reduced over d's slots
            for y, o in zip(sim.test_ys, out)]
    sources = [o.recv_src_token_global_idx.tolist() for o in out]
    for q in range(case.num_ranks):
        idx, weights = inputs[q][1], inputs[q][2]
        slots = unpack(grid.record, sim.buffers[q][grid.offset:], num_slots=grid.num_slots)
        hidden = slots["hidden"].view(torch.int16).reshape(grid.rows, grid.slots, -1)
        topk_weights = slots["topk_weights"].reshape(grid.rows, grid.slots, -1)
        for i in range(case.tokens[q]):
            last = {}
            for j, e in enumerate(idx[i].tolist()):
                if e >= 0:
                    last[e // per_rank] = j
            order = sorted(last, key=last.get)
            for k in range(grid.rows):
                if k < len(order):
                    d = order[k]
                    row = sources[d].index(q * T + i)
                    assert torch.equal(hidden[k, i], sent[d][row].view(torch.int16))
                    assert torch.equal(topk_weights[k, i], weights[i])
                else:
                    assert not hidden[k, i].any() and not topk_weights[k, i].any()


def plan(**kw):
    base = dict(hidden=256, num_topk=2, num_experts=4, num_ranks=2, num_max_tokens_per_rank=4, use_fp8_dispatch=False)
    base.update(kw)
    return epbuf.Plan(**base)


def inputs(n=3, topk=2, hidden=256):
    return torch.zeros(n, hidden, dtype=torch.bfloat16), torch.zeros(n, topk, dtype=torch.int64)


@pytest.mark.parametrize("change,message", [
    (lambda x, i: (torch.zeros(5, 256, dtype=torch.bfloat16), torch.zeros(5, 2, dtype=torch.int64)),
     r"x \(rank 1\) = '5 tokens': allowed 0\.\.4 \(num_max_tokens_per_rank of the plan\)"),
    (lambda x, i: (x.float(), i), r"x \(rank 1\) = 'float32 \[3, 256\]': must be bfloat16 \[num_tokens, hidden = 256\]"),
    (lambda x, i: (x[:, :128], i), r"x \(rank 1\) = 'bfloat16 \[3, 128\]'"),
    (lambda x, i: (x, i + 4), r"topk_idx \(rank 1\) = 'values 4\.\.4': allowed -1\.\.3 \(-1: no expert\)"),
    (lambda x, i: (x, i - 2), r"topk_idx \(rank 1\) = 'values -2\.\.-2': allowed -1\.\.3"),
    (lambda x, i: (x, i[:, :1]),
     r"topk_idx \(rank 1\) = 'int64 \[3, 1\]': must be int64 or int32 \[num_tokens = 3, num_topk = 2\]"),
    (lambda x, i: (x, i.float()), r"topk_idx \(rank 1\) = 'float32 \[3, 2\]'"),
    (lambda x, i: ((x, x), i), r"x \(rank 1\) = 'a tuple': BF16 dispatch takes one \[num_tokens, hidden\] tensor"),
])
def test_dispatch_input_errors_name_the_argument_and_the_range(change, message):
    sim = Simulator(plan(), array="torch")
    good = inputs()
    bad = change(*inputs())
    with pytest.raises(InvalidArgumentError, match=message):
        sim.dispatch([good[0], bad[0]], [good[1], bad[1]])


def test_a_misshapen_x_is_the_only_problem_named():
    """x of the wrong rank still gives the token count: good top-k arrays are not blamed with a
    made-up ``num_tokens = -1``; a 0-d x names no token count at all."""
    sim = Simulator(plan(), array="torch")
    x, idx = inputs()
    with pytest.raises(InvalidArgumentError) as caught:
        sim.dispatch([x, x[:, :, None]], [idx, idx])
    assert str(caught.value) == ("x (rank 1) = 'bfloat16 [3, 256, 1]': must be bfloat16 [num_tokens, hidden = 256]")
    with pytest.raises(InvalidArgumentError) as caught:
        sim.dispatch([x, x[0, 0]], [idx, idx[:, :1]])
    assert "-1" not in str(caught.value)
    assert "must be int64 or int32 [num_tokens, num_topk = 2]" in str(caught.value)


def test_fp8_and_weights_input_errors():
    sim = Simulator(plan(use_fp8_dispatch=True), array="torch")
    x = torch.zeros(3, 256, dtype=torch.float8_e4m3fn)
    idx = torch.zeros(3, 2, dtype=torch.int64)
    sf = torch.zeros(3, 2, dtype=torch.float32)
    with pytest.raises(InvalidArgumentError, match=r"x \(rank 0\) = 'one tensor': the plan dispatches FP8"):
        sim.dispatch([x, (x, sf)], [idx, idx])
    with pytest.raises(InvalidArgumentError, match=r"sf \(rank 0\) = 'float32 \[3, 3\]': must be \[num_tokens = 3, n\] "
                                                   r"with n x element size = 8 B per token"):
        sim.dispatch([(x, torch.zeros(3, 3)), (x, sf)], [idx, idx])
    with pytest.raises(InvalidArgumentError, match=r"topk_weights \(rank 0\) = 'float64 \[3, 2\]'"):
        sim.dispatch([(x, sf), (x, sf)], [idx, idx], [torch.zeros(3, 2, dtype=torch.float64), None])
    with pytest.raises(InvalidArgumentError, match=r"x = 'list': must be a list with one entry per rank \(2\)"):
        sim.dispatch([(x, sf)], [idx])


def test_combine_input_errors():
    sim = Simulator(plan(), array="torch")
    x, idx = inputs()
    out = sim.dispatch([x, x], [idx, idx])
    n = [o.handle.num_recv_tokens for o in out]
    with pytest.raises(InvalidArgumentError, match=r"y \(rank 0\) = 'float32 \[6, 256\]': must be BF16 "
                                                   r"\[num_recv_tokens = 6, hidden = 256\]"):
        sim.combine([torch.zeros(n[0], 256), torch.zeros(n[1], 256, dtype=torch.bfloat16)], [o.handle for o in out])
    with pytest.raises(InvalidArgumentError, match=r"handle \(rank 1\) = 'str': must be the handle"):
        sim.combine([torch.zeros(k, 256, dtype=torch.bfloat16) for k in n], [out[0].handle, "handle"])


@pytest.mark.parametrize("the_plan,backend,message", [
    (plan(num_experts=3), "ascend", r"must be divisible by num_ranks = 2"),
    (plan(), "deepep-v2", r"no region of the report holds 'dispatch' records with a \(rows, slots\) shape"),
    (plan(hidden=7000, num_topk=6, num_experts=8, use_fp8_dispatch=True), "ascend",
     r"'dispatch' record's fields overlap \[\] or end 4 B past its 7320-byte stride"),
])
def test_layouts_the_runtime_cannot_use_are_refused(the_plan, backend, message):
    with pytest.raises(EpbufError, match=message):
        Simulator(the_plan, backend)


@pytest.mark.filterwarnings("error::epbuf.errors.UpstreamRefusalWarning")
def test_a_plan_upstream_refuses_runs_with_a_warning_naming_the_findings():
    """FP8 with hidden 7000: the report has sizes and error findings (the kernel writes the fields
    8 bytes before the reader's getters; combine asserts hidden % 128 == 0). The runtime runs it,
    saying so once; a plan upstream accepts runs without a warning."""
    from epbuf.errors import UpstreamRefusalWarning

    with pytest.warns(UpstreamRefusalWarning) as caught:
        Simulator(plan(hidden=7000, use_fp8_dispatch=True))
    assert len(caught) == 1
    assert str(caught[0].message) == (
        "ascend: upstream would refuse this plan (ascend.reader-writer-mismatch, ascend.kernel-limit; see "
        "epbuf.report(plan, 'ascend').findings); the runtime runs it with the layout epbuf reports")
    assert caught[0].filename == __file__  # points at the caller, not at epbuf
    Simulator(plan(hidden=7168, use_fp8_dispatch=True))  # the error filter fails the test on a warning


def test_buffer_checks_on_a_one_rank_group(tmp_path):
    """The torch.distributed Buffer in this process: size and group checks, and a dispatch and
    combine through a real gloo group of one rank."""
    import torch.distributed as dist

    from epbuf.runtime import Buffer

    with pytest.raises(EpbufError, match="init_process_group"):
        Buffer(None, plan(num_ranks=1))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with pytest.raises(InvalidArgumentError, match=r"plan\.num_ranks = 2: must equal the process group's size \(1\)"):
            Buffer(None, plan())
        one = plan(num_ranks=1)
        needed = Simulator(one).layout
        with pytest.raises(InvalidArgumentError, match=r"num_bytes = 100: allowed >= "):
            Buffer(None, one, num_bytes=100)
        for bad in (float("inf"), float("nan"), 10 ** 30, 0, True):  # inf raised a bare OverflowError
            with pytest.raises(InvalidArgumentError, match=r"^timeout = .*: seconds, > 0 and <= 86,400"):
                Buffer(None, one, timeout=bad)
        buffer = Buffer(None, one, timeout=5)
        assert buffer.num_bytes == needed.num_bytes == epbuf.report(one, "ascend").buffer("EP buffer").num_bytes
        x = torch.randn(3, 256).to(torch.bfloat16)
        idx = torch.tensor([[0, 3], [-1, 1], [-1, -1]])
        out = buffer.dispatch(x, idx)
        assert out.recv_src_token_global_idx.tolist() == [0, 1]
        assert torch.equal(out.recv_topk_idx, torch.tensor([[0, 3], [-1, 1]]))
        combined = buffer.combine(out.recv_x, out.handle)
        assert np.array_equal(bits(combined.combined_x[:2]), bits(x[:2])) and not combined.combined_x[2].any()
        with pytest.raises(InvalidArgumentError, match=r"topk_idx = 'values 4\.\.4'"):
            buffer.dispatch(x, idx.clamp(min=4))
        with pytest.raises(InvalidArgumentError, match=r"y = 'bfloat16 \[3, 256\]'"):
            buffer.combine(x, out.handle)
        assert buffer.dispatch(x, idx).handle.num_recv_tokens == 2  # still usable after refused inputs
    finally:
        dist.destroy_process_group()
    assert PeerError.__mro__[1] is EpbufError


@pytest.mark.parametrize("array", ["torch", "numpy"])
def test_combine_sums_from_plus_zero_bit_for_bit(array, self_bypass):
    """The reduction starts from the first partial and adds +0.0 before rounding: the same
    bits as refs.py's sum from +0.0, also for -0.0, infinite and (torch) NaN partials (a sum
    of -0.0 partials is +0.0; a token with one partial of -0.0 gets +0.0)."""
    the_plan = plan(num_max_tokens_per_rank=6)
    sim = Simulator(the_plan, array="torch")
    # rank 0's tokens: to both ranks (experts 0 and 2), to rank 0 only, to rank 1 only
    idx = torch.tensor([[0, 2], [2, 0], [0, 2], [1, -1], [3, -1], [0, 3]])
    x = torch.zeros(6, 256, dtype=torch.bfloat16)
    out = sim.dispatch([x, x[:0]], [idx, idx[:0]])
    specials = [-0.0, 0.0, float("inf"), 1.5, -1.5, 3e38]
    if array == "torch":  # numpy's BF16 rounding writes every NaN as 0x7FC0, torch's vector path keeps its bits
        specials += [float("nan"), -float("inf")]
    specials = torch.tensor(specials, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(0)
    ys = [specials[torch.randint(0, len(specials), (int(o.recv_src_token_global_idx.numel()), 256), generator=g)]
          for o in out]
    ys[0][0] = -0.0  # token 0: -0.0 from both ranks
    ys[1][0] = -0.0
    if array == "numpy":  # the same dispatch and combine on numpy buffers (BF16 as uint16 bits)
        np_sim = Simulator(the_plan, array="numpy")

        def to_np(t):
            return t.view(torch.int16).numpy().view(np.uint16)

        np_out = np_sim.dispatch([to_np(x), to_np(x[:0])], [idx.numpy(), idx[:0].numpy()])
        got = np_sim.combine([to_np(y) for y in ys], [o.handle for o in np_out])[0].combined_x
        got = torch.from_numpy(got.view(np.int16))
    else:
        got = sim.combine(ys, [o.handle for o in out])[0].combined_x.view(torch.int16)
    # refs.py: +0.0, then each destination's partial in the order of its last top-k slot
    expected = torch.zeros(6, 256)
    rows = [o.recv_src_token_global_idx.tolist() for o in out]
    order = {0: [0, 1], 1: [1, 0], 2: [0, 1], 3: [0], 4: [1], 5: [0, 1]}
    for token, ranks in order.items():
        for r in ranks:
            expected[token] += ys[r][rows[r].index(token)].float()
    expected = expected.to(torch.bfloat16).view(torch.int16)
    assert torch.equal(got, expected)
    assert not got[0].any()  # +0.0, not -0.0


@pytest.mark.parametrize("kwargs,message", [
    (dict(timeout=float("inf")), r"^timeout = inf: seconds, > 0 and <= 86,400"),
    (dict(collective_timeout=-1), r"^collective_timeout = -1: seconds"),
    (dict(num_ranks=0), r"num_ranks\) = 0: allowed >= 1"),
])
def test_run_gloo_checks_its_arguments_before_spawning(kwargs, message):
    from epbuf.runtime.testing import run_gloo

    args = dict(num_ranks=1)
    args.update(kwargs)
    with pytest.raises(InvalidArgumentError, match=message):
        run_gloo(print, args.pop("num_ranks"), **args)
