"""Time to the first figure of every page for every transformer entry of the zoo, from an empty
cache, with the page's default choices (what a lecturer sees when opening a page).

Each (page, model) runs in a process of its own (the page through Streamlit's AppTest, one torch
thread, a fresh ``LANDSCAPE_CACHE``), under ``--timeout`` seconds; the time is the page's first
run, not the process start. Shipped results (``assets/results``) are read as a user's would be;
``--no-shipped`` turns them off for the baseline::

    python bench/bench_first_figure.py                      # with the shipped results
    python bench/bench_first_figure.py --no-shipped         # the same pages computing everything

``--browser`` times what a shared link costs instead: ``streamlit run app/main.py`` is started
with an empty cache, headless Chromium opens one tab (the server is then warm) and then every
page's address in a new tab (a new session), ``--repeats`` times; the time is from the
navigation to the first plotly figure drawn (to the page's title where the default view draws
none). ``--against DIR`` starts a second server from another checkout (e.g. a worktree of
main) and opens its pages alternately with this one's, so that both see the same load; the
ratio is this checkout's median over the other's::

    python bench/bench_first_figure.py --browser --repeats 5 --against ../base
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from landscape.assets.views import RESULT_MODELS as MODELS  # the entries whose default views ship
from landscape.assets.views import TABLE_MODELS  # those whose Table 2 cells ship

ROOT = Path(__file__).resolve().parents[1]
# "interpolation-both": the Interpolation page with the merge space "both" (weights and circuits);
# "interpolation-learned": with learned/orth added to the default methods (the paper's headline),
# timed on the entries whose Table 2 cells ship only (:data:`LEARNED`)
# (Surface computes on a click where no surface ships: its time is then to the page drawn)
PAGES = ("home", "interpolation", "interpolation-both", "interpolation-learned", "triangle",
         "surface", "eigenangles", "gauge", "atlas", "models")  # fmt: skip
LEARNED = ("interpolation-learned", TABLE_MODELS)

CHILD = """
import json, sys, time, torch
torch.set_num_threads(1)
from streamlit.testing.v1 import AppTest
page, model, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
at = AppTest.from_file("app/main.py", default_timeout=timeout)
view, _, variant = page.partition("-")
at.switch_page(f"views/{view}.py")
at.session_state["model"] = model
if variant == "learned":
    at.session_state["interp_combos"] = ["naive", "weight/perm", "weight/orth", "learned/orth"]
elif variant:
    at.session_state["interp_space"] = variant
t = time.perf_counter()
at.run()
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "figures": len(at.get("plotly_chart")),
                  "errors": [e.value for e in at.error][:2],
                  "exception": [str(e.value)[:200] for e in at.exception][:1]}))
