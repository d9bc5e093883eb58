"""Sweeps: many plans across backends in one table (and CSV, JSON, PNG).

>>> from epbuf.plan import Plan
>>> base = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=1)
>>> result = sweep(base, {"num_max_tokens_per_rank": [128, 256]}, ["ascend"])
>>> [row[result.columns.index("num_bytes")] for row in result.rows]
[18874368, 33554432]

Each axis value is validated once against the base plan, so the inner loop builds
plans without re-checking and calls each backend's fast ``summarize`` path (the same
layout functions as the full report, cached per record shape).
"""

from __future__ import annotations

import itertools
import operator

from ._record import Record
from .errors import EpbufError
from .plan import Plan, get_backend, summarizer

__all__ = ["AXES", "COLUMNS", "MAX_CONFIGURATIONS", "SweepResult", "sweep", "parse_values"]

# Rows are kept in memory (a few hundred bytes each) and the table is printed whole. At this
# cap a sweep runs in about 3 s within about 350 MB, even with --json (benchmarks/README.md);
# beyond it a sweep is more likely a typo (1:100000000) than a question.
MAX_CONFIGURATIONS = 200_000
# Rows between two calls of a sweep's progress callback.
PROGRESS_EVERY = 10_000

# Plan fields a sweep may vary, in column order.
AXES = ("hidden", "num_topk", "num_experts", "num_ranks", "num_max_tokens_per_rank", "use_fp8_dispatch")
COLUMNS = ("backend",) + AXES + ("num_bytes", "num_bytes_needed", "binding", "broken_limits", "error")


class SweepResult(Record):
    """``rows`` are tuples in ``columns`` order; ``varying`` names the axes with more than one value."""

    columns: tuple
    rows: list
    varying: tuple = ()

    def column(self, name: str) -> list:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]


def sweep(base: Plan, axes: dict[str, list], backends: list[str] | tuple[str, ...],
          progress=None) -> SweepResult:
    """Every combination of ``axes`` values (plan fields from :data:`AXES`) for every backend.

    ``progress(done, total)``, when given, is called every :data:`PROGRESS_EVERY` rows and
    once at the end (the CLI draws a progress line on a terminal with it).

    Raises:
        InvalidArgumentError: an axis value that no plan may have (checked once per value).
        UnknownNameError: an unknown backend.
    """
    for backend in backends:
        get_backend(backend)  # unknown names fail here, with the list of known ones
    names = [a for a in AXES if a in axes]
    unknown = set(axes) - set(AXES)
    if unknown:
        raise EpbufError(f"sweep axes {sorted(unknown)} are not among {AXES}")
    count = len(backends)
    for name in names:
        count *= len(axes[name])
    if count > MAX_CONFIGURATIONS:
        from .errors import InvalidArgumentError, Problem

        longest = max(names, key=lambda n: len(axes[n])) if names else "backend"
        raise InvalidArgumentError([Problem(
            longest, f"{len(axes[longest]):,} values", f"allowed up to {MAX_CONFIGURATIONS:,} "
            f"configurations (backends x every list), not {count:,}")])
    for name in names:
        for value in axes[name]:
            base.replace(**{name: value})  # raises InvalidArgumentError naming the option and value
    template = base.as_dict()
    values = [list(axes[name]) for name in names]
    axis_values = operator.itemgetter(*AXES)
    new = Plan.__new__
    rows: list = []
    for backend in backends:
        fn = summarizer(backend)
        fn = getattr(fn, "__wrapped__", fn)  # the plans below are built checked: no argument guard per row
        for combo in itertools.product(*values):
            if progress is not None and len(rows) % PROGRESS_EVERY == 0:
                progress(len(rows), count)
            # Plan._trusted, inlined: this loop runs once per configuration
            plan = new(Plan)
            fields = plan.__dict__
            fields.update(template)
            fields.update(zip(names, combo))
            try:
                if fields["num_topk"] > fields["num_experts"]:  # a token picks num_topk distinct experts
                    raise EpbufError(f"--topk (num_topk) = {fields['num_topk']}: allowed 0..{fields['num_experts']} "
                                     "(each token picks num_topk distinct experts of --experts)")
                s = fn(plan)
            except EpbufError as error:
                rows.append((backend,) + axis_values(fields) + (None, None, "", "", str(error)))
            else:
                rows.append((backend,) + axis_values(fields)
                            + (s.num_bytes, s.num_bytes_needed, s.binding, ";".join(s.broken), ""))
    if progress is not None:
        progress(len(rows), count)
    varying = tuple(["backend"] if len(backends) > 1 else []) + tuple(n for n in names if len(axes[n]) > 1)
    return SweepResult(columns=COLUMNS, rows=rows, varying=varying)


def parse_values(text: str, option: str, integer: bool = True) -> list:
    """``"8,16,32"``, ``"1:8"`` (inclusive), ``"128:4096:128"`` (step), ``"128:4096:*2"`` (x2 each step).

    The number of values is counted before any range is expanded, over the whole text
    (200 comma-joined ranges count together), and capped at :data:`MAX_CONFIGURATIONS`.

    Raises:
        InvalidArgumentError: one line naming ``option``, the text and the accepted forms.
    """
    from .errors import InvalidArgumentError, Problem

    forms = "a list 8,16,32 or a range 1:64, 128:4096:128, 128:4096:*2"
    argument = option.lstrip("-").replace("-", "_")
    shown = text if len(text) <= 60 else text[:57] + "..."
    out: list[int] = []

    def room(extra: int) -> None:
        if len(out) + extra > MAX_CONFIGURATIONS:
            raise InvalidArgumentError([Problem(argument, shown, f"more than {MAX_CONFIGURATIONS:,} values; "
                                                                 "narrow the range")])

    try:
        for part in text.split(","):
            part = part.strip().replace("_", "")
            if len(part) > 30:  # no size or count here has more digits; int() of 4,301+ digits raises
                raise ValueError
            if ":" not in part:
                room(1)
                out.append(int(part))
                continue
            pieces = part.split(":")
            if len(pieces) not in (2, 3):
                raise ValueError
            lo, hi = int(pieces[0]), int(pieces[1])
            step = pieces[2] if len(pieces) == 3 else "1"
            if lo > hi:
                raise ValueError
            if step.startswith("*"):
                factor = int(step[1:])
                if factor < 2 or lo < 1:
                    raise ValueError
                x = lo
                while x <= hi:
                    room(1)
                    out.append(x)
                    x *= factor
            else:
                if int(step) < 1:
                    raise ValueError
                room((hi - lo) // int(step) + 1)
                out.extend(range(lo, hi + 1, int(step)))
    except InvalidArgumentError:
        raise
    except ValueError:
        raise InvalidArgumentError([Problem(argument, shown, f"use {forms}")]) from None
    if not out:
        raise InvalidArgumentError([Problem(argument, shown, f"no values; use {forms}")])
    return list(dict.fromkeys(out))
