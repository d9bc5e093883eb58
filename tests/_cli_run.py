"""One way for the tests to run the command line in-process: ``run_cli(capsys, *argv)`` ->
``(exit status, stdout, stderr)``, ``SystemExit`` (argparse's errors and ``--help``) included;
``run_cli_whole`` the same with error lines as the library wrote them (not cut to 100 columns)."""

from __future__ import annotations

import contextlib

from epbuf.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def whole_errors():
    """The 100-column guard of error lines off (``epbuf.cli._types.fit_line``): errors as the
    library wrote them, for tests of what a message says (tests/test_columns.py checks the guard)."""
    from epbuf.cli import _types

    saved = _types.fit_line
    _types.fit_line = lambda line, width=0: line
    try:
        yield
    finally:
        _types.fit_line = saved


def run_cli_whole(capsys, *argv: str) -> tuple[int, str, str]:
    """:func:`run_cli` under :func:`whole_errors`."""
    with whole_errors():
        return run_cli(capsys, *argv)
