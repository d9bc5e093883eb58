"""The documentation site's structure, without building it (``mkdocs build --strict`` in ``.ci/run``
does that): the navigation reaches every page, the generated command reference names every option of
every parser, and README's links lead to files that exist."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s*-\s+(?:[^:\n]+:\s+)?([\w./-]+\.md)\s*$", nav, flags=re.MULTILINE)


def test_the_navigation_reaches_every_page_and_only_pages_that_exist():
    pages = _nav_pages()
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert len(pages) > 40 and len(set(pages)) == len(pages)
    assert sorted(set(on_disk) - set(pages)) == []       # a page the navigation does not reach
    assert sorted(set(pages) - set(on_disk)) == []       # a navigation entry without its page


def _reference_module():
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "hooks" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parsers(parser: argparse.ArgumentParser, prog: str):
    """Every parser the command line runs, ``epbuf engine NAME``'s own (built on use) included."""
    from epbuf.cli.engine import build_engine_parser

    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if prog == "epbuf engine":
                    sub = build_engine_parser(name)
                yield from _parsers(sub, f"{prog} {name}")


def test_the_command_reference_names_every_command_and_option():
    """The hook's page is generated from the parsers; this checks the generator misses nothing
    (a command, an engine, an option string, a group)."""
    from epbuf.cli import build_parser

    module = _reference_module()
    page = module.cli_reference()
    missing = []
    parsers = list(_parsers(build_parser(), "epbuf"))
    assert len(parsers) > 15  # the commands and the engines
    assert sum(len(p._actions) for prog, p in parsers if prog.startswith("epbuf engine ")) > 100
    for prog, parser in parsers:
        if f"## `{prog}`" not in page:
            missing.append(prog)
        for action in parser._actions:
            for option in action.option_strings:
                if f"`{option}" not in page and f", {option}" not in page:
                    missing.append(f"{prog} {option}")
    assert missing == []
    page_marker = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert module.MARKER in page_marker
    assert module.on_page_markdown(page_marker, None, None, None).count("## `epbuf ") >= len(parsers) - 1


def test_readme_links_lead_to_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert len(targets) > 10
    assert [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()] == []


def test_readme_stays_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_each_picture_is_made_by_the_command_its_page_shows():
    """docs/regen.py draws each plot with the command line a page shows next to it (so the picture
    and the example cannot tell different stories), into the file the page displays."""
    spec = importlib.util.spec_from_file_location("regen", DOCS / "regen.py")
    regen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regen)
    pages = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "guides").glob("*.md")}
    for argv, option, name, page in [(regen.SWEEP, "--plot", "sweep.png", "sweep-and-plot.md"),
                                     (regen.SIMULATE, "--plot", "simulate.png", "simulate.md"),
                                     (regen.LAYOUT, "--svg", "byte-map.svg", "size-a-deployment.md")]:
        assert f"$ epbuf {' '.join(argv)} {option} {name}\n" in pages[page], name
        assert f"](../images/{name})" in pages[page] and (DOCS / "images" / name).exists()
    assert set(regen.PICTURES) == {"sweep", "simulate", "byte-map", "serve"}
    assert "](../images/serve.png)" in pages["web-page.md"] and (DOCS / "images" / "serve.png").exists()


def test_docstrings_sessions_and_tables_become_code_blocks():
    """The API reference's hook (docs/hooks/doctest_blocks.py): a ``>>>`` session and an RST simple
    table become fenced blocks, roles become code spans, and fenced code is left alone."""
    markdown = __import__("pytest").importorskip("markdown", reason="the docs extra: python3 -m pip install '.[docs]'")
    spec = importlib.util.spec_from_file_location("doctest_blocks", DOCS / "hooks" / "doctest_blocks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = ["See :func:`report` and :class:`~epbuf.plan.Plan`.", "", ">>> f()", "[1843]", "",
             "====  ====", "a     b", "====  ====", "", "```", ">>> kept", "```"]
    out = module._DoctestFences(markdown.Markdown()).run(lines)
    assert out[0] == "See `report` and `epbuf.plan.Plan`."
    assert out[out.index(">>> f()") - 1] == "```pycon" and out[out.index("[1843]") + 1] == "```"
    assert out[out.index("====  ====") - 1] == "```text" and "a     b" in out
    assert out[-3:] == ["```", ">>> kept", "```"]
