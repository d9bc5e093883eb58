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
    assert "header shape [4, -1, 8]: dimensions must be >= 0" in err


def test_the_declared_shape_is_checked_before_the_data_is_read(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.npy"
    _npy_header_only(path, (4, 10**8, 1), size=128 + 4 * 10**8 * 8)  # sparse: 3.2 GB declared, none on disk
    import numpy

    def no_load(*args, **kwargs):
        raise AssertionError("the data was read before the shape was checked")

    monkeypatch.setattr(numpy, "load", no_load)
    code, out, err = run_cli(capsys, "simulate", "--routing-file", str(path), "--ranks", "4", "--tokens", "16")
    assert code == 2 and "100000000 tokens per rank > --tokens 16" in err


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
    assert "holds objects, not only tensors" in err and "trust the source" not in err and "\x1b" not in err


def test_a_phase_sharing_its_region_has_no_headroom_beside_a_full_fill(capsys):
    """deepep-ll's send buffer holds dispatch and combine: the dispatch use filled 100 % of its
    slots while 'headroom' counted the whole 455 MiB region."""
    import json

    code, out, _ = run_cli(capsys, "simulate", "--backend", "deepep-ll", "--ranks", "16", "--tokens", "128", "--json")
    use = next(u for u in json.loads(out)["regions"] if u["phase"] == "dispatch" and u["region"] == "send buffer 0")
    assert use["peak_used_slots"] == use["rows"] * use["slots"]  # full
    assert use["headroom_bytes"] == use["rows"] * use["slots"] * use["slot_bytes"] - use["peak_used_bytes"]
    assert use["headroom_bytes"] < use["num_bytes"] // 100
    code, out, _ = run_cli(capsys, "simulate", "--backend", "deepep-ll", "--ranks", "16", "--tokens", "128")
    assert "dispatch send buffer 0: shared" in out


def test_the_worst_case_follows_expert_alignment(capsys):
    import json

    code, out, _ = run_cli(capsys, "simulate", "--ranks", "8", "--tokens", "64", "--expert-alignment", "128", "--json")
    experts = json.loads(out)["experts"]
    # 8 ranks x 64 tokens x min(top-6, 32 local) = 3,072; + 127 x 32 = 7,136; aligned to 128: 7,168
    assert experts["bound"] == 7_168 and max(experts["expanded_tokens"]) <= experts["bound"]
    code, out, _ = run_cli(capsys, "simulate", "--ranks", "8", "--tokens", "64", "--json")
    assert json.loads(out)["experts"]["bound"] == 3_072


def test_the_plot_has_whole_rank_ticks_and_scaled_byte_units(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from epbuf.plot import _pyplot

    plt = _pyplot()
    figures = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    code, _, _ = run_cli(capsys, "simulate", "--ranks", "3", "--tokens", "2", "--topk", "2", "--experts", "6",
                         "--plot", str(tmp_path / "p.png"))
    assert code == 0 and figures
    heat = figures[0].axes[0]
    for ticks in (heat.get_xticks(), heat.get_yticks()):
        assert all(float(t).is_integer() for t in ticks)
    assert "0.00 GB" not in heat.get_title() and " kB" in heat.get_title()
    real_close(figures[0])
