"""Output files are written whole or not at all: a temporary file beside the target,
flushed and fsynced, then renamed over it (``os.replace`` is atomic on POSIX and Windows).
A failure on the way — a full disk, an exception while rendering, Ctrl-C — leaves any
previous file untouched and no partial file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

from .errors import EpbufError

__all__ = ["OutputFileError", "write_atomic", "write_text_atomic"]


class OutputFileError(EpbufError):
    """An output file that cannot be written (missing folder, no permission ...)."""


def write_atomic(path: str | os.PathLike, write: Callable[[object], None], *, binary: bool = False,
                 option: str = "--output") -> None:
    """Call ``write(file_object)`` on a temporary file, then move it to ``path``.

    Raises:
        OutputFileError: the folder does not exist or is not writable (one line, naming
            ``option`` and the path). Exceptions raised by ``write`` propagate after the
            temporary file is removed.
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise OutputFileError(f"{option}: {target}: folder {folder} does not exist")
    if os.path.isdir(target):
        raise OutputFileError(f"{option}: {target}: is a folder, expected a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".epbuf-", suffix=".tmp", dir=folder)
    except OSError as error:
        raise OutputFileError(f"{option}: {target}: cannot write in {folder} ({error.strerror})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: str | os.PathLike, text: str, *, option: str = "--output") -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomic(path, lambda f: f.write(text), option=option)
