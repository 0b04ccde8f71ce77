"""The shared sidebar: model family, device, CPU threads, presentation mode, cache status."""

from __future__ import annotations

import streamlit as st
import torch

from app import state
from app.components.figures import report_button
from app.components.text import literal
from app.memory import remember
from landscape.models.zoo import ZOO
from landscape.threads import cores


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


# The address bar mirrors every control (app/memory.py), and the browser adds a history entry for
# each new address Streamlit writes: Back would step through every control change before it left
# the page. A new address on the same page therefore replaces the current entry; a new page
# still adds one, so Back goes to the page before.
ONE_ENTRY_PER_PAGE = """<script>
(() => {
  if (window.landscapeOneEntryPerPage) return;
  window.landscapeOneEntryPerPage = true;
  const push = window.history.pushState.bind(window.history);
  window.history.pushState = (state, title, url) => {
    const next = url == null ? null : new URL(url, window.location.href);
    if (next !== null && next.pathname === window.location.pathname) {
      return window.history.replaceState(state, title, url);
    }
    return push(state, title, url);
  };
})();
</script>"""


def sidebar() -> None:
    """Widgets shared by every page; their values live in ``st.session_state``."""
    with st.sidebar:
        imported = [r["name"] for r in state.zoo_status() if r["imported"]]
        names = [*ZOO, *imported]  # a removed family falls back to the first
        remember("model", names[0], param="model", options=names, label="model")
        st.selectbox(
            "Model family",
            names,
            key="model",
            format_func=lambda n: n if n in ZOO else f"{n} (imported)",
            help="A zoo model, whose seeds are the checkpoints compared, or an imported family "
            "(Models page), whose members are.",
        )
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        st.selectbox("Device", devices, index=len(devices) - 1, key="device")
        n, default = cores(), state.default_threads()
        threads = st.select_slider(
            "CPU threads",
            sorted({1, 2, 4, n, default} & set(range(1, n + 1))),
            value=default,
            key="threads",
            help="Starts at the command line's automatic choice (`--threads auto`): the fewest "
            "threads that run work of this width fastest here, capped by the cores other "
            "processes leave free. Idle threads spin while other processes hold the cores.",
        )
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        remember("presentation", False, param="present", options=(False, True),
                 label="presentation mode")  # fmt: skip
        st.toggle(
            "Presentation mode",
            key="presentation",
            help="For a projector at 1920×1080: figures first and full width with doubled fonts "
            "and lines, larger text, controls and introductions folded away.",
        )
        # a projector's width goes to the figures: the sidebar folds away (its button brings
        # it back) and comes back when presentation mode is turned off
        presenting = bool(st.session_state.get("presentation"))
        st.set_page_config(initial_sidebar_state="collapsed" if presenting else "auto")
        if not presenting:  # a projector needs no exports
            report_button()
        st.html(ONE_ENTRY_PER_PAGE, unsafe_allow_javascript=True, width="content")
        info = state.cache_info()
        size = _human_bytes(info["bytes"])
        st.caption(f"Disk cache: {info['entries']} entries, {size}  \n{literal(info['root'])}")
