"""Seconds per page for the default view, cold (empty caches) then warm (disk + memory caches).

Each page is rendered with Streamlit's AppTest in this process, so the second pass also hits the
in-memory ``st.cache_data`` layer, as a second visit in the running app does. A third pass in a
fresh process would see only the disk cache; run the script twice with the same
``LANDSCAPE_CACHE`` to measure that. Prints numbers, asserts nothing.

    python bench/bench_app.py            # a fresh temporary cache: cold, then warm
    LANDSCAPE_CACHE=~/.cache/landscape python bench/bench_app.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
sys.path.insert(0, str(ROOT))


def render(page: str) -> tuple[float, int]:
    """Seconds for one render of ``page`` and how many figures it drew."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=600)
    at.switch_page(f"views/{page}.py")
    t0 = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"{page}: {at.exception[0].value}")
    return seconds, len(at.get("plotly_chart"))


def main() -> None:
    import logging

    import torch

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    if "LANDSCAPE_CACHE" not in os.environ:
        os.environ["LANDSCAPE_CACHE"] = tempfile.mkdtemp(prefix="landscape-bench-")
    from app.navigation import PAGE_SPECS

    pages = [file.removesuffix(".py") for file, *_ in PAGE_SPECS]
    print(f"cache: {os.environ['LANDSCAPE_CACHE']}")
    print(f"{'page':<16}{'first (s)':>12}{'second (s)':>12}{'figures':>9}")
    results = {p: [] for p in pages}
    for _ in range(2):
        for p in pages:
            results[p].append(render(p))
    for p in pages:
        (first, n), (second, _) = results[p]
        print(f"{p:<16}{first:>12.2f}{second:>12.2f}{n:>9}")


if __name__ == "__main__":
    main()
