"""Regenerate every picture of the documentation from the real tool, into docs/images/.

    python docs/regen.py              # all of them
    python docs/regen.py sweep serve  # some of them (names below)

* ``serve.png``: ``epbuf serve``'s page in headless Chromium (Debian's
  ``chromium``, driven by Playwright for Python with that browser as its executable, as
  ``tests/test_serve_browser.py`` does; no browser is downloaded);
* ``sweep.png``: ``epbuf sweep ... --plot`` (matplotlib);
* ``simulate.png``: ``epbuf simulate ... --plot`` (numpy, matplotlib);
* ``byte-map.svg``: ``epbuf layout ... --svg``.

Each picture is written to a temporary name and renamed, so a failure leaves the old one. Needs the
``test`` extra (``python3 -m pip install '.[test]'``) and, for the screenshots, ``apt-get install
chromium``. Look at the results before committing them.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

IMAGES = Path(__file__).resolve().parent / "images"

# The command lines the pages show next to each picture (the guides name them).
SWEEP = ["sweep", "--model", "deepseek-v3", "--ranks", "8,16,32", "--tokens", "64:8192:*2",
         "--backends", "deepep-v2,deepep-ll,uccl-ll,pplx", "--device", "h200", "--quiet"]
SIMULATE = ["simulate", "--model", "deepseek-v3", "--ranks", "64", "--gpus-per-node", "8", "--tokens", "4096",
            "--routing", "group:8:4", "--seed", "0", "--backend", "deepep-v2", "--device", "h800"]
LAYOUT = ["layout", "--backend", "deepep-v2", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "256"]
SERVE_VIEWS = {
    "serve.png": "model=deepseek-v3&ranks=64&device=h200&backend=deepep-v2&budget=8GiB",
}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _cli(argv: list[str], output_option: str, target: Path) -> None:
    """Run ``epbuf ARGV OUTPUT_OPTION tmp`` in-process, then move the file into place."""
    import contextlib
    import io

    from epbuf.cli import main

    tmp = target.with_name(f".{target.stem}.tmp{target.suffix}")
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv + [output_option, str(tmp)])
    if code != 0 or not tmp.exists():
        raise SystemExit(f"epbuf {' '.join(argv)} {output_option} {tmp}: exit status {code}")
    os.replace(tmp, target)


def sweep() -> list[Path]:
    target = IMAGES / "sweep.png"
    _cli(SWEEP, "--plot", target)
    return [target]


def simulate() -> list[Path]:
    target = IMAGES / "simulate.png"
    _cli(SIMULATE, "--plot", target)
    return [target]


def byte_map() -> list[Path]:
    target = IMAGES / "byte-map.svg"
    _cli(LAYOUT, "--svg", target)
    return [target]


def serve() -> list[Path]:
    from playwright.sync_api import sync_playwright

    from epbuf.serve import make_server

    chromium = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if chromium is None:
        raise SystemExit("the screenshots need Chromium: apt-get install chromium")
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    written = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            page.set_default_timeout(30000)
            for name, query in SERVE_VIEWS.items():
                page.goto(f"{base}?{query}")
                page.wait_for_selector("body[data-state=ready]")
                target = IMAGES / name
                tmp = target.with_name(f".{target.stem}.tmp{target.suffix}")
                page.screenshot(path=str(tmp))
                os.replace(tmp, target)
                written.append(target)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return written


PICTURES = {"sweep": sweep, "simulate": simulate, "byte-map": byte_map, "serve": serve}


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in PICTURES]
    if unknown:
        print(f"regen.py: unknown picture(s) {', '.join(unknown)}; choose from {', '.join(PICTURES)}", file=sys.stderr)
        return 2
    IMAGES.mkdir(exist_ok=True)
    for name in names or list(PICTURES):
        for path in PICTURES[name]():
            print(f"wrote {path.relative_to(IMAGES.parent.parent)} ({path.stat().st_size:,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
