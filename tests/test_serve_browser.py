"""``epbuf serve``'s page in a real browser: headless Chromium (Debian's ``chromium``,
which ``.ci/run`` installs) driven by Playwright for Python with that Chromium as its
executable. The page's totals must equal the CLI's ``--json``; a shared link must restore
the view; bad input must show the CLI's one line; a screenshot must show something.

Skipped, with the reason, only where Chromium is not installed.

``python docs/regen.py`` refreshes the documentation's screenshot (docs/images/serve.png) from
the same page.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse

import pytest

from epbuf.serve import make_server
from epbuf.units import format_bytes, format_int

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium "
                                                         "chromium-driver; .ci/run installs it)")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY = "body[data-state=ready]"

DEEPSEEK_V3_CONFIG = {"model_type": "deepseek_v3", "_name_or_path": "deepseek-ai/DeepSeek-V3", "hidden_size": 7168,
                      "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1}


def serving(**options):
    """Yield the page's URL while ``epbuf serve`` (``make_server(..., **options)``) runs in a
    thread on a free loopback port; a module's ``base_url`` fixture (this file's and the views')."""
    srv = make_server("127.0.0.1", 0, **options)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def launched_chromium():
    """Yield Debian's Chromium launched headless through Playwright (a module's ``browser``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def base_url():
    yield from serving()


@pytest.fixture(scope="module")
def browser():
    yield from launched_chromium()


@pytest.fixture
def page(browser):
    """A fresh page; fails the test on a script error or a Content-Security-Policy violation."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    tab.set_default_timeout(15000)
    yield tab
    context.close()
    assert problems == []


def cli(*argv: str) -> tuple[int, dict | None, str]:
    """``epbuf ARGV`` as a user runs it: the installed command, in its own process (the
    page may still be asking the server, in this process, for images while a test runs)."""
    run = subprocess.run(epbuf_command() + list(argv), capture_output=True, text=True, timeout=60)
    return run.returncode, (json.loads(run.stdout) if run.stdout.strip() else None), run.stderr


