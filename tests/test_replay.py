"""The DeepEP-Ascend writer/reader replay on real bytes (epbuf.codec.replay, ``epbuf replay``):
hidden 7168 reads back every field exactly; FP8, hidden 7000, top-k 6 reads exactly these
wrong values."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

import epbuf
from epbuf.cli import main
from epbuf.codec.replay import SCHEMA, replay, replay_to_dict

DEFAULT = dict(num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096)


def test_hidden_7168_recovers_every_field():
    r = replay(epbuf.Plan(hidden=7168, **DEFAULT))
    assert r.consistent and r.findings == ()
    assert [(f.name, f.written_offset, f.read_offset, f.num_differing) for f in r.fields] == [
        ("hidden", 0, 0, 0), ("sf", 7168, 7168, 0), ("topk_idx", 7392, 7392, 0), ("topk_weights", 7456, 7456, 0),
        ("src_token_global_idx", 7480, 7480, 0)]
    assert r.field("src_token_global_idx").read == (7 * 4096,)


def test_hidden_7000_fp8_reads_exactly_these_wrong_values():
    """The reader starts 8 bytes late (align(7000, 32) = 7008) and its last field runs 4 bytes
    into the next slot; each read value is derived here from the written bytes."""
    r = replay(epbuf.Plan(hidden=7000, **DEFAULT))
    assert not r.consistent
    assert [f.code for f in r.findings] == ["ascend.reader-writer-mismatch", "ascend.unaligned-fields"]
    hidden, sf, idx, weights, src = (r.field(n) for n in ("hidden", "sf", "topk_idx", "topk_weights",
                                                          "src_token_global_idx"))
    assert (sf.written_offset, idx.written_offset, weights.written_offset, src.written_offset) == (7000, 7224, 7288, 7312)
    assert (sf.read_offset, idx.read_offset, weights.read_offset, src.read_offset) == (7008, 7232, 7296, 7320)
    assert hidden.read == hidden.written and hidden.num_differing == 0

    # sf: 8 bytes later = 4 int16 packs later; then 4 padding bytes and the low half of topk_idx[0]
    idx0 = struct.pack("<q", idx.written[0])
    assert sf.read == sf.written[4:] + (0, 0) + struct.unpack("<2h", idx0[:4])
    assert sf.as_float32(sf.read) == sf.as_float32(sf.written)[2:] + (0.0, struct.unpack("<f", idx0[:4])[0])
    assert sf.num_differing == 109 and sf.as_float32(sf.written)[:2] == pytest.approx((1 / 448, 2 / 448))
    # top-k ids: one id later, then 8 padding bytes
    assert idx.written == (21, 64, 106, 149, 192, 234)
    assert idx.read == (64, 106, 149, 192, 234, 0)
    # weights: two weights later, then the source index's bits and 4 padding bytes
    assert weights.written == (0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625)
    src_bits_as_float = struct.unpack("<f", struct.pack("<i", 7 * 4096))[0]
    assert weights.read == (0.125, 0.0625, 0.03125, 0.015625, src_bits_as_float, 0.0)
    # source index: the first 4 bytes of the next slot, i.e. the next token's first 4 FP8 codes
    next_token = r.next_src_token_global_idx
    assert next_token == 7 * 4096 + 1
    next_codes = [((i + next_token) * 37 + 11) % 0x7F | (0x80 if (i + next_token) % 3 == 0 else 0) for i in range(4)]
    assert src.written == (28672,) and src.read == struct.unpack("<i", bytes(next_codes))
    assert src.reads_next_slot and src.read_end == 7324 and r.writer.num_bytes == 7320


def test_the_numpy_codec_replays_the_same_bytes():
    """Two independent byte movers agree: epbuf.codec.pack with the writer view and unpack with
    the getters view give the replay's values for the sample slot."""
    np = pytest.importorskip("numpy")
    from epbuf.codec import pack, unpack
    from epbuf.codec._arrays import numpy_ops
    from epbuf.codec.replay import _sample_values

    r = replay(epbuf.Plan(hidden=7000, **DEFAULT))
    ops = numpy_ops()
    tokens = {f.name: np.array([_sample_values(f, src, 256) for src in (r.src_token_global_idx,
                                                                          r.next_src_token_global_idx)],
                               dtype=ops.dtype(f.dtype))
              for f in r.writer.data_fields()}
    assert tokens["topk_idx"][0].tolist() == list(r.field("topk_idx").written)
    buffer = pack(r.writer, **tokens)
    got = unpack(r.reader, buffer, num_slots=1)
    for f in r.fields:
        assert got[f.name].reshape(-1).view(np.uint8).tobytes() == \
            np.array(f.read, dtype=ops.dtype(f.dtype)).view(np.uint8).tobytes(), f.name


