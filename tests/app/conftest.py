"""What every app test shares: a cache of its own, so no page reads or writes the user's, and
empty memos, so no page is served a result another test's cache held."""

import pytest
import streamlit as st


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    st.cache_data.clear()
    st.cache_resource.clear()
