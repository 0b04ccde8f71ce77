"""Where Landscape keeps things on disk.

- cache: ``$LANDSCAPE_CACHE`` or ``~/.cache/landscape`` (results, trained checkpoints)
- data: ``$LANDSCAPE_DATA`` or ``<cache>/data`` (fetched data sets)
- assets: ``<repo>/assets`` (the shipped zoo), overridable by ``$LANDSCAPE_ASSETS``; its
  ``results/`` holds shipped cache entries (the zoo's standard views), read after the cache
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("LANDSCAPE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "landscape"


def data_root() -> Path:
    env = os.environ.get("LANDSCAPE_DATA")
    return Path(env).expanduser() if env else cache_root() / "data"


def assets_root() -> Path:
    env = os.environ.get("LANDSCAPE_ASSETS")
    return Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "assets"


def shipped_results_root() -> Path:
    """The shipped cache entries (``assets/results``), laid out as the cache is."""
    return assets_root() / "results"
