"""Every Streamlit cache wrapper of the app lives here (STYLE 12).

Models go in ``st.cache_resource`` and are never mutated; results in ``st.cache_data``. The
library's disk cache sits underneath, so a restart or a second user sees results at once.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from landscape.cache import Cache
from landscape.train import available_seeds, get_checkpoint
from landscape.zoo import Checkpoint, zoo_table


@st.cache_data(ttl=5, show_spinner=False)
def zoo_status() -> list[dict[str, Any]]:
    """The zoo with every trained seed (shipped or cached) and its metrics."""
    rows = zoo_table()
    for r in rows:
        r["seeds"] = available_seeds(r["name"])
    return rows


@st.cache_resource(max_entries=64, show_spinner=False)
def checkpoint(model: str, seed: int | None) -> Checkpoint:
    return get_checkpoint(model, seed, train_if_missing=False)


@st.cache_data(ttl=5, show_spinner=False)
def cache_info() -> dict[str, Any]:
    return Cache().info()


def clear_memory_caches() -> None:
    zoo_status.clear()
    cache_info.clear()
