"""Landscape app entry: ``streamlit run app/main.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so `app` and an uninstalled `landscape` import from a checkout
    sys.path.insert(0, str(ROOT))

from app import memory, state  # noqa: E402
from app.navigation import HOME, pages, root  # noqa: E402
from app.sidebar import sidebar  # noqa: E402

# An emoji favicon is drawn by the browser from a data: URL; a Material icon (":material/...:")
# would be fetched from a font host on every page load, and the app asks no host but its own.
PAGE_ICON = "⛰️"


def main() -> None:
    st.set_page_config(page_title="Landscape", page_icon=PAGE_ICON, layout="wide")
    memory.keep()  # every page's controls outlive the runs that do not draw them
    views = pages()
    page = st.navigation([root(), *views.values()])
    if page.url_path == "":  # the root: on to /home, with the link's values
        st.switch_page(views[HOME], query_params=st.query_params.to_dict())
    sidebar()
    state.on_page(page.title)  # its figures are reported under its title
    try:
        page.run()
    finally:
        memory.first_run_over()
    memory.prune()  # reached when the page ran to its end (st.stop and st.rerun raise)


# Streamlit runs this file as __main__; a process that imports it under another name (a worker
# spawned by a process whose main module it is, as under AppTest) runs no page
if __name__ == "__main__":
    main()
