"""Where Landscape keeps things on disk.

- cache: ``$LANDSCAPE_CACHE`` or ``~/.cache/landscape`` (results, trained checkpoints)
- data: ``$LANDSCAPE_DATA`` or ``<cache>/data`` (fetched data sets)
- assets: ``<repo>/assets`` (the shipped zoo), overridable by ``$LANDSCAPE_ASSETS``; its
  ``results/`` holds shipped cache entries (the zoo's standard views), read after the cache

A variable set to nothing (``LANDSCAPE_CACHE=``, often ``$UNSET_VARIABLE`` expanded) is refused
rather than read as unset: it names no folder, and the default is another one than was meant.
"""

from __future__ import annotations

import os
from pathlib import Path

from landscape.errors import LandscapeError


def folder_env(name: str) -> Path | None:
    """The folder ``$name`` names (``~`` expanded), None when it is unset; set but empty (or
    blank) is a one-line error."""
    env = os.environ.get(name)
    if env is None:
        return None
    if not env.strip():
        raise LandscapeError(f"{name} is set but empty: name a folder, or unset it for the "
                             "default")  # fmt: skip
    return Path(env).expanduser()


def cache_root() -> Path:
    return folder_env("LANDSCAPE_CACHE") or Path.home() / ".cache" / "landscape"


def data_root() -> Path:
    return folder_env("LANDSCAPE_DATA") or cache_root() / "data"


def assets_root() -> Path:
    return folder_env("LANDSCAPE_ASSETS") or Path(__file__).resolve().parents[2] / "assets"


def shipped_results_root() -> Path:
    """The shipped cache entries (``assets/results``), laid out as the cache is."""
    return assets_root() / "results"
