"""Upstream's published bandwidth and latency figures, held against the model.

Each :class:`PublishedRow` is one cell of a published table, with the setting its test
script ran (tokens, hidden, top-k, experts, routing as the script draws it, machine) and
the script's byte accounting. :func:`compare` simulates every setting with the same
seeds, times it with the machine's link preset, and converts the modelled time into the
figure the table prints: ``accounted bytes / modelled time`` (GB/s, rank 0, as the
scripts print) or the time itself (us). ``ratio = published / modelled``: below 1 the
kernels reach that share of the model's link-bound figure. ``docs/simulate.md`` and
``benchmarks/README.md`` hold the resulting table; ``python -m epbuf.simulate.published``
prints it.

Sources (read at these commits):

* DeepEP V1 normal and low-latency: ``docs/legacy.md:15-35 @dd758ca`` (H800, CX7 400 Gb/s;
  normal: 4096 tokens, hidden 7168, top-4 groups, top-8, FP8 dispatch, BF16 combine;
  low latency: 128 tokens). Scripts ``tests/legacy/test_intranode.py``,
  ``test_internode.py``, ``test_low_latency.py``.
* DeepEP V2: ``README.md:49-60 @dd758ca`` (8K tokens, hidden 7168, top-8, FP8 dispatch, BF16
  combine; "logical bandwidth ... contains local rank traffic"); script
  ``tests/elastic/test_ep.py`` (rank ``r`` routes ``max(1, tokens - r)`` tokens, line 62).
* DeepEP-Ascend in sgl-kernel-npu: ``README.md:101-122 @f425bdf1`` (A3 384 SuperPOD, pure
  HCCS; normal: 4096 tokens, low latency: 128 tokens; hidden 7168, top-8, INT8 dispatch,
  BF16 combine); scripts ``tests/python/deepep/test_intranode.py`` /
  ``test_low_latency.py @b2e93094``. The ``ascend`` backend models DeepEP-Ascend's
  ``EPBuffer`` (one message per token and rank, FP8-sized records of one byte per
  element, like INT8); the low-latency rows use DeepEP's low-latency traffic (one message
  per selection), which is how that test counts bytes.
"""

from __future__ import annotations

from .._record import Record

__all__ = ["PublishedRow", "ROWS", "Comparison", "compare", "render_markdown"]


class PublishedRow(Record):
    """One published figure and the setting behind it."""

    source: str          # "DeepEP docs/legacy.md (V1 normal)"
    machine: str         # link preset
    network: str         # "" or a NETWORKS key replacing the preset's NIC
    backend: str         # epbuf backend whose traffic model applies
    num_ranks: int
    num_ranks_per_node: int
    num_tokens: int      # tokens per rank the script routes (V2: minus the rank)
    hidden: int
    num_topk: int
    num_experts: int
    routing: str         # epbuf.routing spec drawing what the script draws
    phase: str           # "dispatch" / "combine"
    metric: str          # "GB/s" or "us"
    label: str           # the accounting label (benchmark key) for GB/s rows
    published: float
    accounting: str = "deepep"   # "deepep" (the backend's DeepEP script), "sgl-normal", "sgl-ll"
    tokens_minus_rank: bool = False
    masked_ratio: float = 0.0
    setting: str = ""    # the row's name in the published table


_LEGACY = "DeepEP docs/legacy.md @dd758ca"
_V2 = "DeepEP README.md @dd758ca"
_SGL = "sgl-kernel-npu README.md @f425bdf1"
# test_low_latency.py:76-77 masks 10 random (token, slot) entries of 128 x 8
_LL_MASK = 10 / (128 * 8)


