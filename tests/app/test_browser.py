"""The running app in a real browser: every page loads, draws its figures and raises nothing.

Starts ``streamlit run app/main.py`` on a free localhost port with an empty disk cache, drives
headless Chromium (``/usr/bin/chromium``) through Playwright, opens every page by its URL path,
waits for the plotly figures and saves a full-page screenshot of each (into the test's tmp dir,
and into ``$LANDSCAPE_SCREENSHOTS`` when set). ``$LANDSCAPE_BROWSER_CACHE`` names a disk cache to
use instead of an empty one (e.g. to screenshot a warm cache with more trained seeds).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# url path -> (plotly figures the default view draws at least, mlp-digits seeds it needs)
PAGES = {
    "": (1, 0),
    "interpolation": (1, 2),
    "triangle": (1, 3),
    "surface": (0, 1),  # computed on a click: the page opens with its controls
    "eigenangles": (2, 2),
    "atlas": (1, 2),
    "gauge": (3, 1),
    "models": (1, 1),
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer at {url} within {timeout} s")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    port = _free_port()
    cache = os.environ.get("LANDSCAPE_BROWSER_CACHE") or str(tmp_path_factory.mktemp("cache"))
    env = dict(os.environ, LANDSCAPE_CACHE=cache)
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"),
           "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]  # fmt: skip
    log = tmp_path_factory.mktemp("log") / "streamlit.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url, proc)
        yield url, cache
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _browser(pw):
    """Headless Chromium from /usr/bin and a laptop-sized page."""
    browser = pw.chromium.launch(
        executable_path=str(CHROMIUM),
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--no-first-run"],
    )  # fmt: skip
    return browser, browser.new_page(viewport={"width": 1440, "height": 1800})


def _settle(page) -> None:
    """Wait until the script has finished (the running indicator is gone), then let plotly
    finish its transitions."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=180_000
    )
    page.wait_for_timeout(800)


