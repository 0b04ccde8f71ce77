"""Landscape app entry: ``streamlit run app/main.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so `app` and an uninstalled `landscape` import from a checkout
    sys.path.insert(0, str(ROOT))

from app import memory  # noqa: E402
from app.navigation import pages  # noqa: E402
from app.sidebar import sidebar  # noqa: E402

st.set_page_config(page_title="Landscape", page_icon=":material/landscape:", layout="wide")

memory.keep()  # every page's controls outlive the runs that do not draw them
page = st.navigation(list(pages().values()))
sidebar()
try:
    page.run()
finally:
    memory.first_run_over()
memory.prune()  # reached when the page ran to its end (st.stop and st.rerun raise)
