"""One way for the tests to run the command line in-process: ``run_cli(capsys, *argv)`` ->
``(exit status, stdout, stderr)``, ``SystemExit`` (argparse's errors and ``--help``) included."""

from __future__ import annotations

from epbuf.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err
