"""Routing specs (``--routing group:8:4``) and :func:`generate`."""

from __future__ import annotations

from ..errors import EpbufError, UnknownNameError
from ._base import GROUP_PRESETS, KINDS, Routing, _problem, _tokens_per_rank
from .kinds import all_to_one, group_limited, hot, node_limited, spread_nodes, spread_ranks, uniform, zipf
from .eplb import eplb, mask


# ------------------------------------------------------------------------------ specs
def _number(spec: str, text: str, kind: type, what: str):
    try:
        return kind(text)
    except ValueError:
        raise _problem("routing", spec, f"{what} {text!r} is not {'an integer' if kind is int else 'a number'}; "
                                        f"forms: {', '.join(KINDS.values())}") from None


def parse_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``"group:8:4" -> ("group", ("8", "4"))``, the kind checked against :data:`KINDS`."""
    if not isinstance(spec, str) or not spec.strip():
        raise _problem("routing", spec, f"a routing spec: {', '.join(KINDS.values())}")
    kind, *params = spec.strip().lower().split(":")
    if kind not in KINDS:
        from ..errors import shown_value

        raise UnknownNameError(f"--routing (routing) = {shown_value(spec)}: unknown kind {shown_value(kind, 20)}; "
                               f"choose from {', '.join(KINDS)}")
    return kind, tuple(params)


def _group_preset(model: str):
    """:data:`GROUP_PRESETS` entry of ``model`` (a preset name, title or alias), or None."""
    if not model:
        return None
    if model in GROUP_PRESETS:
        return GROUP_PRESETS[model]
    try:
        from ..models.lookup import get_model

        return GROUP_PRESETS.get(get_model(model).name)
    except EpbufError:
        return None


def generate(spec: str, *, num_ranks: int, num_tokens, num_experts: int, num_topk: int, seed: int | None = 0,
             num_ranks_per_node: int | None = None, model: str = "", num_redundant_experts: int = 0,
             masked_ratio: float = 0.0, progress=None) -> Routing:
    """The routing ``spec`` names (module doc), for ``num_ranks`` ranks routing
    ``num_tokens`` tokens each (an int, or one per rank), ``num_experts`` routed experts
    and top-k ``num_topk``.

    ``num_ranks_per_node`` (default ``min(num_ranks, 8)``) defines the nodes of ``node:M``
    and ``spread-nodes``. With ``num_redundant_experts`` the score-based routings are
    drawn over the logical experts and mapped by :func:`eplb`; the adversarial and
    node-limited ones are drawn directly over the ``num_experts +
    num_redundant_experts`` physical experts (they are defined by placement).
    ``masked_ratio`` then sets entries to ``-1`` (:func:`mask`).
    """
    kind, params = parse_spec(spec)
    per_node = num_ranks_per_node if num_ranks_per_node is not None else min(num_ranks, 8)
    if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1 or num_ranks % per_node:
        raise _problem("num_ranks_per_node", per_node, f"must divide num_ranks = {num_ranks}")
    num_nodes = num_ranks // per_node
    physical = num_experts + num_redundant_experts
    counts = _tokens_per_rank(num_ranks, num_tokens)
    arity = {"uniform": (0, 0), "zipf": (1, 1), "hot": (1, 2), "group": (0, 2), "node": (1, 1),
             "all-to-one": (0, 1), "spread-ranks": (0, 0), "spread-nodes": (0, 0)}[kind]
    if not arity[0] <= len(params) <= arity[1] or (kind == "group" and len(params) == 1):
        raise _problem("routing", spec, f"expected {KINDS[kind]}")
    logical = kind in ("uniform", "zipf", "hot", "group")
    experts = num_experts if logical else physical
    common = dict(num_ranks=num_ranks, num_tokens=counts, num_experts=experts, num_topk=num_topk)
    description = ""
    if kind == "uniform":
        idx = uniform(**common, seed=seed)
        description = "uniformly random distinct experts per token (DeepEP's tests)"
    elif kind == "zipf":
        s = _number(spec, params[0], float, "Zipf exponent")
        idx = zipf(**common, exponent=s, seed=seed, progress=progress)
        description = f"Zipf-skewed expert popularity, exponent {s:g}"
    elif kind == "hot":
        share = _number(spec, params[0], float, "hot share")
        n_hot = _number(spec, params[1], int, "number of hot experts") if len(params) > 1 else 1
        idx = hot(**common, share=share, num_hot=n_hot, seed=seed, progress=progress)
        description = f"{n_hot} hot expert(s) with {share:.0%} of the draw probability"
    elif kind == "group":
        preset = _group_preset(model)
        if params:
            n_group, topk_group = (_number(spec, p, int, "group count") for p in params)
            score = preset[2] if preset else "top2"
        elif preset:
            n_group, topk_group, score = preset
        else:
            known = ", ".join(f"{m} {g}/{t}" for m, (g, t, _) in GROUP_PRESETS.items())
            raise _problem("routing", spec, f"model {model or '(none)'!r} has no group preset; give "
                                            f"group:N_GROUP:TOPK_GROUP (presets: {known})")
        idx = group_limited(**common, n_group=n_group, topk_group=topk_group, group_score=score, seed=seed,
                            progress=progress)
        description = f"group-limited gate: {n_group} groups, {topk_group} per token (group score {score})"
    elif kind == "node":
        m = _number(spec, params[0], int, "node count")
        idx = node_limited(**common, num_nodes=num_nodes, max_nodes=m, seed=seed, progress=progress)
        description = f"node-limited: at most {min(m, num_nodes)} of {num_nodes} nodes per token (DeepEP's internode test)"
    elif kind == "all-to-one":
        rank = _number(spec, params[0], int, "rank") if params else 0
        idx = all_to_one(**common, rank=rank)
        description = f"adversarial: every token of every rank to rank {rank}"
        seed = None
    elif kind == "spread-ranks":
        idx = spread_ranks(**common, seed=seed)
        description = f"adversarial: each token on min(top-k, ranks) = {min(num_topk, num_ranks)} distinct ranks"
    else:
        idx = spread_nodes(**common, num_nodes=num_nodes, seed=seed)
        description = f"adversarial: each token on min(top-k, nodes) = {min(num_topk, num_nodes)} distinct nodes"
    p2l = None
    if logical and num_redundant_experts:
        idx, p2l = eplb(idx, num_experts, num_redundant_experts, num_ranks, seed=seed)
        description += f"; EPLB over {physical} physical experts ({num_redundant_experts} redundant)"
    if masked_ratio:
        idx = mask(idx, masked_ratio, seed=None if seed is None else seed + 1)
        description += f"; {masked_ratio:.0%} of entries masked to -1"
    return Routing(idx, physical, counts, name=spec, seed=seed, description=description, physical_to_logical=p2l)