def test_every_page_draws_its_figures(app_url, tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    from landscape.sources.zoo import available_seeds

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    seeds = len(available_seeds("mlp-digits"))  # the sidebar's default model
    targets = [tmp_path]
    if os.environ.get("LANDSCAPE_SCREENSHOTS"):
        targets.append(Path(os.environ["LANDSCAPE_SCREENSHOTS"]))
        targets[-1].mkdir(parents=True, exist_ok=True)
    problems = []
    with sync_playwright() as pw:
        browser, page = _browser(pw)
        for path, (n_figures, n_seeds) in PAGES.items():
            if seeds < n_seeds:
                n_figures = 0  # the page shows how to train more seeds instead
            page.goto(f"{url}/{path}")
            figures = page.locator('[data-testid="stPlotlyChart"] .main-svg')
            page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
            page.wait_for_function(
                f"document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg')"
                f".length >= {n_figures}",
                timeout=180_000,
            )
            _settle(page)
            name = f"{path or 'home'}.png"
            page.screenshot(path=str(tmp_path / name), full_page=True)
            for t in targets[1:]:
                shutil.copy(tmp_path / name, t / name)
            if figures.count() < n_figures:
                problems.append(f"/{path}: {figures.count()} figures, expected {n_figures}")
            exceptions = page.locator('[data-testid="stException"]').count()
            if exceptions:
                problems.append(f"/{path}: {exceptions} exception(s) on the page")
            errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
            if errors:
                problems.append(f"/{path}: error messages {errors}")
        browser.close()
    assert not problems, problems
    for path in PAGES:
        assert (tmp_path / f"{path or 'home'}.png").stat().st_size > 10_000


def test_an_imported_family_is_picked_in_the_sidebar(app_url, tmp_path, monkeypatch):
    """Register two checkpoint directories as a family, pick it in the sidebar, see its curves."""
    from playwright.sync_api import sync_playwright

    from landscape.models.zoo import save_checkpoint_dir
    from landscape.sources import DataSpec, add_family
    from landscape.sources.zoo import available_seeds, get_checkpoint

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    if len(available_seeds("mlp-digits")) < 2:
        pytest.skip("needs two mlp-digits seeds")
    dirs = [save_checkpoint_dir(get_checkpoint("mlp-digits", s), tmp_path / f"tune-{s}")
            for s in (0, 1)]  # fmt: skip
    add_family("browser-family", dirs, DataSpec(data="digits"), replace=True)
    time.sleep(6)  # the app re-reads the model list every 5 s
    with sync_playwright() as pw:
        browser, page = _browser(pw)
        page.goto(f"{url}/interpolation")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
        page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        page.get_by_role("option", name="browser-family (imported)").click()
        page.wait_for_function(
            "document.body.innerText.includes('Barriers of browser-family')", timeout=120_000
        )
        _settle(page)
        shot = tmp_path / "interpolation-family.png"
        page.screenshot(path=str(shot), full_page=True)
        if os.environ.get("LANDSCAPE_SCREENSHOTS"):
            shutil.copy(shot, Path(os.environ["LANDSCAPE_SCREENSHOTS"]) / shot.name)
        text = page.locator('[data-testid="stMainBlockContainer"]').inner_text()
        figures = page.locator('[data-testid="stPlotlyChart"] .main-svg').count()
        errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
        browser.close()
    assert figures >= 1 and not errors, errors
    assert "tune-0" in text and "tune-1" in text  # members are labelled by their directories


def test_presentation_mode_puts_each_figure_above_the_fold(app_url, tmp_path, monkeypatch):
    """On a 1920×1080 projector every page opens with its first figure on the first screen,
    across the main column, the sidebar shows the page names whole, every table fits the
    screen and metrics are at display size."""
    from playwright.sync_api import sync_playwright

    from landscape.sources.zoo import available_seeds

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    seeds = len(available_seeds("mlp-digits"))
    problems = []
    with sync_playwright() as pw:
        browser, _ = _browser(pw)
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        for path, (n_figures, n_seeds) in PAGES.items():
            if seeds < n_seeds or not n_figures:
                continue  # the page asks for more seeds, or a click, instead of drawing
            page.goto(f"{url}/{path}?present=1")
            page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
            page.wait_for_function(
                "document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length",
                timeout=180_000,
            )
            _settle(page)
            name = f"{path or 'home'}-presentation.png"
            page.screenshot(path=str(tmp_path / name))
            if os.environ.get("LANDSCAPE_SCREENSHOTS"):
                shutil.copy(tmp_path / name, Path(os.environ["LANDSCAPE_SCREENSHOTS"]) / name)
            box = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
            column = page.locator('[data-testid="stMainBlockContainer"]').bounding_box()
            if not 0 <= box["y"] < 1080:
                problems.append(f"/{path}: the first figure starts at y = {box['y']:.0f}")
            # the triangles are drawn to a pixel box of their own (not stretched to the column)
            if path != "triangle" and box["width"] < 0.9 * (column["width"] - 80):
                problems.append(f"/{path}: the figure is {box['width']:.0f} px wide of "
                                f"{column['width']:.0f}")  # fmt: skip
            cut = page.evaluate(
                "Array.from(document.querySelectorAll("
                "'[data-testid=\"stSidebarNavLink\"] span[label] p'))"
                ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"
            )
            if cut:
                problems.append(f"/{path}: sidebar names cut: {cut}")
            wide = page.evaluate(
                'Array.from(document.querySelectorAll(\'[data-testid="stTable"], '
                '[data-testid="stDataFrame"]\')).filter(e => e.offsetParent !== null && '
                "(e.getBoundingClientRect().right > window.innerWidth + 1 || "
                "e.scrollWidth > e.clientWidth + 1)).map(e => e.innerText.slice(0, 40))"
            )
            if wide:
                problems.append(f"/{path}: tables wider than the screen: {wide}")
            small = page.evaluate(
                "Array.from(document.querySelectorAll('[data-testid=\"stMetricValue\"] p'))"
                ".filter(e => parseFloat(getComputedStyle(e).fontSize) < 40).length"
            )
            if small:
                problems.append(f"/{path}: {small} metric(s) at body size")
        browser.close()
    assert not problems, problems


def test_home_has_its_own_address_and_back_leaves_a_page(app_url, monkeypatch):
    """``/home`` is the Home page (not "page not found"), the root forwards there with its link,
    and a control changed on a page adds no history entry: Back goes to the page before."""
    from playwright.sync_api import expect, sync_playwright

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    with sync_playwright() as pw:
        browser, page = _browser(pw)
        page.goto(f"{url}/home")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
        _settle(page)
        found = "Page not found" not in page.locator("body").inner_text()
        title = page.locator('[data-testid="stMainBlockContainer"] h1').first.inner_text()
        page.goto(f"{url}/?present=1")
        page.wait_for_url("**/home?present=1", timeout=60_000)
        _settle(page)
        page.goto(f"{url}/home")
        _settle(page)
        page.locator('[data-testid="stSidebarNavLink"]', has_text="Models").click()
        page.wait_for_url("**/models*", timeout=60_000)
        _settle(page)
        entries = page.evaluate("history.length")
        toggle = page.locator('[data-testid="stSidebar"]').get_by_text("Presentation mode")
        for turn in range(3):  # each click writes or removes ?present=1: on, off, on
            if turn % 2:  # presentation mode folds the sidebar, maybe after the run has ended
                unfold = page.locator('[data-testid="stExpandSidebarButton"]')
                unfold.wait_for(state="visible", timeout=60_000)
                unfold.click()
            expect(toggle).to_be_in_viewport(timeout=60_000)  # the sidebar slides in
            toggle.click()
            _settle(page)
        added = page.evaluate("history.length") - entries
        page.go_back()
        _settle(page)
        back = page.url
        browser.close()
    assert found and title.startswith("Landscape")
    assert added == 0
    assert "/home" in back, back


def test_the_app_asks_no_other_host_for_anything(app_url, monkeypatch):
    """Offline seminars and privacy: loading pages (icons, fonts, scripts, figures) requests
    nothing from any host but the app's own."""
    from urllib.parse import urlparse

    from playwright.sync_api import sync_playwright

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    outside = []
    with sync_playwright() as pw:
        browser, page = _browser(pw)
        page.on("request", lambda r: outside.append(r.url) if urlparse(r.url).scheme
                in ("http", "https", "ws", "wss") and urlparse(r.url).hostname not in
                ("127.0.0.1", "localhost") else None)  # fmt: skip
        for path in ("home", "interpolation", "models"):
            page.goto(f"{url}/{path}")
            page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
            _settle(page)
        page.goto(f"{url}/home?present=1")
        _settle(page)
        browser.close()
    assert not outside, outside


# what the presentation test measures of a page: the sidebar, the first figure, its axis titles
# and the toolbar, in CSS pixels of the viewport; the legend entries scrolled out of their
# legend's box, and the tick labels tilted or outside their figure
_MEASURE = """() => {
  const box = e => { const b = e.getBoundingClientRect();
                     return {x: b.x, y: b.y, w: b.width, h: b.height}; };
  const inside = (e, o) => { const b = e.getBoundingClientRect(), c = o.getBoundingClientRect();
    return b.top >= c.top - 1 && b.bottom <= c.bottom + 1 && b.left >= c.left - 1
           && b.right <= c.right + 1; };
  const side = document.querySelector('[data-testid="stSidebar"]');
  const chart = document.querySelector('[data-testid="stPlotlyChart"]');
  const titles = chart ? [...chart.querySelectorAll('.g-xtitle text, .g-x2title text')]
    .map(e => ({text: e.textContent, ...box(e)})) : [];
  const hidden = chart ? [...chart.querySelectorAll('.legend')].flatMap(l =>
    [...l.querySelectorAll('.traces')].filter(t => !inside(t, l.querySelector('.bg')))
      .map(t => t.textContent)) : [];
  const over = (a, b) => { const p = a.getBoundingClientRect(), q = b.getBoundingClientRect();
    return p.left < q.right - 1 && q.left < p.right - 1 && p.top < q.bottom - 1
           && q.top < p.bottom - 1; };
  const plots = chart ? [...chart.querySelectorAll('.draglayer .nsewdrag')] : [];
  const legends = chart ? [...chart.querySelectorAll('.legend .bg')] : [];
  const covering = legends.filter(l => plots.some(p => over(l, p))).length;
  const off = legends.filter(l => !inside(l, chart)
    || l.getBoundingClientRect().bottom > innerHeight + 1).length;
  const ticks = chart ? [...chart.querySelectorAll('.xtick text, .ytick text')].filter(e =>
    !inside(e, chart) || /rotate\\([^0]/.test(e.getAttribute('transform') || ''))
    .map(e => e.textContent) : [];
  return {sidebar: side ? box(side) : null, figure: chart ? box(chart) : null, titles,
          ternary: chart ? [...chart.querySelectorAll('.ternary .bglayer')].map(box) : [],
          toolbar: document.querySelectorAll('.modebar-btn').length, hidden, ticks, covering,
          off};
}"""


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)], ids=["1280x720", "1920x1080"])
def test_presentation_mode_holds_on_a_projector(app_url, tmp_path, monkeypatch, size):
    """Presentation mode on a 1280×720 and a 1920×1080 projector: the sidebar folds away, the
    first figure is whole on the first screen, two axis titles never overlap, the triangles
    keep their size, no toolbar covers a title, every legend entry is in view (none scrolled
    away), no legend lies over a plot or runs off its figure or the screen, and every tick label
    is level and inside its figure (the Models page's names). The Atlas is measured with its
    default seeds and with twelve (its longest legend, where the zoo has them).
    Screenshots go to $LANDSCAPE_SCREENSHOTS when set."""
    from playwright.sync_api import sync_playwright

    from landscape.sources.zoo import available_seeds

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    width, height = size
    problems = []
    with sync_playwright() as pw:
        browser, _ = _browser(pw)
        page = browser.new_page(viewport={"width": width, "height": height})
        views = [(path, "") for path in ("interpolation", "triangle", "surface", "gauge",
                                         "atlas", "models")]  # fmt: skip
        if len(available_seeds("mlp-digits")) >= 12:
            views.append(("atlas", "&seeds=" + ",".join(map(str, range(12)))))
        for path, query in views:
            page.goto(f"{url}/{path}?present=1{query}" + ("&grid=5" if path == "surface" else ""))
            page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
            _settle(page)
            for button in ("Compute the surface", "Compute 1 part(s)"):  # a click's cost said
                compute = page.get_by_role("button", name=button)
                if compute.count():
                    compute.click()
                    _settle(page)
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=180_000)
            page.wait_for_timeout(1000)
            if query:
                path = f"{path}-12"  # its name in the screenshots and the problems
            name = f"{path}-presentation-{width}x{height}.png"
            page.screenshot(path=str(tmp_path / name))
            if os.environ.get("LANDSCAPE_SCREENSHOTS"):
                shutil.copy(tmp_path / name, Path(os.environ["LANDSCAPE_SCREENSHOTS"]) / name)
            m = page.evaluate(_MEASURE)
            side, fig = m["sidebar"], m["figure"]
            if side and side["x"] + side["w"] > 1:
                problems.append(f"/{path}: the sidebar takes {side['x'] + side['w']:.0f} px")
            if not 0 <= fig["y"] < height / 2:
                problems.append(f"/{path}: the first figure starts at y = {fig['y']:.0f}")
            if fig["y"] + fig["h"] > height + 1:
                problems.append(f"/{path}: the first figure ends at y = {fig['y'] + fig['h']:.0f}")
            if m["hidden"]:
                problems.append(f"/{path}: legend entries scrolled out of view: {m['hidden']}")
            if m["ticks"]:
                problems.append(f"/{path}: tick labels tilted or cut: {m['ticks']}")
            if m["covering"]:
                problems.append(f"/{path}: {m['covering']} legend(s) over a plot")
            if m["off"]:
                problems.append(f"/{path}: {m['off']} legend(s) off the figure or the screen")
            for a, b in zip(m["titles"], m["titles"][1:], strict=False):
                if (
                    a["x"] + a["w"] > b["x"]
                    and b["x"] + b["w"] > a["x"]
                    and abs(a["y"] - b["y"]) < a["h"]
                ):
                    problems.append(f"/{path}: axis titles overlap: {a['text']} / {b['text']}")
            for t in m["titles"]:
                if t["x"] < fig["x"] - 1 or t["x"] + t["w"] > fig["x"] + fig["w"] + 1:
                    problems.append(f"/{path}: the axis title {t['text']} runs off its figure")
            if any(t["w"] < 200 for t in m["ternary"]):
                problems.append(f"/{path}: triangles {[round(t['w']) for t in m['ternary']]} px")
            if m["toolbar"]:
                problems.append(f"/{path}: a toolbar over the figure")
        browser.close()
    assert not problems, problems


