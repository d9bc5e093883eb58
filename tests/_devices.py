"""Device nodes a test makes in its own folder (see :func:`make_device_nodes`)."""

from __future__ import annotations

from pathlib import Path


def make_device_nodes(folder: Path, names=("null", "full", "zero", "urandom")) -> dict:
    """Character devices made in ``folder`` with the major/minor numbers of ``/dev/<name>``, so
    that a test aims output at a device node of its own, never at the machine's ``/dev`` (a
    regression that replaced the target would replace a file in the test's folder). Only the
    nodes this process may make and open are returned (none without CAP_MKNOD or on a nodev mount)."""
    import os
    import stat

    made = {}
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.stat(f"/dev/{name}").st_rdev)
            with open(path, "rb" if name in ("zero", "urandom") else "wb"):
                pass
        except OSError:
            if path.exists():
                path.unlink()
            continue
        made[name] = path
    return made
