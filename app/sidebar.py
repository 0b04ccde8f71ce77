"""The shared sidebar: model family, device, cache status, presentation mode."""

from __future__ import annotations

import streamlit as st
import torch

from app import state
from landscape.zoo import ZOO


def _human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def sidebar() -> None:
    with st.sidebar:
        st.selectbox(
            "Model family",
            list(ZOO),
            key="model",
            help="A zoo model; its seeds are the checkpoints compared.",
        )
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        st.selectbox("Device", devices, index=len(devices) - 1, key="device")
        st.toggle(
            "Presentation mode",
            key="presentation",
            help="Larger fonts, fewer controls: for seminars.",
        )
        info = state.cache_info()
        size = _human_bytes(info["bytes"])
        st.caption(f"Disk cache: {info['entries']} entries, {size}  \n`{info['root']}`")
