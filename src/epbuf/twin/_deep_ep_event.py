"""DeepEP's ``EventOverlap`` and ``EventHandle`` on CPU (``deep_ep/utils/event.py @dd758ca``).

A twin call has finished its exchange by the time it returns (except a low-latency call with
``return_recv_hook=True``, whose data arrives in the hook), so an event is already complete:
``current_stream_wait()`` runs the hook registered after the wait and nothing else.
"""

from __future__ import annotations

__all__ = ["EventHandle", "EventOverlap"]


class EventHandle:
    """``deep_ep._C.EventHandle``: a captured (here: already complete) event."""

    def current_stream_wait(self) -> None:
        """The current stream waits for the event: on CPU it has happened."""


class EventOverlap:
    """``deep_ep.EventOverlap(event=None, extra_tensors=None)``: the same attributes and methods."""

    def __init__(self, event: EventHandle | None = None, extra_tensors: tuple | None = None) -> None:
        self.event = event
        self.extra_tensors = extra_tensors
        self._release_handle_by_call = False
        self.hook_after_wait = None

    def current_stream_wait(self, release_handle: bool = False) -> None:
        assert self.event is not None
        self.event.current_stream_wait()
        if self.hook_after_wait is not None:
            self.hook_after_wait()
            self.hook_after_wait = None
        if release_handle:
            self.event = None

    def register_hook_after_wait(self, hook_after_wait) -> None:
        assert self.hook_after_wait is None, "A hook is already registered on this `EventOverlap`"
        self.hook_after_wait = hook_after_wait

    def __call__(self, release_handle: bool = False) -> EventOverlap:
        self._release_handle_by_call = release_handle
        return self

    def __enter__(self) -> EventOverlap:
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        if self.event is not None:
            self.current_stream_wait(release_handle=self._release_handle_by_call)
        self._release_handle_by_call = False
