"""The :class:`Routing` value, the constants and the argument checks every routing shares."""

from __future__ import annotations

from ..errors import EpbufError, InvalidArgumentError, Problem

#: Tokens scored at once by the score-based generators: the ``[chunk, experts]`` float32
#: scores are the only temporary larger than the output (32 MiB at 256 experts).
SCORE_CHUNK_TOKENS = 32768

#: ``(n_group, topk_group, group score)`` of model presets with group-limited gates, from
#: the models' configs. "top2": sum of the two best scores of a group (gate with a bias,
#: DeepSeek-V3 ``inference/model.py:586-589 @9b4e978``); "max": the best score (no bias).
GROUP_PRESETS: dict[str, tuple[int, int, str]] = {
    # deepseek-ai/DeepSeek-V3@9b4e978 inference/configs/config_671B.json: n_expert_groups 8,
    # n_limited_groups 4; aiconfigurator@095f58a5 model_configs DeepSeek-V3/R1/V3.2: n_group 8, topk_group 4
    "deepseek-v3": (8, 4, "top2"),
    "deepseek-r1": (8, 4, "top2"),
    "deepseek-v3.2": (8, 4, "top2"),
    # config_236B.json: n_expert_groups 8, n_limited_groups 3; softmax gate without bias
    "deepseek-v2": (8, 3, "max"),
    # aiconfigurator@095f58a5 Kimi-K2-Instruct / Kimi-K2.5: n_group 1, topk_group 1 (no group limit)
    "kimi-k2": (1, 1, "top2"),
    "kimi-k2-thinking": (1, 1, "top2"),
    "kimi-k2.5": (1, 1, "top2"),
}

#: Routing kinds of :func:`generate` and their parameters, for help texts and errors.
KINDS = {
    "uniform": "uniform",
    "zipf": "zipf:S (S > 0)",
    "hot": "hot:SHARE[:NUM_HOT] (0 < SHARE < 1)",
    "group": "group[:N_GROUP:TOPK_GROUP]",
    "node": "node:M (at most M nodes per token)",
    "all-to-one": "all-to-one[:RANK]",
    "spread-ranks": "spread-ranks",
    "spread-nodes": "spread-nodes",
}


class RoutingFileError(EpbufError):
    """A routing file that cannot be read or holds no valid ``topk_idx``."""


def numpy():
    """The numpy module, or a one-line error naming the extra that installs it."""
    from .._lazy import optional

    return optional("numpy", "routings need numpy: pip install 'epbuf[sim]'")


class Routing:
    """One routing of every rank's tokens.

    Attributes:
        topk_idx: integer array ``[num_ranks, num_max_tokens, num_topk]``; ``-1`` = none.
        num_experts: experts the indices range over (physical ones with EPLB).
        num_tokens: tokens each rank routes (tuple of ``num_ranks`` ints); rows at and
            beyond a rank's count are all ``-1``.
        name: the spec it was made from (``"zipf:1.2"``) or the file it was read from.
        seed: the seed (``None`` for files and deterministic routings).
        description: one line for people.
        physical_to_logical: with EPLB, the logical expert of each physical one (tuple).
    """

    __slots__ = ("topk_idx", "num_experts", "num_tokens", "name", "seed", "description", "physical_to_logical")

    def __init__(self, topk_idx, num_experts: int, num_tokens=None, name: str = "", seed: int | None = None,
                 description: str = "", physical_to_logical: tuple | None = None) -> None:
        self.topk_idx = topk_idx
        self.num_experts = int(num_experts)
        ranks, tokens = topk_idx.shape[0], topk_idx.shape[1]
        self.num_tokens = tuple(int(t) for t in num_tokens) if num_tokens is not None else (tokens,) * ranks
        self.name = name
        self.seed = seed
        self.description = description
        self.physical_to_logical = physical_to_logical

    @property
    def num_ranks(self) -> int:
        return int(self.topk_idx.shape[0])

    @property
    def num_max_tokens(self) -> int:
        return int(self.topk_idx.shape[1])

    @property
    def num_topk(self) -> int:
        return int(self.topk_idx.shape[2])

    @property
    def num_selections(self) -> int:
        """Entries that name an expert (not ``-1``)."""
        return int((self.topk_idx >= 0).sum())

    @property
    def num_masked(self) -> int:
        """``-1`` entries inside the ranks' token counts (padding rows not counted)."""
        np = numpy()
        counts = np.asarray(self.num_tokens)
        inside = np.arange(self.num_max_tokens)[None, :] < counts[:, None]
        return int(((self.topk_idx < 0) & inside[:, :, None]).sum())

    def __repr__(self) -> str:
        return (f"Routing({self.name!r}, ranks={self.num_ranks}, tokens={self.num_max_tokens}, "
                f"topk={self.num_topk}, experts={self.num_experts}, seed={self.seed})")



# ------------------------------------------------------------------------------ checks
def _problem(argument: str, value: object, allowed: str) -> InvalidArgumentError:
    return InvalidArgumentError([Problem(argument, value, allowed)])


def _tokens_per_rank(num_ranks: int, num_tokens) -> tuple[int, ...]:
    if isinstance(num_tokens, int) and not isinstance(num_tokens, bool):
        if num_tokens < 0:
            raise _problem("num_tokens", num_tokens, "allowed >= 0 tokens per rank")
        return (num_tokens,) * num_ranks
    counts = tuple(num_tokens)
    if len(counts) != num_ranks or any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in counts):
        raise _problem("num_tokens", num_tokens, f"one integer >= 0 per rank ({num_ranks} ranks), or one integer")
    return counts


def _check_shape(num_ranks: int, num_experts: int, num_topk: int, per_rank: bool = True) -> None:
    problems = []
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        problems.append(Problem("num_ranks", num_ranks, "allowed >= 1"))
    if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
        problems.append(Problem("num_experts", num_experts, "allowed >= 1"))
    elif per_rank and isinstance(num_ranks, int) and num_ranks >= 1 and num_experts % num_ranks:
        problems.append(Problem("num_experts", num_experts,
                                f"must be a multiple of num_ranks = {num_ranks} (each rank holds E / N experts)"))
    if isinstance(num_topk, bool) or not isinstance(num_topk, int) or num_topk < 1:
        problems.append(Problem("num_topk", num_topk, "allowed >= 1 (a routing needs a real top-k; 0 means unspecified only for sizes)"))
    elif isinstance(num_experts, int) and num_topk > num_experts:
        problems.append(Problem("num_topk", num_topk, f"allowed 1..{num_experts} (distinct experts per token)"))
    if problems:
        raise InvalidArgumentError(problems)


def _rng(seed):
    np = numpy()
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise _problem("seed", seed, "allowed an integer >= 0")
    return np.random.Generator(np.random.PCG64(seed))


def _finish(rows, num_ranks: int, counts: tuple[int, ...], num_topk: int):
    """``[num_ranks * T, k]`` rows -> ``[num_ranks, T, k]`` with rows past each rank's count set to -1."""
    np = numpy()
    t_max = max(counts) if counts else 0
    out = rows.reshape(num_ranks, t_max, num_topk)
    if any(c != t_max for c in counts):
        pad = np.arange(t_max)[None, :] >= np.asarray(counts)[:, None]
        out[pad] = -1
    return out
