"""Landscape app entry: ``streamlit run app/main.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so `app` and an uninstalled `landscape` import from a checkout
    sys.path.insert(0, str(ROOT))

from app.navigation import pages  # noqa: E402
from app.sidebar import sidebar  # noqa: E402

st.set_page_config(page_title="Landscape", page_icon=":material/landscape:", layout="wide")

page = st.navigation(list(pages().values()))
sidebar()
page.run()
