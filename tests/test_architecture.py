"""The shape of the package: every module imports on its own, the import graph has no cycle
(lazy, function-level imports included), each command imports only what it needs, and a
command is one module plus one line of ``epbuf.cli.COMMANDS``."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import epbuf
from epbuf.cli import COMMANDS, build_parser

SRC = Path(epbuf.__file__).resolve().parent


def _modules() -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (path, is_package)}`` of every module of epbuf (``__main__`` modules excluded:
    importing them runs the command)."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


MODULES = _modules()


def _imports(name: str, path: Path, is_package: bool) -> set[str]:
    """epbuf modules that ``name`` imports anywhere in its text (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # epbuf.x.attribute -> epbuf.x
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_the_import_graph_has_no_cycle():
    """No module reaches itself through imports, lazy ones included (``engines/cli.py`` once
    took ``cli.py``'s helpers while ``cli.py`` imported it)."""
    graph = {name: _imports(name, *entry) for name, entry in MODULES.items()}
    assert "epbuf.cli._options" in graph["epbuf.cli.engine"]  # the walk sees function-level imports too
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def _import_alone(name: str) -> tuple[str, int, str]:
    done = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    return name, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def test_every_module_imports_alone_in_a_fresh_interpreter():
    """Each module imports first, in its own interpreter: no module relies on another having
    been imported before it (what an import cycle breaks)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_import_alone, sorted(MODULES)))
    failures = [f"{name}: {err}" for name, code, err in results if code != 0]
    assert failures == []
    assert len(results) == len(MODULES) > 40


def _loaded_by(argv: list[str]) -> set[str]:
    """The epbuf modules a fresh interpreter has loaded after running ``epbuf <argv>``."""
    probe = (
        "import sys, io, contextlib\n"
        "from epbuf.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('epbuf'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    return set(out.split(","))


@pytest.mark.parametrize("argv, expected", [
    (["hint"], {"epbuf.cli.hint", "epbuf.backends.ascend"}),
    (["hint", "--backend", "deepep-v2", "--json"], {"epbuf.cli.hint", "epbuf.backends.deepep_v2"}),
    (["models"], {"epbuf.cli.presets", "epbuf.models"}),
    (["engine", "mindspeed"], {"epbuf.cli.engine", "epbuf.engines.mindspeed", "epbuf.engines._hccl"}),
])
def test_a_command_imports_only_its_own_modules(argv, expected):
    loaded = _loaded_by(argv)
    assert expected <= loaded
    other_commands = {f"epbuf.cli.{m}" for m, _ in COMMANDS.values()} - {f"epbuf.cli.{COMMANDS[argv[0]][0]}"}
    assert loaded & other_commands == set()
    if argv[0] != "engine":
        assert not any(m.startswith("epbuf.engines") for m in loaded), loaded
    assert not {"epbuf.fit", "epbuf.sweep", "epbuf.svg", "epbuf.plot"} & loaded


@pytest.mark.parametrize("argv, used, unused", [
    (["hint"], {"epbuf.render.report", "epbuf.report"},
     {"epbuf.render.compare", "epbuf.render.sweep", "epbuf.render.engine", "epbuf.report.json_form", "epbuf.models"}),
    (["hint", "--json"], {"epbuf.report.json_form"}, {"epbuf.render"}),
    (["hint", "--model", "deepseek-v3"], {"epbuf.models.lookup", "epbuf.models.presets"},
     {"epbuf.models.config_json"}),
    (["sweep", "--ranks", "8,16"], {"epbuf.render.sweep"}, {"epbuf.render.report", "epbuf.render.compare"}),
])
def test_a_package_loads_only_the_modules_a_command_uses(argv, used, unused):
    """``epbuf.render``, ``epbuf.report`` and ``epbuf.models`` re-export their names lazily
    (``epbuf._lazy``): a command pays only for the renderer, records and lookups it uses."""
    loaded = _loaded_by(argv)
    assert used <= loaded
    assert loaded & unused == set()


def test_a_command_is_one_module_and_one_line():
    """Every registry line names a module with ``configure`` and a run function, and the full
    parser lists exactly the registry's commands."""
    import importlib

    sub = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)][0]
    assert list(sub.choices) == list(COMMANDS)
    for name, (module, help_text) in COMMANDS.items():
        mod = importlib.import_module(f"epbuf.cli.{module}")
        assert callable(mod.configure) and help_text
        assert callable(sub.choices[name].get_default("run"))
    # With a command first, only that command is registered (the others cost nothing).
    sub = [a for a in build_parser(["fit"])._actions if isinstance(a, argparse._SubParsersAction)][0]
    assert list(sub.choices) == ["fit"]


def test_modules_stay_a_few_hundred_lines():
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 100 and {"backends", "codec", "runtime"} <= {name.split("/")[0] for name in sizes}
    too_long = {name: n for name, n in sizes.items() if n > 400}
    assert too_long == {}


def test_python_m_epbuf_and_the_console_entry_point():
    from epbuf.cli import main

    assert callable(main)
    for argv in ([sys.executable, "-m", "epbuf", "versions"], [sys.executable, "-m", "epbuf.cli", "versions"]):
        done = subprocess.run(argv, capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.startswith("ascend"), done.stderr


ROOT = Path(__file__).resolve().parents[1]  # the checkout beside the tests: CI installs epbuf into site-packages


def _layout_block(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    section = text.split("## Layout of the code", 1)[1]
    return section.split("```", 2)[1]


def _words(layout: str) -> set[str]:
    for mark in "/,():;+":
        layout = layout.replace(mark, " " if mark != "/" else "/ ")
    return set(layout.split())


def test_the_layout_page_names_every_module():
    """The project's map, docs/background/layout.md "Layout of the code", names every module and
    package of epbuf, and every module of each package (``__init__``/``__main__`` aside), so it
    stays true to the tree."""
    words = _words(_layout_block(ROOT / "docs" / "background" / "layout.md"))
    missing = []
    for path in sorted(SRC.rglob("*.py")):
        if path.stem in ("__init__", "__main__"):
            continue
        if path.stem not in words and path.name not in words:
            missing.append(str(path.relative_to(SRC)))
    for init in sorted(SRC.rglob("__init__.py")):
        folder = init.parent
        if folder != SRC and folder.name + "/" not in words:
            missing.append(str(folder.relative_to(SRC)) + "/")
    assert missing == []


def test_the_readme_map_names_every_top_level_package_and_links_the_full_map():
    """README's short "Layout of the code" names each package directly under src/epbuf/ and points
    at the module-level map."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    words = _words(_layout_block(ROOT / "README.md"))
    packages = sorted(p.parent.name + "/" for p in SRC.glob("*/__init__.py"))
    assert [p for p in packages if p not in words] == []
    assert "docs/background/layout.md" in readme.split("## Layout of the code", 1)[1]
