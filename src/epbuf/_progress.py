"""A progress line on a terminal, shared by the long-running commands (``sweep``, ``simulate``).

``terminal_progress(stream, label)`` returns ``progress(stage, done=None, total=None)`` that
rewrites one status line on ``stream`` when it is a terminal (and nothing otherwise), once
``delay`` seconds have passed since it was made, so quick runs print nothing; ``progress.done()``
clears the line. Standard library only.
"""

from __future__ import annotations

__all__ = ["terminal_progress"]


def terminal_progress(stream, label: str = "epbuf simulate", delay: float = 0.0):
    """A ``progress(stage, done=None, total=None)`` drawing ``label: stage  NN %`` on ``stream``
    (a terminal) from ``delay`` seconds on; call ``.done()`` at the end (it clears the line)."""
    import time

    try:
        active = bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        active = False
    start = time.monotonic()
    drawn = [False]

    def progress(stage: str, done=None, total=None) -> None:
        if not active or (delay and time.monotonic() - start < delay):
            return
        share = f" {100 * done // total:3d} %" if done is not None and total else ""
        try:
            stream.write(f"\r\033[K{label}: {stage}{share}")
            stream.flush()
            drawn[0] = True
        except (OSError, ValueError):
            pass

    def finish() -> None:
        if drawn[0]:
            try:
                stream.write("\r\033[K")
                stream.flush()
            except (OSError, ValueError):
                pass

    progress.done = finish
    return progress
