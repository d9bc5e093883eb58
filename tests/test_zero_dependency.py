"""``import epbuf`` and the planning CLI use the standard library only."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import sys, io, contextlib
import epbuf
from epbuf.cli import main
for argv in (["hint"], ["hint", "--json"], ["layout"]):
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv
third_party = sorted(
    name for name in sys.modules
    if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] not in ("epbuf", "__main__")
)
print(",".join(third_party))
"""


def test_core_imports_only_the_standard_library():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.strip()
    # site-packages hooks (e.g. a sitecustomize) may preload modules; only ours are under test
    offenders = [m for m in out.split(",") if m and m.split(".")[0] in ("numpy", "matplotlib", "torch", "hypothesis")]
    assert offenders == [], offenders
    assert "torch" not in out and "numpy" not in out


def test_an_interrupted_optional_import_stays_an_interrupt(monkeypatch):
    """Ctrl-C while a C extension loads can surface as an ImportError; epbuf._lazy.optional keeps
    it a KeyboardInterrupt (exit 130) rather than a 'needs numpy' line (exit 2). A plain missing
    library is still the one line naming the extra."""
    import builtins

    from epbuf._lazy import optional
    from epbuf.errors import MissingExtraError

    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "epbuf_fake_extension":
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as interrupt:
                raise ImportError("initialization of epbuf_fake_extension failed") from interrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(KeyboardInterrupt):
        optional("epbuf_fake_extension", "needs it: pip install 'epbuf[x]'")
    with pytest.raises(MissingExtraError, match=r"^needs it: pip install 'epbuf\[x\]' "
                                                r"\(in a checkout: '\.\[x\]'\)$"):
        optional("epbuf_no_such_module", "needs it: pip install 'epbuf[x]'")