def _rows() -> tuple[PublishedRow, ...]:
    rows = []

    def add(**kw):
        rows.append(PublishedRow(**kw))

    normal = dict(hidden=7168, num_topk=8, num_experts=256, num_tokens=4096, machine="h800", network="",
                  backend="deepep-v1")
    for phase, value in (("dispatch", 153.0), ("combine", 158.0)):
        add(source=_LEGACY + " (V1 normal)", num_ranks=8, num_ranks_per_node=8, routing="uniform", phase=phase,
            metric="GB/s", label="NVL", published=value, setting="intranode EP8 (NVLink)", **normal)
    for ep, d, c in ((16, 43.0, 43.0), (32, 58.0, 57.0), (64, 51.0, 50.0)):
        for phase, value in (("dispatch", d), ("combine", c)):
            add(source=_LEGACY + " (V1 normal)", num_ranks=ep, num_ranks_per_node=8,
                routing=f"node:{min(ep // 8, 4)}", phase=phase, metric="GB/s", label="RDMA", published=value,
                setting=f"internode EP{ep} (RDMA)", **normal)
    ll = dict(hidden=7168, num_topk=8, num_experts=256, num_tokens=128, machine="h800", network="",
              backend="deepep-ll", routing="uniform", masked_ratio=_LL_MASK)
    for ep, dl, dbw, cl, cbw in ((8, 77, 98, 114, 127), (16, 118, 63, 195, 74), (32, 155, 48, 273, 53),
                                 (64, 173, 43, 314, 46), (128, 192, 39, 369, 39), (256, 194, 39, 360, 40)):
        for phase, lat, bw in (("dispatch", dl, dbw), ("combine", cl, cbw)):
            add(source=_LEGACY + " (V1 low latency)", num_ranks=ep, num_ranks_per_node=8, phase=phase, metric="us",
                label="", published=float(lat), setting=f"EP{ep}", **ll)
            add(source=_LEGACY + " (V1 low latency)", num_ranks=ep, num_ranks_per_node=8, phase=phase, metric="GB/s",
                label="RDMA bandwidth", published=float(bw), setting=f"EP{ep}", **ll)
    v2 = dict(hidden=7168, num_topk=8, num_experts=256, num_tokens=8192, backend="deepep-v2", routing="uniform",
              tokens_minus_rank=True)
    # The README does not name the SM90 part: the rows are modelled on H800 (DeepEP's documented
    # Hopper machine, docs/legacy.md) and on an H100-class NVLink, side by side.
    for arch, machine, network, ep, per_node, label, d, c, what in (
            ("SM90", "h800", "cx7", 16, 8, "SO", 90, 81, "EP 8 x 2 (RDMA)"),
            ("SM90", "h100", "cx7", 16, 8, "SO", 90, 81, "EP 8 x 2 (RDMA)"),
            ("SM90", "h800", "cx7", 32, 8, "SO", 61, 61, "EP 8 x 4 (RDMA)"),
            ("SM90", "h100", "cx7", 32, 8, "SO", 61, 61, "EP 8 x 4 (RDMA)"),
            ("SM100", "b200", "cx7", 16, 8, "SO", 90, 91, "EP 8 x 2 (RDMA)"),
            ("SM100", "b200", "", 8, 8, "SU", 726, 740, "EP 8 (NVLink, 64 SMs)")):
        for phase, value in (("dispatch", d), ("combine", c)):
            add(source=_V2 + " (V2)", machine=machine, network=network, num_ranks=ep, num_ranks_per_node=per_node,
                phase=phase, metric="GB/s", label=label, published=float(value),
                setting=f"{arch} {what}", **v2)
    sgl = dict(hidden=7168, num_topk=8, num_experts=256, machine="ascend-a3", network="", routing="uniform")
    for ep, d, c in ((8, 146, 125), (16, 107, 103), (32, 102, 95), (64, 81, 91), (128, 57, 81)):
        for phase, value in (("dispatch", d), ("combine", c)):
            add(source=_SGL + " (normal, A3)", backend="ascend", num_ranks=ep, num_ranks_per_node=ep, num_tokens=4096,
                phase=phase, metric="GB/s", label="HCCS", published=float(value), accounting="sgl-normal",
                setting=f"EP{ep} (HCCS)", **sgl)
    for ep, dl, dbw, cl, cbw in ((8, 132, 58, 126, 116), (16, 139, 55, 135, 109), (32, 153, 49, 151, 97)):
        for phase, lat, bw in (("dispatch", dl, dbw), ("combine", cl, cbw)):
            common = dict(source=_SGL + " (low latency, A3)", backend="deepep-ll", num_ranks=ep, num_ranks_per_node=ep,
                          num_tokens=128, phase=phase, accounting="sgl-ll", setting=f"EP{ep} (HCCS)", **sgl)
            add(metric="us", label="", published=float(lat), **common)
            add(metric="GB/s", label="HCCS", published=float(bw), **common)
    return tuple(rows)


