"""Issue 21: simulate's wrong or silent answers, each through the exact input of the issue."""

from __future__ import annotations

import os

import pytest

from _cli_run import run_cli  # tests/_cli_run.py (conftest puts tests/ on the path)

np = pytest.importorskip("numpy")


def _npy_header_only(path, shape, size=None):
    """A .npy file whose header declares ``shape`` (int64); sparse up to ``size`` bytes."""
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': %s, }" % (shape,)
    header += " " * (118 - len(header)) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    if size is not None:
        os.truncate(path, size)


def test_a_negative_dimension_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "neg.npy"
    _npy_header_only(path, (4, -1, 8))
    code, out, err = run_cli(capsys, "simulate", "--routing-file", str(path), "--ranks", "4")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "its header declares shape [4, -1, 8]; dimensions must be >= 0" in err


def test_the_declared_shape_is_checked_before_the_data_is_read(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.npy"
    _npy_header_only(path, (4, 10**8, 1), size=128 + 4 * 10**8 * 8)  # sparse: 3.2 GB declared, none on disk
    import numpy

    def no_load(*args, **kwargs):
        raise AssertionError("the data was read before the shape was checked")

    monkeypatch.setattr(numpy, "load", no_load)
    code, out, err = run_cli(capsys, "simulate", "--routing-file", str(path), "--ranks", "4", "--tokens", "16")
    assert code == 2 and "100000000 tokens per rank, more than --tokens (num_max_tokens_per_rank) = 16" in err


def test_a_large_zipf_exponent_leaks_no_numpy_warning(capsys):
    code, out, err = run_cli(capsys, "simulate", "--ranks", "4", "--tokens", "8", "--routing", "zipf:1e308")
    assert code == 0 and err == ""


def test_a_pickled_torch_file_gets_no_unpickling_advice(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    path = tmp_path / "np.pt"
    torch.save({"topk_idx": np.zeros((4, 8, 2), dtype=np.int64)}, path)
    code, out, err = run_cli(capsys, "simulate", "--routing-file", str(path), "--ranks", "4", "--tokens", "8",
                             "--topk", "2")
    assert code == 2 and err.count("\n") == 1
    assert "holds objects other than tensors" in err and "trust the source" not in err and "\x1b" not in err