def epbuf_command() -> list[str]:
    script = shutil.which("epbuf", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [script] if script else [sys.executable, "-m", "epbuf"]


def open_view(page, base_url: str, query: str = "") -> None:
    page.goto(base_url + (f"?{query}" if query else ""))
    page.wait_for_selector(READY)


def settle(page) -> None:
    """Wait for the update the last input started (inputs mark the page busy at once)."""
    page.wait_for_selector(READY)


def shown_totals(page) -> dict:
    return {"bytes": page.inner_text("#total-bytes"), "human": page.inner_text("#total-human"),
            "share": page.inner_text("#share")}


def expected_totals(report: dict) -> dict:
    """What the page must show for a CLI report: format_int / format_bytes of its numbers."""
    device = report.get("device")
    share = (f"{device['share'] * 100:.2f} % of {device['name']} ({format_bytes(device['num_bytes'])})"
             if device else None)
    budget = report.get("budget")
    if budget:  # the page passes its budget to /api/hint, as `hint --budget` takes it
        of_budget = (f"{budget['share'] * 100:.2f} % of the budget ({format_bytes(budget['num_bytes'])})"
                     + ("" if budget["fits"] else ": over budget"))
        share = f"{share}; {of_budget}" if share else of_budget
    return {"bytes": f"{format_int(report['num_bytes'])} B", "human": format_bytes(report["num_bytes"]), "share": share}


def assert_totals(page, report: dict) -> None:
    shown, expected = shown_totals(page), expected_totals(report)
    if expected["share"] is None:
        shown.pop("share"), expected.pop("share")
    assert shown == expected


def test_page_totals_equal_the_cli_and_follow_the_inputs(page, base_url):
    open_view(page, base_url, "model=deepseek-v3&ranks=64&device=h200")
    _, report, _ = cli("hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--json")
    assert_totals(page, report)
    assert page.inner_text("#command") == "epbuf hint --model=deepseek-v3 --ranks=64 --device=h200"
    # Change inputs the way a person does.
    page.select_option("#backend", "deepep-v2")
    page.fill("#tokens", "1024")
    page.select_option("#dtype", "bf16")
    page.fill("#budget", "8GiB")
    settle(page)
    argv = ["--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--tokens", "1024", "--bf16"]
    _, report, _ = cli("hint", "--backend", "deepep-v2", *argv, "--budget", "8GiB", "--json")
    assert report["budget"]["num_bytes"] == 8 << 30
    assert_totals(page, report)
    # Findings, errors first, exactly the report's; the regions' bytes; the fit; the sweep's points.
    severities = page.eval_on_selector_all("#findings li", "items => items.map(i => i.className)")
    order = {"error": 0, "warning": 1, "info": 2}
    assert severities == sorted((f["severity"] for f in report["findings"]), key=order.get) or \
        (severities == ["ok"] and not report["findings"])
    cells = page.eval_on_selector_all("#regions tbody tr td:nth-child(2)", "cells => cells.map(c => c.textContent)")
    expected_cells = []
    for buffer in report["buffers"]:
        expected_cells += [format_int(buffer["num_bytes"])] + [format_int(r["num_bytes"]) for r in buffer["regions"]]
    assert cells == expected_cells
    fit_argv = [a for i, a in enumerate(argv) if "--tokens" not in argv[max(i - 1, 0):i + 1]]  # fit solves for it
    _, fit, _ = cli("fit", *fit_argv, "--budget", "8GiB", "--backends", "deepep-v2", "--json")
    assert page.inner_text("#fit-value") == format_int(fit["results"]["deepep-v2"]["value"])
    _, sweep, _ = cli("sweep", "--model", "deepseek-v3", "--ranks", "64", "--gpus-per-node", "8", "--device",
                      "h200", "--backends", "deepep-v2", "--tokens", "128:32768:*2", "--dtype", "bf16", "--json")
    assert page.locator("#chart circle.point").count() == len(sweep["rows"]) == 9
    titles = page.eval_on_selector_all("#chart circle.point title", "ts => ts.map(t => t.textContent)")
    column = sweep["columns"].index("num_bytes")
    assert [t.split(": ")[1].split(" B")[0] for t in titles] == [format_int(row[column]) for row in sweep["rows"]]
    # The state is in the link.
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
    assert query == {"model": "deepseek-v3", "ranks": "64", "device": "h200", "tokens": "1024", "bf16": "1",
                     "backend": "deepep-v2", "budget": "8GiB"}


def test_a_shared_link_restores_the_view(page, base_url):
    query = ("model=qwen3-235b-a22b&device=h100&backend=deepep-ll&ranks=32&tokens=256&bf16=1&budget=4GiB"
             "&redundant-experts=32&backend-version=ll3")
    open_view(page, base_url, query)
    fields = {key: page.input_value(f"#{key}") for key in ("model", "device", "backend", "ranks", "tokens", "budget",
                                                           "redundant-experts", "backend-version", "dtype")}
    assert fields == {"model": "qwen3-235b-a22b", "device": "h100", "backend": "deepep-ll", "ranks": "32",
                      "tokens": "256", "budget": "4GiB", "redundant-experts": "32", "backend-version": "ll3",
                      "dtype": "bf16"}
    _, report, _ = cli("hint", "--model", "qwen3-235b-a22b", "--device", "h100", "--backend", "deepep-ll",
                       "--ranks", "32", "--tokens", "256", "--bf16", "--redundant-experts", "32",
                       "--backend-version", "ll3", "--budget", "4GiB", "--json")
    assert_totals(page, report)
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query)) == dict(urllib.parse.parse_qsl(query))
    # Back to the same view in a second tab from the same link: the same figures.
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_selector(READY)
    assert shown_totals(other) == shown_totals(page)


def test_auto_backend_leaves_the_choice_to_the_server(page, base_url):
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/api/hint" in r.url else None)
    open_view(page, base_url, "model=deepseek-v3&ranks=64&device=h200")
    assert page.input_value("#backend") == ""
    [hint] = requests
    assert "backend" not in dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(hint).query))
    _, report, _ = cli("hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--json")
    assert page.inner_text("#backend-title").startswith(f"{report['title']} ({report['backend']})")
    assert "(auto)" in page.inner_text("#backend-title")


def test_without_a_budget_the_fit_is_the_clis_default_budget(page, base_url):
    """`fit --device` without --budget grants 10 % of the device (issue 12); the page asks
    /api/fit the same question, shows the CLI's note and command, and draws that budget."""
    open_view(page, base_url, "model=deepseek-v3&ranks=64&device=h200")
    _, fit, _ = cli("fit", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--backends", "deepep-v2",
                    "--json")
    assert page.inner_text("#fit-value") == format_int(fit["results"]["deepep-v2"]["value"])
    assert f"a budget of {format_bytes(fit['budget'])} ({fit['budget_note']})" in page.inner_text("#fit")
    assert page.inner_text("#fit-command") == ("epbuf fit --model=deepseek-v3 --ranks=64 --device=h200 "
                                               "--backends=deepep-v2")
    assert f"budget {format_bytes(fit['budget'])}" in page.inner_text("#chart")


def test_a_plan_over_the_budget_is_an_error_finding_on_the_page(page, base_url):
    open_view(page, base_url, "model=deepseek-v3&ranks=64&device=h200&budget=1GiB")
    _, report, _ = cli("hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--budget", "1GiB",
                       "--json")
    assert report["budget"]["fits"] is False
    assert_totals(page, report)
    assert page.inner_text("#share").endswith(": over budget")
    first = page.locator("#findings li").first
    assert first.get_attribute("class") == "error" and "[budget.exceeded]" in first.inner_text()


