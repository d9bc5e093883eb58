"""Issue 9, data loss: output targets that are links, devices, pipes, stdout, or full disks,
and signals during a write. Nothing on disk is replaced that should not be, nothing is left
behind, and every failure is one line."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from epbuf.cli import main
from epbuf.io import OutputFileError, write_atomic, write_text_atomic


def test_symlink_target_replaces_the_file_it_points_to_and_stays_a_link(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_text_atomic(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]


def test_dangling_symlink_creates_the_file_it_names(tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "later.csv")
    write_text_atomic(link, "x")
    assert link.is_symlink() and (tmp_path / "later.csv").read_text() == "x"


def test_existing_file_keeps_its_mode(tmp_path):
    target = tmp_path / "secret.csv"
    target.write_text("old")
    os.chmod(target, 0o600)
    write_text_atomic(target, "new")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and target.read_text() == "new"


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_text_atomic(tmp_path / "new.csv", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.csv").st_mode) == 0o640


# The devices are nodes the test makes in its own folder (conftest.make_device_nodes), with the
# numbers of /dev/null and /dev/full: a regression that replaced its target replaces nothing of the machine.
def test_character_device_is_written_through_not_replaced(device_nodes, tmp_path):
    null = device_nodes["null"]
    write_text_atomic(null, "x" * 1000, option="--csv")
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert sorted(os.listdir(null.parent)) == sorted(device_nodes)  # no temporary file beside it


def test_full_device_is_one_line_and_stays_a_device(device_nodes):
    full = device_nodes["full"]
    with pytest.raises(OutputFileError, match=rf"^--csv: {full}: cannot write \(No space left on device\)$"):
        write_text_atomic(full, "x" * 100_000, option="--csv")
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_cli_csv_to_dev_full_exits_2_with_one_line(capsys, device_nodes):
    code = main(["sweep", "--tokens", "128,256", "--csv", str(device_nodes["full"]), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err
    assert stat.S_ISCHR(os.stat(device_nodes["full"]).st_mode)


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_text_atomic(fifo, "through the pipe")
    reader.join(timeout=10)
    assert got == ["through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_dash_is_standard_output(capsys):
    write_text_atomic("-", "a,b\n1,2\n", option="--csv")
    assert capsys.readouterr().out == "a,b\n1,2\n"


def test_empty_name_is_refused():
    with pytest.raises(OutputFileError, match="--svg: the file name is empty"):
        write_text_atomic("", "x", option="--svg")


def test_os_error_while_writing_is_one_line_and_leaves_nothing(tmp_path):
    target = tmp_path / "out.csv"

    def fail(f):
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputFileError, match="No space left on device"):
        write_atomic(target, fail, option="--csv")
    assert list(tmp_path.iterdir()) == []


SLOW_WRITER = textwrap.dedent("""
    import sys, time
    from epbuf.io import write_atomic
    def slow(f):
        f.write("x" * 1_000_000)
        print("writing", flush=True)
        time.sleep(30)
    write_atomic(sys.argv[1], slow, option="--csv")
""")


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, None)])
def test_signal_during_write_removes_the_temporary_file(tmp_path, signum, code):
    target = tmp_path / "big.csv"
    target.write_text("previous\n")
    with subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdout.readline().strip() == "writing"
        assert any(p.name.startswith(".epbuf-") for p in tmp_path.iterdir())
        proc.send_signal(signum)
        proc.wait(timeout=20)
    if code is not None:
        assert proc.returncode == code
    else:
        assert proc.returncode != 0  # KeyboardInterrupt in a bare script
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.csv"]
    assert target.read_text() == "previous\n"
