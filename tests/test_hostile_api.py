"""Issue 9: hostile values through the Python API and input files. Each case is the exact
input the fuzzing campaign found; each gets an EpbufError naming the argument (never a
TypeError, an OverflowError, a hang or a report that cannot be serialised)."""

from __future__ import annotations

import math
import os

import pytest

import epbuf
from epbuf import Plan, report
from epbuf.errors import ConfigFileError, EpbufError, InvalidArgumentError, UnknownNameError
from epbuf.fit import fit_ranks, fit_tokens
from epbuf.models import MAX_CONFIG_BYTES, read_model_config
from epbuf.units import format_bytes, parse_bytes

PLAN = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=1)


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: fit_tokens(PLAN, "ascend", 0), "--budget (budget) = 0"),
    (lambda: fit_tokens(PLAN, "ascend", -(1 << 30)), "--budget (budget) = -1073741824"),
    (lambda: fit_tokens(PLAN, "ascend", math.nan), "--budget (budget) = nan"),
    (lambda: fit_tokens(PLAN, "ascend", "8GiB"), "--budget (budget) = '8GiB'"),
    (lambda: fit_tokens(PLAN, "ascend", 1 << 30, max_tokens=0), "--max-tokens (max_tokens) = 0"),
    (lambda: fit_tokens(PLAN, "ascend", 1 << 30, max_tokens=-5), "--max-tokens (max_tokens) = -5"),
    (lambda: fit_tokens(PLAN, "ascend", 1 << 30, max_tokens=1.5), "--max-tokens (max_tokens) = 1.5"),
    (lambda: fit_ranks(PLAN, "ascend", 1 << 30, max_ranks=1.5), "--max-ranks (max_ranks) = 1.5"),
    (lambda: fit_tokens("plan", "ascend", 1 << 30), "(plan) = 'plan'"),
    (lambda: report(PLAN, ["ascend"]), "--backend (backend) = ['ascend']"),
    (lambda: epbuf.compare(PLAN, [["ascend"]]), "(backends) = [['ascend']]"),
    (lambda: report({"hidden": 7168}, "ascend"), "(plan) = {'hidden': 7168}"),
    (lambda: Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=1,
                  model=object()), "--model (model)"),
])
def test_api_rejects_with_one_line_naming_the_argument(call, needle):
    with pytest.raises(EpbufError) as info:
        call()
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, (InvalidArgumentError, UnknownNameError))


@pytest.mark.parametrize("text", ["1e400", "1e5000", "1e100000000", "9.3e18", "1" + "0" * 5000])
def test_sizes_beyond_int64_are_refused_at_once(text):
    with pytest.raises(ValueError, match="out of range|not a byte size"):
        parse_bytes(text)


def test_format_bytes_never_overflows():
    assert format_bytes(10**400).endswith(" EiB")
    assert format_bytes(-(10**400)).startswith("-")


def test_bare_unit_letters_are_iec():
    assert parse_bytes("4G") == parse_bytes("4g") == 4 << 30
    assert parse_bytes("512M") == 512 << 20


def test_config_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigFileError, match="not a regular file"):
        read_model_config(fifo)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_config_device_is_refused_without_reading(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    with pytest.raises(ConfigFileError, match="not a regular file"):
        read_model_config(device)


def test_config_too_large_is_refused(tmp_path):
    big = tmp_path / "config.json"
    with open(big, "wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ConfigFileError, match="too large for a config.json"):
        read_model_config(big)


def test_config_integer_of_5000_digits_is_one_line(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"hidden_size": 1' + "0" * 5000 + ', "n_routed_experts": 8, "num_experts_per_tok": 2}')
    with pytest.raises(ConfigFileError, match="not JSON this reader accepts .*4300 digits"):
        read_model_config(cfg)


def test_config_empty_path_is_refused():
    with pytest.raises(ConfigFileError, match="the path is empty"):
        read_model_config("")


@pytest.mark.parametrize("text", ["1e400", "1e100000000", "9.3e18"])
def test_hbm_beyond_int64_names_the_range(text):
    """``--hbm 1e400`` said "not a byte size" (``--budget 1e400`` already named the int64 range)."""
    from epbuf.devices import parse_capacity

    with pytest.raises(InvalidArgumentError, match=r"out of range; allowed 1\.\.9,223,372,036,854,775,807 B \(int64\)"):
        parse_capacity(text)


@pytest.mark.parametrize(("call", "needle"), [
    (lambda c, rep, buf: c.unpack(rep.record("dispatch"), buf, num_slots=1.5), "(num_slots) = 1.5: must be an integer"),
    (lambda c, rep, buf: c.slot_rows(buf, -1, 2), "(stride) = -1: allowed >= 1"),
    (lambda c, rep, buf: c.slot_rows(buf, 16, 2, -5), "(offset) = -5: allowed >= 0"),
    (lambda c, rep, buf: c.region_slots(rep, "bogus"), "record = 'bogus': not a record of the report"),
])
def test_codec_arguments_are_epbuf_errors(call, needle):
    """The final audit's codec inputs: a float num_slots (TypeError from a slice), a negative
    stride (numpy's ValueError), a negative offset (silently read from the buffer's end), an
    unknown record name (bare KeyError)."""
    np = pytest.importorskip("numpy")
    import epbuf.codec as codec

    rep = report(Plan(hidden=7168, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=16), "ascend")
    with pytest.raises(EpbufError) as info:
        call(codec, rep, np.zeros(100_000, dtype=np.uint8))
    assert needle in str(info.value)
