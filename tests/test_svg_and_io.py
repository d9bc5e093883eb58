"""SVG byte maps and atomic output files."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

from epbuf import Plan, report
from epbuf.cli import main
from epbuf.io import OutputFileError, write_atomic, write_text_atomic
from epbuf.svg import render_svg

NS = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(NS + "text")]


def test_svg_is_well_formed_and_shows_the_real_byte_map():
    rep = report(Plan(hidden=7168, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096))
    svg = render_svg(rep)
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg"
    labels = texts(svg)
    # offsets of the FP8 dispatch record's field boundaries (token.hpp getters)
    for offset in ("7,168", "7,392", "7,456", "7,480"):
        assert offset in labels
    assert any("dispatch: 7,488 B per record" in t for t in labels)
    assert any("record end 7,488" in t for t in labels)
    # every field has a rectangle whose tooltip gives its exact byte range
    titles = [t.text for t in root.iter(NS + "title")]
    assert "topk_idx: bytes 7392..7440 (48 B)" in titles
    assert "src_token_global_idx: bytes 7480..7484 (4 B)" in titles
    # the slot grid of the dispatch receive buffer: last slot offset
    assert any(t.endswith(f"{(8 * 4096 - 1) * 7712:,}") for t in labels)


def test_svg_marks_fields_past_the_record():
    rep = report(Plan(hidden=7000, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096))
    labels = texts(render_svg(rep))
    assert any("fields end 4 B past the record" in t for t in labels)


def test_layout_svg_written_atomically(tmp_path, capsys):
    out = tmp_path / "map.svg"
    assert main(["layout", "--svg", str(out)]) == 0
    ET.parse(out)
    assert [p.name for p in tmp_path.iterdir()] == ["map.svg"]
    capsys.readouterr()


def test_layout_svg_bad_folder_is_one_line(tmp_path, capsys):
    code = main(["layout", "--svg", str(tmp_path / "missing" / "map.svg")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--svg:" in err and "does not exist" in err


def test_failed_write_leaves_previous_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.csv"
    write_text_atomic(target, "old\n")

    def boom(f):
        f.write("half a fi")
        raise RuntimeError("renderer failed")

    with pytest.raises(RuntimeError):
        write_atomic(target, boom)
    assert target.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]


def test_target_is_a_folder(tmp_path):
    with pytest.raises(OutputFileError, match="is a folder"):
        write_text_atomic(tmp_path, "x")


# --- issue 12: byte maps people can read ---------------------------------------------------
SVG_PLANS = {
    "ascend": Plan(hidden=7000, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096),
    "deepep-v2": Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=4096),
    "deepep-v1": Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=4096),
    "deepep-ll": Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=128),
}


def _text_boxes(svg: str):
    """(x0, x1, y, text) of every <text>, with the renderer's average glyph advance."""
    from epbuf.svg import _width

    boxes = []
    for t in ET.fromstring(svg).iter(NS + "text"):
        x, y, size = float(t.get("x")), float(t.get("y")), int(t.get("font-size"))
        w = _width(t.text or "", size)
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[t.get("text-anchor")]
        boxes.append((x0, x0 + w, y, t.text or ""))
    return boxes


@pytest.mark.parametrize("backend", list(SVG_PLANS))
def test_svg_text_fits_the_page_and_never_overlaps(backend):
    from epbuf.svg import WIDTH

    svg = render_svg(report(SVG_PLANS[backend], backend))
    boxes = _text_boxes(svg)
    assert all(x1 <= WIDTH + 1 for x0, x1, y, t in boxes if not t.startswith("record end")), \
        [t for x0, x1, y, t in boxes if x1 > WIDTH + 1]
    by_line: dict[float, list] = {}
    for box in boxes:
        by_line.setdefault(box[2], []).append(box)
    for line in by_line.values():
        line.sort()
        for (a0, a1, _, ta), (b0, b1, _, tb) in zip(line, line[1:]):
            assert a1 <= b0 + 0.5, f"{ta!r} overlaps {tb!r}"


@pytest.mark.parametrize("backend", list(SVG_PLANS))
def test_svg_legend_lists_only_fields_the_records_have(backend):
    rep = report(SVG_PLANS[backend], backend)
    fields = {f.name for r in rep.records for f in r.fields}
    root = ET.fromstring(render_svg(rep))
    legend = [t.text for t in root.iter(NS + "text")][-len(fields):]
    assert set(legend) == fields


def test_svg_zooms_the_low_latency_header():
    labels = texts(render_svg(report(SVG_PLANS["deepep-ll"], "deepep-ll")))
    assert any(t.startswith("zoom: bytes 0..") for t in labels)
    assert "src_idx" in labels


@pytest.mark.parametrize("backend", list(SVG_PLANS))
def test_svg_renders_to_a_non_blank_png(backend, tmp_path):
    try:
        import cairosvg
    except (ImportError, OSError) as error:  # cairosvg needs the system's libcairo
        pytest.skip(f"no SVG renderer here: {error}")
    png = tmp_path / "map.png"
    cairosvg.svg2png(bytestring=render_svg(report(SVG_PLANS[backend], backend)).encode(), write_to=str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
