"""What a page needs before it can draw anything (its model's data, enough checkpoints): the
page stops with a failure card and its fix when they are missing."""

from __future__ import annotations

import streamlit as st

from app import state
from app.components.choices import is_imported, seeds_of, zoo_row
from app.components.failures import Fix, show_error
from landscape.models.zoo import ZOO


def data_fix(name: str) -> Fix | None:
    """What repairs missing data of a zoo model or family: the Shakespeare text is fetched by
    the library; a family's files are imported again on the Models page; Fashion-MNIST comes
    from a system package, which the failure's own line names."""
    if name in ZOO and ZOO[name].dataset == "shakespeare":
        return Fix("Fetch Shakespeare (≈20 s)", run=state.fetch_shakespeare)
    if is_imported(name):
        return Fix("Import the family again on the Models page", page="models")
    return None


def need_data(name: str) -> None:
    """Stop the page with a failure card (and its fix) when the evaluation data of ``name``
    cannot be read here: every result on the page would fail the same way."""
    problem = state.data_problem(name)
    if problem is not None:
        show_error(f"The data of {name}", problem, data_fix(name), key="data")
        st.stop()


def need_seeds(name: str, n: int) -> list[int]:
    """The model's seeds, or stop the page with a failure card if too few: a link to the Models
    page, where seeds are trained and families imported; a family's missing files are named."""
    seeds = seeds_of(name)
    if len(seeds) < n:
        if is_imported(name):
            missing = (zoo_row(name) or {}).get("missing", [])
            gone = f" ({len(missing)} missing: {', '.join(missing[:3])})" if missing else ""
            line = (f"the imported family has {len(seeds)} member(s) on disk{gone}; this page "
                    f"needs at least {n}")  # fmt: skip
            fix = Fix("Import its checkpoints again on the Models page", page="models")
        else:
            line = f"{len(seeds)} trained seed(s); this page needs at least {n}"
            fix = Fix("Train more seeds on the Models page", page="models")
        show_error(f"Not enough checkpoints of {name}", line, fix, key="seeds")
        st.stop()
    return seeds
