"""The models a page offers and what is known of them: the zoo and imported families, their
checkpoints, data and symmetry audit, the sidebar's threads and the disk cache's size."""

from __future__ import annotations

import json
import os
from typing import Any

import streamlit as st

from landscape.assets.figures import home_curves_path
from landscape.device import resolve_device
from landscape.errors import LandscapeError
from landscape.models.zoo import ZOO, Checkpoint, data_identity, zoo_table
from landscape.progress import Progress
from landscape.sources import Source, family_data
from landscape.sources.zoo import available_seeds
from landscape.store.cache import Cache
from landscape.threads import AUTO, resolve_threads


@st.cache_data(ttl=5, show_spinner=False)
def zoo_status() -> list[dict[str, Any]]:
    """The zoo with every trained seed (shipped or cached) and its metrics, then the imported
    families (``imported: True``) with their members as seeds (no metrics: see
    :func:`family_metrics`)."""
    from landscape.store.families import families, member_rows

    rows = zoo_table()
    for r in rows:
        r["seeds"] = available_seeds(r["name"])
        r["imported"] = False
    for f in families():
        members = member_rows(f.name)
        rows.append({
            "name": f.name,
            "dataset": f.dataset,
            "architecture": f.architecture,
            "arch": f.arch,
            "parameters": f.parameters,
            "description": f"imported family of {len(f.members)} checkpoints",
            "seeds": [m for m in members if m["present"]],
            "missing": [m["path"] for m in members if not m["present"]],
            "imported": True,
        })  # fmt: skip
    return rows


def fetch_shakespeare() -> None:
    """Fetch the Shakespeare text into the data folder (the library's download, checked), for a
    page's repair button; looked up at the call, so that a test can stand in for it."""
    from landscape.data import datasets

    datasets.fetch_shakespeare()


@st.cache_data(ttl=30, max_entries=32, show_spinner=False)
def data_problem(name: str) -> str | None:
    """Why the evaluation data of a zoo model or imported family cannot be read here, in the
    library's one line; None when it can. A zoo model's files are only looked at (the Shakespeare
    text is read once); a family's data is read, as its every page needs it. Forgotten after a
    fix (:func:`clear_memory_caches`), and every 30 s, so data fetched from a terminal shows."""
    try:
        if name in ZOO:
            data_identity(ZOO[name])
        else:
            family_data(name)
    except LandscapeError as err:
        return str(err)
    except (OSError, ValueError) as err:  # a file that vanished or does not parse
        return f"{type(err).__name__}: {err}"
    return None


@st.cache_data(show_spinner=False)
def home_curves() -> dict[str, Any]:
    """The Home page's curves, shipped with the app (``python -m landscape.assets --home``): read
    once per server, no model loaded."""
    return json.loads(home_curves_path().read_text())


def compute_home_curves() -> None:
    """Compute the Home page's curves and write them where :func:`home_curves` reads them
    (``python -m landscape.assets --home``)."""
    from landscape.assets.figures import home_curves as write

    write(home_curves_path())


@st.cache_data(ttl=5, show_spinner=False)
def family_problems() -> list[str]:
    """Files in the families directory skipped as invalid (shown on the Models page)."""
    from landscape.store.families import family_problems

    return family_problems()


@st.cache_data(max_entries=16, show_spinner=False)
def family_metrics(name: str) -> list[dict[str, Any]]:
    """Members of a family with their test loss and accuracy (evaluated once, then on disk)."""
    from landscape.experiments import family_members

    return family_members(name)


@st.cache_resource(max_entries=64, show_spinner=False)
def checkpoint(model: str, seed: int | None) -> Checkpoint:
    return Source(model, seed).load(train_if_missing=False)  # never trains behind a page's back


@st.cache_data(max_entries=8, show_spinner=False)
def symmetry_audit(model: str, seed: int) -> list[dict[str, Any]]:
    """The measured symmetry table of one checkpoint (``landscape inspect --audit``)."""
    from landscape.symmetry import symmetry_table

    ckpt = checkpoint(model, seed)
    return symmetry_table(ckpt.cfg, ckpt.params)


@st.cache_resource(show_spinner=False)
def default_threads() -> int:
    """The sidebar's starting thread count, as the command line's default: ``$LANDSCAPE_THREADS``
    if set, else ``auto`` (once per server; the user's choice then lives in the session)."""
    return resolve_threads(os.environ.get("LANDSCAPE_THREADS", AUTO))


@st.cache_data(ttl=5, show_spinner=False)
def cache_info() -> dict[str, Any]:
    return Cache().info()


def clear_memory_caches() -> None:
    """Forget in-memory results (after training, importing or clearing the disk cache)."""
    st.cache_data.clear()
    checkpoint.clear()


def train_seed(model: str, seed: int, device: str | None,
               progress: Progress | None = None) -> tuple[Checkpoint, bool]:  # fmt: skip
    """Train seed ``seed`` of a zoo model under ``progress`` (``models.train.train``): the
    checkpoint, and whether it was already cached. The caller forgets the memo afterwards
    (:func:`clear_memory_caches`), so that every page sees the new seed."""
    from landscape.models.train import train

    return train(model, seed, device=resolve_device(device), progress=progress)


def import_family(name: str, paths: list[str], *, text: str | None, data: str | None, n_ctx: int,
                  max_windows: int, lr: float) -> Any:  # fmt: skip
    """Register checkpoints as a family (``sources.add_family``: each checked, its data read);
    the family's record."""
    from landscape.sources import DataSpec, add_family

    spec = DataSpec(text=text, data=data, n_ctx=n_ctx, max_windows=max_windows)
    return add_family(name, paths, spec, lr=lr)


def family_data_note(name: str) -> str:
    """What a family is evaluated on, in words (``sources.family_data_note``)."""
    from landscape.sources import family_data_note as note

    return note(name)


def remove_family(name: str) -> bool:
    """Forget a family; its checkpoints and cached results stay. True if it existed."""
    from landscape.store.families import remove_family as remove

    return remove(name)


def clear_disk_cache() -> int:
    """Delete every cached result and trained checkpoint (shipped ones stay); how many entries
    went."""
    return Cache().clear()