def test_bf16_and_sf_pack_variants():
    """BF16 (no SF packs): the metadata follows the hidden bytes in both views. An odd SF pack
    count still replays (int16 packs, no fp32 view)."""
    bf16 = replay(epbuf.Plan(hidden=7000, use_fp8_dispatch=False, **DEFAULT))
    assert bf16.consistent and [f.name for f in bf16.fields][1] == "topk_idx"
    odd = replay(epbuf.Plan(hidden=7168, num_sf_packs=111, **DEFAULT))
    assert odd.field("sf").as_float32(odd.field("sf").written) is None and odd.field("sf").count == 111


def run_main(capsys, *argv):
    from _cli_run import run_cli_whole  # error lines as the library wrote them

    return run_cli_whole(capsys, *argv)


def test_cli_replay_shows_the_disagreement_and_exits_0(capsys):
    code, out, err = run_main(capsys, "replay", "--hidden", "7000", "--topk", "6", "--fp8")
    assert code == 0 and err == ""
    assert "4 of 5 fields read back wrong: sf, topk_idx, topk_weights, src_token_global_idx" in out
    assert "7,320 (next slot)" in out and "[21, 64, 106, 149, 192, 234]" in out and "[64, 106, 149, 192, 234, 0]" in out
    assert "[ascend.reader-writer-mismatch]" in out
    code, out, _ = run_main(capsys, "replay")
    assert code == 0 and "every field reads back exactly as written" in out


def test_cli_replay_json(capsys):
    code, out, _ = run_main(capsys, "replay", "--hidden", "7000", "--json")
    data = json.loads(out)
    assert code == 0 and data["schema"] == SCHEMA == "epbuf.replay/1"
    assert set(data) == {"schema", "backend", "upstream", "inputs", "num_slot_bytes", "writer", "reader", "sample",
                         "fields", "consistent", "findings", "summary"}
    summary = data.pop("summary")
    assert summary["fits"] is False and summary["num_wrong_fields"] == 4  # the verdict: fields read back wrong
    assert data == json.loads(json.dumps(replay_to_dict(replay(epbuf.Plan(hidden=7000, **DEFAULT)))))
    src = data["fields"][-1]
    assert src["name"] == "src_token_global_idx" and src["reads_next_slot"] and src["read_end"] == 7324
    assert data["fields"][1]["read_float32"][-2:] == [0.0, struct.unpack("<f", struct.pack("<q", 21)[:4])[0]]
    assert data["consistent"] is False and data["writer"]["view"] == "writer" and data["reader"]["view"] == "getters"


def test_cli_replay_bad_input_is_one_line(capsys):
    # ranks above 256 give sizes plus an error finding under the one rule; a hidden size that no
    # upstream int can hold is refused
    code, _, err = run_main(capsys, "replay", "--hidden", "3000000000")
    assert code == 2 and err.count("\n") == 1 and "--hidden (hidden) = 3000000000" in err


@pytest.mark.parametrize("argv,message", [
    (["--backend-version", "2026-07"], "unrecognized arguments: --backend-version 2026-07"),
    (["--no-hybrid"], "unrecognized arguments: --no-hybrid"),
    (["--env", "MORI_EP_COMM=1"], "unrecognized arguments: --env MORI_EP_COMM=1"),
    (["--device", "h200"], "unrecognized arguments: --device h200"),
    (["--hbm", "8GiB"], "unrecognized arguments: --hbm 8GiB"),
    (["--bf16", "--sf-packs", "3"], "with --bf16 none are sent"),
])
def test_cli_replay_refuses_options_it_would_ignore(capsys, argv, message):
    """An audit found replay accepting (and ignoring) other backends' options and --device; since
    issue 21 replay does not offer them at all (its --help lists only what it reads)."""
    code, out, err = run_main(capsys, "replay", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_replay_stays_standard_library_only():
    probe = ("import sys, io, contextlib\nfrom epbuf.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['replay', '--hidden', '7000']) == 0\n"
             "print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_replay_of_a_plan_whose_last_index_overflows_int(capsys):
    """Fuzzing found ``replay --tokens 2 --ranks 2147483647`` packing an index past int32: the
    sample comes from rank 0 then (the report flags the plan's kernel limits)."""
    code, out, err = run_main(capsys, "replay", "--fp8", "--tokens", "2", "--ranks", "2147483647")
    assert code == 0 and err == "" and "source token 0" in out
