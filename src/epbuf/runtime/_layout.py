"""What the runtime reads from a backend's report: the buffer to allocate and where the
dispatch and combine records sit in it (:func:`epbuf.codec.region_slots`)."""

from __future__ import annotations

from functools import cached_property

from .._record import Record
from ..codec.regions import RegionSlots, region_slots
from ..errors import EpbufError
from ..report import Report

__all__ = ["RuntimeLayout"]


class RuntimeLayout(Record):
    """What the runtime reads from a backend's report: the buffer to allocate and where the
    dispatch and combine records sit in it.

    Attributes:
        report: the backend's report for the plan.
        dispatch: the array of ``"dispatch"`` records (rows = source ranks).
        combine: the array of ``"combine"`` records (rows = destination ordinals).
        num_bytes: the buffer's size (the hint).
    """

    report: Report
    dispatch: RegionSlots
    combine: RegionSlots
    num_bytes: int

    @classmethod
    def from_plan(cls, plan, backend: str) -> "RuntimeLayout":
        from ..plan import report as make_report

        experts = plan.num_total_experts
        if experts % plan.num_ranks:
            # The sizes exist (the report answers with an error finding), but the routing needs
            # every rank to hold num_experts / num_ranks experts, as upstream's dispatch asserts.
            from ..errors import InvalidArgumentError, Problem

            raise InvalidArgumentError([Problem("num_experts", experts, f"must be divisible by num_ranks = "
                                                                        f"{plan.num_ranks} (each rank holds "
                                                                        "num_experts / num_ranks experts)")])
        rep = make_report(plan, backend)
        dispatch, combine = region_slots(rep, "dispatch"), region_slots(rep, "combine")
        if dispatch.buffer != combine.buffer:
            raise EpbufError(f"{backend}: dispatch and combine records live in different buffers "
                             f"({dispatch.buffer.name!r}, {combine.buffer.name!r}); the runtime allocates one")
        for region in (dispatch, combine):
            problems = region.record.overlaps()
            if problems or region.record.overrun_bytes():
                raise EpbufError(
                    f"{backend}: the {region.record.name!r} record's fields overlap {problems} or end "
                    f"{region.record.overrun_bytes()} B past its {region.record.num_bytes}-byte stride "
                    f"(see the report's findings); consecutive slots would clobber each other")
        if dispatch.rows != plan.num_ranks or dispatch.slots != plan.num_max_tokens_per_rank:
            raise EpbufError(f"{backend}: the dispatch region is {dispatch.rows} x {dispatch.slots} slots, "
                             f"not ranks x tokens = {plan.num_ranks} x {plan.num_max_tokens_per_rank}")
        refusals = [f.code for f in rep.findings if f.severity == "error"]
        if refusals:
            # Sizes exist, so the runtime runs it (the one rule); but upstream would not, and the
            # bytes may sit where the report's reader expects them rather than where the kernel
            # writes them: say so once per layout, never silently.
            import warnings

            from ..errors import UpstreamRefusalWarning

            warnings.warn(f"{backend}: upstream would refuse this plan ({', '.join(refusals)}; see "
                          f"epbuf.report(plan, {backend!r}).findings); the runtime runs it with the layout "
                          "epbuf reports", UpstreamRefusalWarning, stacklevel=3)
        return cls(report=rep, dispatch=dispatch, combine=combine, num_bytes=dispatch.buffer.num_bytes)

    @cached_property  # asked for several times per call; the layout never changes
    def num_ranks(self) -> int:
        return self.dispatch.rows

    @cached_property  # asked for several times per call; the layout never changes
    def num_max_tokens_per_rank(self) -> int:
        return self.dispatch.slots

    @cached_property  # asked for several times per call; the layout never changes
    def num_topk(self) -> int:
        return self.dispatch.record.field("topk_idx").count

    @cached_property  # asked for several times per call; the layout never changes
    def hidden(self) -> int:
        return self.dispatch.record.field("hidden").count

    @cached_property  # asked for several times per call; the layout never changes
    def num_sf_bytes(self) -> int:
        """SF bytes per token of a real FP8 dispatch (0 for BF16)."""
        try:
            return self.dispatch.record.field("sf").num_bytes
        except KeyError:
            return 0

    @cached_property  # asked for several times per call; the layout never changes
    def num_experts(self) -> int:
        return int(self.report.inputs["num_experts"]) + int(self.report.inputs.get("num_redundant_experts", 0))
