"""Output files are written whole or not at all, and nothing else on disk is harmed.

What happens depends on what the target is:

* ``-``: the bytes go to standard output.
* A character device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a named pipe):
  written through, as a shell redirection would; replacing it by a regular file would
  destroy it.
* A regular file or a new name: a temporary file beside the real target (symlinks are
  followed, so the file a link points to is replaced and the link stays a link), flushed,
  fsynced, given the old file's permission bits (a new file gets ``0666 & ~umask``, as
  ``open`` would), then renamed over it (``os.replace`` is atomic on POSIX and Windows).

A failure on the way — a full disk, an exception while rendering, Ctrl-C or SIGTERM —
leaves the previous file untouched and no temporary file behind, and every ``OSError``
becomes one line (:class:`OutputFileError`) naming the option and the path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from .errors import EpbufError

__all__ = ["OutputFileError", "write_atomic", "write_text_atomic"]


class OutputFileError(EpbufError):
    """An output file that cannot be written (missing folder, no permission, disk full ...)."""


def _error(option: str, target: str, error: OSError) -> OutputFileError:
    return OutputFileError(f"{option}: {target}: cannot write ({error.strerror or error})")


def _open_mode(binary: bool) -> dict:
    return {"mode": "wb"} if binary else {"mode": "w", "encoding": "utf-8", "newline": ""}


def _write_stdout(write: Callable[[object], None], binary: bool, option: str) -> None:
    import sys

    if sys.stdout is None:
        raise OutputFileError(f"{option}: -: standard output is closed")
    stream = getattr(sys.stdout, "buffer", None) if binary else sys.stdout
    if stream is None:  # a text-only stream in place of stdout (an embedding application's)
        raise OutputFileError(f"{option}: -: standard output takes no binary data here")
    try:
        write(stream)
        stream.flush()
    except OSError as error:
        raise _error(option, "-", error) from None


def _write_through(target: str, write: Callable[[object], None], binary: bool, option: str) -> None:
    """Devices and pipes: open and write in place (no temporary file, no rename)."""
    try:
        with open(target, **_open_mode(binary)) as f:
            write(f)
    except OSError as error:
        raise _error(option, target, error) from None


class _Terminated(BaseException):
    """Raised by the temporary SIGTERM handler so that cleanup runs before the exit."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated(signum)


def write_atomic(path: str | os.PathLike, write: Callable[[object], None], *, binary: bool = False,
                 option: str = "--output") -> None:
    """Call ``write(file_object)`` for ``path`` so that it ends up whole or untouched.

    Raises:
        OutputFileError: the folder does not exist, the target is a folder, or writing
            fails (one line, naming ``option`` and the path). Exceptions raised by
            ``write`` propagate after the temporary file is removed. SIGTERM during the
            write removes the temporary file, then exits with status 143.
    """
    target = os.fspath(path)
    if target == "":
        raise OutputFileError(f"{option}: the file name is empty")
    if target == "-":
        return _write_stdout(write, binary, option)
    try:
        st = os.stat(target)  # follows symlinks: what the name really is
    except FileNotFoundError:
        st = None
    except OSError as error:
        raise _error(option, target, error) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputFileError(f"{option}: {target}: is a folder, expected a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return _write_through(target, write, binary, option)

    real = os.path.realpath(target)  # a symlink's final target: replace that file, keep the link
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise OutputFileError(f"{option}: {target}: folder {folder} does not exist")
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=".epbuf-", suffix=".tmp", dir=folder)
    except OSError as error:
        raise OutputFileError(f"{option}: {target}: cannot write in {folder} ({error.strerror})") from None
    restore = _catch_sigterm()
    try:
        with os.fdopen(fd, **_open_mode(binary)) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.chown(tmp, st.st_uid, st.st_gid)
                except OSError:
                    pass  # not permitted: the file becomes ours, as any editor's save would
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, real)
    except BaseException as error:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(error, _Terminated):
            raise SystemExit(128 + error.args[0]) from None
        if isinstance(error, OSError):
            raise _error(option, target, error) from None
        raise
    finally:
        restore()


def _catch_sigterm() -> Callable[[], None]:
    """Turn SIGTERM into an exception for the duration of a write (main thread only), so
    the temporary file is removed; returns the function that restores the old handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _terminate)
    return lambda: signal.signal(signal.SIGTERM, previous)


def write_text_atomic(path: str | os.PathLike, text: str, *, option: str = "--output") -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomic(path, lambda f: f.write(text), option=option)