def test_bad_input_shows_the_clis_one_line_and_recovers(page, base_url):
    open_view(page, base_url, "model=deepseek-v3&ranks=0")
    code, _, err = cli("hint", "--model", "deepseek-v3", "--ranks", "0", "--json")
    assert code == 2
    assert page.inner_text("#error") == err.strip()
    assert "invalid" in page.get_attribute("#ranks", "class")
    assert "Traceback" not in page.content()
    page.fill("#ranks", "16")
    settle(page)
    assert page.is_hidden("#error")
    _, report, _ = cli("hint", "--model", "deepseek-v3", "--ranks", "16", "--json")
    assert_totals(page, report)


def test_a_pasted_config_json_gives_the_clis_numbers(page, base_url, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3_CONFIG))
    open_view(page, base_url, "ranks=32&device=h200&backend=deepep-v2")
    page.click("#paste summary")
    page.fill("#config-text", path.read_text())
    page.click("#config-use")
    page.wait_for_selector("#config-label:not([hidden])")
    settle(page)
    assert [page.input_value(f"#{k}") for k in ("hidden", "topk", "experts")] == ["7168", "8", "256"]
    assert page.inner_text("#config-label").endswith("deepseek-ai/DeepSeek-V3")
    _, report, _ = cli("hint", "--model-config", str(path), "--ranks", "32", "--device", "h200",
                       "--backend", "deepep-v2", "--json")
    assert_totals(page, report)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
    assert query["config"] == "deepseek-ai/DeepSeek-V3" and query["hidden"] == "7168"
    # A config the reader refuses: its one line, under the text box.
    page.fill("#config-text", '{"hidden_size": 2048}')
    page.click("#config-use")
    page.wait_for_selector("#config-status >> text=no routed expert count")


def test_screenshot_is_not_blank(page, base_url, tmp_path):
    from PIL import Image

    page.set_viewport_size({"width": 1400, "height": 1200})
    open_view(page, base_url, "model=deepseek-v3&ranks=64&device=h200&backend=deepep-v2&budget=8GiB")
    target = tmp_path / "serve.png"
    page.screenshot(path=str(target))
    image = Image.open(target).convert("RGB")
    assert image.size == (1400, 1200)
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, chart, meter: far from one flat colour
    background = max(colors)[1]
    box = page.locator("#chart svg").bounding_box()
    chart = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"])))
    drawn = sum(count for count, color in chart.getcolors(maxcolors=1 << 20) if color not in (background, (255, 255, 255)))
    assert drawn > 0.01 * box["width"] * box["height"]  # lines and labels are there
    refresh = os.environ.get("EPBUF_SCREENSHOT")
    if refresh:
        shutil.copyfile(target, refresh)


def test_the_pages_formatting_is_the_clis(page, base_url):
    """The page formats API numbers exactly as epbuf.units does (ties to even, like Python's
    format; integers beyond 2^53 stay exact)."""
    open_view(page, base_url, "ranks=16")
    values = [0, 1, 1023, 1024, 1536, 1207959552, 354418688, 2032140288, 5 * 2**18, 3 * 2**27, 2**53 + 1,
              2**62 + 2**40 * 5 // 8, 2**63 - 1, 10**18 + 7]
    shown = page.evaluate("vs => vs.map(v => [fmtBytes(BigInt(v)), fmtInt(BigInt(v))])", [str(v) for v in values])
    assert shown == [[format_bytes(v), format_int(v)] for v in values]
    shares = [0.0123456, 0.00125, 0.01125, 0.5, 1.7675, 0.0000001]
    assert page.evaluate("xs => xs.map(x => fixed2(x * 100))", shares) == [f"{x * 100:.2f}" for x in shares]
    exact = page.evaluate("t => parseJSON(t).n.toString()", '{"n": 9223372036854775807}')
    assert exact == "9223372036854775807"


def test_a_phone_width_page_neither_overflows_nor_shrinks_the_chart(page, base_url):
    """At 390 px (a phone) the form and cards stack, the page is no wider than the screen, and
    the chart and byte map keep a readable size inside their own sideways scroll."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_view(page, base_url, "model=deepseek-v3&ranks=64&device=h200&budget=8GiB")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    assert page.locator("#chart svg").bounding_box()["width"] >= 600
    form, summary = page.locator("#plan").bounding_box(), page.locator("#summary").bounding_box()
    assert summary["y"] >= form["y"] + form["height"]  # stacked, not squeezed side by side
    assert page.locator("#fit-value").is_visible() and page.locator("#total-human").is_visible()
