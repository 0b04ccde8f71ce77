"""What each page of the app shows before anyone touches a control: the one place its defaults
live. The pages (``app/views``) start their controls here, and the shipped results
(``landscape.assets``, ``python -m landscape.assets --results``) are computed for exactly these
requests, so a page opened with its defaults reads them instead of computing (docs/design.md
§4). Changing one here changes both; the shipped results then need rebuilding, which
``python -m landscape.assets --check-results`` says. Torch-free, like the names."""

from __future__ import annotations

# Interpolation and Triangle: the methods drawn (method/group), the split, the merge space
METHODS = ("naive", "weight/perm", "weight/orth")
SPLIT = "test"
SPACE = "weights"
INTERPOLATION_POINTS = 25  # points on λ
TRIANGLE_RESOLUTION = 10  # grid steps per edge
# Eigenangles: learned matching's correction drawn beside weight matching's rotation
EIGEN_LEARNED = True
# Gauge: random gauges per group, and the parts computed when the page opens (the others wait
# for a click); the character GPT's scramble takes minutes on a CPU, so it waits too
GAUGE_DRAWS = 2
GAUGE_ON_LOAD = ("table", "scramble", "claims")
GAUGE_ON_LOAD_BY_MODEL = {"gpt-shakespeare": ("table", "claims")}
# Atlas: the first seeds, gauge copies per seed, the group they are drawn from, the projection
ATLAS_SEEDS = 6
ATLAS_COPIES = 2
ATLAS_GROUP = "perm"
ATLAS_PROJECTION = "pca"
# Surface: around the first seed, along random filter-normalised directions drawn by seed 0,
# from −extent to extent on a grid of this many points per axis, on the split above
SURFACE_RESOLUTION = 21
SURFACE_EXTENT = 1.0
SURFACE_DIRECTIONS = "random"
SURFACE_DIRECTIONS_SEED = 0


def method_group(combo: str) -> tuple[str, str]:
    """``"weight/orth"`` → ``("weight", "orth")``; ``"naive"`` → ``("naive", "perm")``."""
    method, _, group = combo.partition("/")
    return method, group or "perm"


def gauge_on_load(model: str) -> tuple[str, ...]:
    """The Gauge page's parts computed on load for a zoo model."""
    return GAUGE_ON_LOAD_BY_MODEL.get(model, GAUGE_ON_LOAD)