def test_every_model_name_and_every_seed_is_read_whole_on_a_laptop(app_url, monkeypatch):
    """At 1440 px wide (no presentation mode): the Models page's accuracy overview writes every
    model name level and inside the figure, and the Atlas shows every seed's legend entry
    without scrolling the legend."""
    from playwright.sync_api import sync_playwright

    from landscape.sources.zoo import available_seeds

    url, cache = app_url
    monkeypatch.setenv("LANDSCAPE_CACHE", cache)
    problems = []
    with sync_playwright() as pw:
        browser, page = _browser(pw)
        for path in ("models", "atlas"):
            if path == "atlas" and len(available_seeds("mlp-digits")) < 2:
                continue
            page.goto(f"{url}/{path}")
            page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=180_000)
            _settle(page)
            m = page.evaluate(_MEASURE)
            if m["hidden"]:
                problems.append(f"/{path}: legend entries scrolled out of view: {m['hidden']}")
            if m["ticks"]:
                problems.append(f"/{path}: tick labels tilted or cut: {m['ticks']}")
            if path == "models":
                names = page.evaluate(
                    "[...document.querySelector('[data-testid=\"stPlotlyChart\"]')"
                    ".querySelectorAll('.ytick text')].map(e => e.textContent)"
                )
                if "gpt-shakespeare-d128-drop0.3" not in names:
                    problems.append(f"/models: the names on the y axis are {names}")
        browser.close()
    assert not problems, problems