#: Every published figure epbuf compares with.
ROWS: tuple[PublishedRow, ...] = _rows()


class Comparison(Record):
    """A published figure beside the model's."""

    row: PublishedRow
    modelled: float
    seconds: float
    bottleneck: str

    @property
    def ratio(self) -> float:
        return self.row.published / self.modelled if self.modelled else float("nan")


def _setting_key(row: PublishedRow) -> tuple:
    return (row.backend, row.machine, row.network, row.num_ranks, row.num_ranks_per_node, row.num_tokens, row.hidden,
            row.num_topk, row.num_experts, row.routing, row.tokens_minus_rank, row.masked_ratio)


def compare(rows=None, *, seed: int = 0) -> tuple[Comparison, ...]:
    """Model every row (default :data:`ROWS`); one simulation per distinct setting."""
    from ..plan import Plan
    from ..routing import generate
    from . import simulate
    from .links import custom_links, get_links
    from .traffic import sgl_kernel_npu_low_latency_bytes, sgl_kernel_npu_normal_bytes
    from .counts import RoutingStats

    rows = ROWS if rows is None else tuple(rows)
    cache: dict = {}
    out = []
    for row in rows:
        key = _setting_key(row)
        if key not in cache:
            n = row.num_ranks
            tokens = [max(1, row.num_tokens - r) for r in range(n)] if row.tokens_minus_rank else row.num_tokens
            plan = Plan(hidden=row.hidden, num_topk=row.num_topk, num_experts=row.num_experts, num_ranks=n,
                        num_max_tokens_per_rank=row.num_tokens, num_ranks_per_node=row.num_ranks_per_node)
            routing = generate(row.routing, num_ranks=n, num_tokens=tokens, num_experts=row.num_experts,
                               num_topk=row.num_topk, seed=seed, num_ranks_per_node=row.num_ranks_per_node,
                               masked_ratio=row.masked_ratio)
            links = custom_links(get_links(row.machine), network=row.network or None)
            sim = simulate(plan, row.backend, routing, links=links)
            stats = RoutingStats(routing.topk_idx, routing.num_experts, sim.num_ranks_per_node, routing.num_tokens)
            accounting = {"deepep": sim.benchmark,
                          "sgl-normal": sgl_kernel_npu_normal_bytes(stats, row.hidden),
                          "sgl-ll": sgl_kernel_npu_low_latency_bytes(stats, row.hidden)}
            cache[key] = (sim, accounting)
        sim, accounting = cache[key]
        t = sim.phase_time(row.phase)
        where = f"rank {t.rank} {t.link} {t.direction}"
        if row.metric == "us":
            modelled = t.seconds * 1e6
        else:
            bench = accounting[row.accounting]
            per_rank = getattr(bench, row.phase)[row.label]
            modelled = per_rank[0] / t.seconds / 1e9 if t.seconds else float("nan")
        out.append(Comparison(row=row, modelled=modelled, seconds=t.seconds, bottleneck=where))
    return tuple(out)


def render_markdown(comparisons) -> str:
    """The side-by-side table of ``docs/simulate.md``."""
    lines = ["| source | setting | links | phase | published | modelled | published / modelled | model's bottleneck |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for c in comparisons:
        r = c.row
        unit = "us" if r.metric == "us" else f"GB/s ({r.label})"
        links = r.machine + (f" + {r.network}" if r.network else "")
        lines.append(f"| {r.source} | {r.setting} | {links} | {r.phase} | {r.published:g} {unit} | {c.modelled:.1f} | "
                     f"{c.ratio:.2f} | {c.bottleneck} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - documentation helper
    import sys

    sys.stdout.write(render_markdown(compare()))
