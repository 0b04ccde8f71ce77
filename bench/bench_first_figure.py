"""Time to the first figure of every page for every transformer entry of the zoo, from an empty
cache, with the page's default choices (what a lecturer sees when opening a page).

Each (page, model) runs in a process of its own (the page through Streamlit's AppTest, one torch
thread, a fresh ``LANDSCAPE_CACHE``), under ``--timeout`` seconds; the time is the page's first
run, not the process start. Shipped results (``assets/results``) are read as a user's would be;
``--no-shipped`` turns them off for the baseline::

    python bench/bench_first_figure.py                      # with the shipped results
    python bench/bench_first_figure.py --no-shipped         # the same pages computing everything
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from landscape.assets import RESULT_MODELS as MODELS  # the entries whose default views ship

ROOT = Path(__file__).resolve().parents[1]
# "interpolation-both": the Interpolation page with the merge space "both" (weights and circuits)
# (Surface computes on a click: its time is to the page drawn, with no figure)
PAGES = ("home", "interpolation", "interpolation-both", "triangle", "surface", "eigenangles",
         "gauge", "atlas", "models")  # fmt: skip

CHILD = """
import json, sys, time, torch
torch.set_num_threads(1)
from streamlit.testing.v1 import AppTest
page, model, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
at = AppTest.from_file("app/main.py", default_timeout=timeout)
view, _, space = page.partition("-")
at.switch_page(f"views/{view}.py")
at.session_state["model"] = model
if space:
    at.session_state["interp_space"] = space
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", nargs="+", default=list(PAGES))
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--no-shipped", action="store_true")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    rows = []
    for model in args.models:
        for page in args.pages:
            r = {"page": page, "model": model, **one(page, model, args.timeout,
                                                     not args.no_shipped)}  # fmt: skip
            rows.append(r)
            s = "–" if r.get("seconds") is None else f"{r['seconds']:.1f} s"
            extra = r.get("note") or "; ".join(r.get("errors", []) + r.get("exception", []))
            print(f"{model:30} {page:14} {s:>9}  figures {r.get('figures', '–')}  {extra}",
                  flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