"""


def one(page: str, model: str, timeout: float, shipped: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="landscape-first-") as d:
        env = {**os.environ, "LANDSCAPE_CACHE": d, "LANDSCAPE_THREADS": "1",
               "LANDSCAPE_SHIPPED_RESULTS": "1" if shipped else "0"}  # fmt: skip
        data = os.environ.get("LANDSCAPE_DATA") or str(Path.home() / ".cache/landscape/data")
        env["LANDSCAPE_DATA"] = data  # the fetched text, not a download per empty cache
        try:
            out = subprocess.run([sys.executable, "-c", CHILD, page, model, str(timeout)],
                                 cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=timeout + 60)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"seconds": None, "note": f"over {timeout:.0f} s"}
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
            note = f"over {timeout:.0f} s" if "timed out" in out.stderr else tail[:120]
            return {"seconds": None, "note": note}
        return json.loads(lines[-1])


# the browser mode's pages (url paths)
LINKS = ("home", "interpolation", "triangle", "ablation", "surface", "eigenangles", "atlas",
         "gauge", "models")  # fmt: skip
CHROMIUM = "/usr/bin/chromium"
# set in every new tab before the page's scripts: the time (ms since the navigation started)
# the page's title, then its first figure, appeared
WATCH = """
new MutationObserver((_, self) => {
  const t = performance.now();
  if (!window.__title && document.querySelector('[data-testid="stMainBlockContainer"] h1'))
    window.__title = t;
  if (!window.__figure && document.querySelector('[data-testid="stPlotlyChart"] .main-svg'))
    { window.__figure = t; self.disconnect(); }
}).observe(document, {childList: true, subtree: true});
"""


def _server(root: Path, cache: str, log):
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LANDSCAPE_CACHE": cache}
    env.setdefault("LANDSCAPE_DATA", str(Path.home() / ".cache/landscape/data"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"streamlit from {root} did not answer")


def _open(browser, url: str, path: str, figure: bool, timeout: float) -> float | None:
    """Seconds from navigating a new tab to ``url/path`` to its first figure (or title)."""
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.add_init_script(WATCH)
    page.goto(f"{url}/{path}", wait_until="commit")
    key = "__figure" if figure else "__title"
    try:
        page.wait_for_function(f"window.{key}", timeout=timeout * 1000)
        seconds = page.evaluate(f"window.{key}") / 1000
    except Exception:  # noqa: BLE001  (over the timeout: reported as missing)
        seconds = None
    context.close()
    return seconds


def browser_main(args) -> None:
    import signal
    import statistics

    from playwright.sync_api import sync_playwright

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # servers stopped on a timeout too

    roots = [ROOT] + ([Path(args.against).resolve()] if args.against else [])
    servers = []
    with tempfile.TemporaryDirectory(prefix="landscape-links-") as tmp:
        try:
            for i, root in enumerate(roots):
                cache = os.path.join(tmp, f"cache{i}")
                os.makedirs(cache)
                log = open(os.path.join(tmp, f"log{i}"), "w")  # noqa: SIM115
                servers.append(_server(root, cache, log))
            times = {(i, p): [] for i in range(len(roots)) for p in args.pages}
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--no-first-run"])  # fmt: skip
                for _, url in servers:  # a warm server: one tab has been served
                    _open(browser, url, "home", True, args.timeout)
                for _ in range(args.repeats):
                    for p in args.pages:
                        figure = p not in args.title_only
                        for i, (_, url) in enumerate(servers):
                            seconds = _open(browser, url, p + args.query, figure, args.timeout)
                            times[i, p].append(seconds)
                browser.close()
        finally:
            for proc, _ in servers:
                proc.terminate()
                proc.wait(20)

    def median(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    def fmt(x):
        return "–" if x is None else f"{x:.2f}"

    head = f"{'page':<15}{'this (s)':>10}" + (f"{'other (s)':>11}{'ratio':>8}" if args.against
                                              else "")  # fmt: skip
    print(f"median of {args.repeats} new tabs, navigation to the first figure (each tab's)")
    print(head)
    for p in args.pages:
        a = median(times[0, p])
        line = f"{p:<15}{fmt(a):>10}"
        if args.against:
            b = median(times[1, p])
            ratio = "–" if a is None or b is None else f"{a / b:.2f}"
            line += f"{fmt(b):>11}{ratio:>8}"
        runs = " | ".join(" ".join(fmt(x) for x in times[i, p]) for i in range(len(servers)))
        print(f"{line}   ({runs})", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", nargs="+", default=list(PAGES))
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--no-shipped", action="store_true")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--browser", action="store_true", help="time shared links in Chromium")
    p.add_argument("--against", help="(--browser) another checkout to time alternately")
    p.add_argument("--repeats", type=int, default=5, help="(--browser) new tabs per page")
    p.add_argument("--query", default="?present=1", help="(--browser) the links' query")
    p.add_argument(
        "--title-only",
        nargs="*",
        default=[],
        help="(--browser) pages timed to their title, for a page whose default view draws "
        "no figure (Surface's, where no surface of the entry ships, computes on a click)",
    )
    args = p.parse_args()
    if args.browser:
        if args.pages == list(PAGES):
            args.pages = list(LINKS)
        browser_main(args)
        return
    rows = []
    for model in args.models:
        for page in args.pages:
            if page == LEARNED[0] and model not in LEARNED[1]:
                continue
            r = {"page": page, "model": model, **one(page, model, args.timeout,
                                                     not args.no_shipped)}  # fmt: skip
            rows.append(r)
            s = "–" if r.get("seconds") is None else f"{r['seconds']:.1f} s"
            extra = r.get("note") or "; ".join(r.get("errors", []) + r.get("exception", []))
            print(f"{model:30} {page:21} {s:>9}  figures {r.get('figures', '–')}  {extra}",
                  flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
