"""The requests the pages make with their default choices, per zoo entry and page (a *view*):
what ``python -m landscape.assets --results`` computes and ships, and how one is asked through a
cache."""

from __future__ import annotations

from typing import Any

from landscape import page_defaults as page
from landscape.experiments.barriers.tables import DEFAULT_ROWS, TableOptions
from landscape.models.zoo import ZOO
from landscape.page_defaults import method_group
from landscape.store.cache import Cache

# the pages' default choices, read from the one place the pages read them
# (landscape/page_defaults.py); tests/app/test_app_shipped.py opens each page with its compute
# path failing
VIEW_METHODS = tuple(method_group(c) for c in page.METHODS)
VIEW_POINTS, VIEW_RESOLUTION = page.INTERPOLATION_POINTS, page.TRIANGLE_RESOLUTION
GAUGE_DRAWS = page.GAUGE_DRAWS
GAUGE_ON_LOAD = page.GAUGE_ON_LOAD  # the Gauge page's parts computed on load
GAUGE_SHORT = page.GAUGE_ON_LOAD_BY_MODEL  # models whose scramble waits for a click
ATLAS_SEEDS, ATLAS_COPIES = page.ATLAS_SEEDS, page.ATLAS_COPIES
ATLAS_GROUP, ATLAS_PROJECTION = page.ATLAS_GROUP, page.ATLAS_PROJECTION
SURFACE = {"resolution": page.SURFACE_RESOLUTION, "split": page.SPLIT,
           "directions": page.SURFACE_DIRECTIONS, "directions_seed": page.SURFACE_DIRECTIONS_SEED,
           "extent": page.SURFACE_EXTENT}  # fmt: skip
# the method a surface around one model is asked with (the page's; no alignment is made)
SURFACE_METHOD = ("weight", "orth")
VIEWS = ("interpolation", "triangle", "eigenangles", "gauge", "atlas", "surface")
# The Llama ablation's entries (``landscape ablation``) ship one entry × merge space at a time,
# as far as they are measured: their checkpoints train for hours and never ship, so this view is
# built only when asked (``--views ablation``), from the seeds trained on this machine.
ABLATION_VIEW = "ablation"
# The paper's Table 2 of the entries whose learned rows the README quotes: every row of
# ``landscape table`` (learned/perm and learned/orth included) in both merge spaces over its
# three pairs, each cell the barrier entry the table reads, so that ``landscape table MODEL
# --space both`` and the Interpolation page on those pairs and methods open at once. Its learned
# rows take hours an entry on a CPU, so this view too is built only when asked (``--views
# table``), from the shipped checkpoints.
TABLE_VIEW = "table"
TABLE_MODELS = ("vit-fashion-d128", "gpt-shakespeare-d128-drop0.3", "llama-shakespeare-d128")
TABLE_PAIRS = 3
TABLE_ROWS = DEFAULT_ROWS  # the table's own default rows (those that align the entry)
# The Interpolation page's curves ship in both merge spaces (Table 2's two columns), so that
# "both" opens at once too; circuits where the model has circuits (attention, no q/k norm).
VIEW_SPACES = ("weights", "circuits")
RESULT_MODELS = ("vit-digits", "vit-fashion", "vit-fashion-d128", "vit-fashion-d256",
                 "gpt-shakespeare", "gpt-shakespeare-d128", "gpt-shakespeare-d128-drop0.3",
                 "llama-shakespeare-d128")  # fmt: skip


def _spaces(name: str) -> tuple[str, ...]:
    """The merge spaces of :data:`VIEW_SPACES` that ``name`` has (circuits needs attention
    without a q/k norm)."""
    from landscape.models.circuits import has_circuits

    return VIEW_SPACES if has_circuits(ZOO[name].config) else (page.SPACE,)


def standard_views(name: str, views: tuple[str, ...] = VIEWS,
                   ablation_seeds: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    """The requests a page makes for ``name`` with its default choices: the first pair of the
    shipped seeds (Interpolation, Eigenangles with learned matching), the first three seeds
    (Triangle), the three default methods, the test split, the weights space (Interpolation:
    both spaces, :data:`VIEW_SPACES`); the Gauge page's parts computed on load for the first
    seed; the Atlas of the first six seeds; the Surface around the first seed (:data:`SURFACE`);
    for an entry of the Llama ablation, its measurement in each merge space on
    ``ablation_seeds`` (default: the first three trained, and the first two, the set the page
    falls back on); for an entry of :data:`TABLE_MODELS`,
    the cells of its Table 2 (:func:`_table_views`)."""
    from landscape.experiments.barriers.tables import pairs_for
    from landscape.sources.zoo import shipped_seeds

    seeds = shipped_seeds(name)
    out = []
    if "interpolation" in views and len(seeds) >= 2:
        pair = pairs_for(name, 1, seeds)[0]
        out += [{"view": "interpolation", "kind": "barrier", "model": name, "seeds": list(pair),
                 "method": m, "group": g, "points": VIEW_POINTS, "split": page.SPLIT,
                 "space": space} for space in _spaces(name)
                for m, g in VIEW_METHODS]  # fmt: skip
    if "triangle" in views and len(seeds) >= 3:
        out += [{"view": "triangle", "kind": "triangle", "model": name, "seeds": seeds[:3],
                 "method": m, "group": g, "resolution": VIEW_RESOLUTION, "split": page.SPLIT,
                 "space": page.SPACE, "joint": False} for m, g in VIEW_METHODS]  # fmt: skip
    if "eigenangles" in views and len(seeds) >= 2:
        out.append({"view": "eigenangles", "kind": "eigenangles", "model": name,
                    "seeds": seeds[:2], "learned": page.EIGEN_LEARNED})  # fmt: skip
    if "gauge" in views and seeds:
        out += [{"view": "gauge", "kind": "gauge-sweep", "model": name, "seed": seeds[0],
                 "part": part, "draws": GAUGE_DRAWS}
                for part in GAUGE_SHORT.get(name, GAUGE_ON_LOAD)]  # fmt: skip
    if "atlas" in views and len(seeds) >= 2:
        out.append({"view": "atlas", "kind": "atlas", "model": name,
                    "seeds": seeds[:ATLAS_SEEDS], "reference": seeds[0],
                    "copies": ATLAS_COPIES, "group": ATLAS_GROUP,
                    "projection": ATLAS_PROJECTION})  # fmt: skip
    if "surface" in views and seeds:
        out.append({"view": "surface", "kind": "surface", "model": name, "seeds": seeds[:1],
                    "method": SURFACE_METHOD[0], "group": SURFACE_METHOD[1], **SURFACE})
    if ABLATION_VIEW in views:
        out += _ablation_views(name, ablation_seeds)
    if TABLE_VIEW in views:
        out += _table_views(name)
    return out


def _table_views(name: str) -> list[dict[str, Any]]:
    """The cells of ``landscape table name --space both`` (its default rows that align the
    model, :data:`TABLE_PAIRS` pairs), each a barrier request, for an entry of
    :data:`TABLE_MODELS`."""
    from landscape.experiments.barriers.tables import fitting_rows, pairs_for, table_spaces

    if name not in TABLE_MODELS:
        return []
    o = TableOptions()
    pairs = pairs_for(name, TABLE_PAIRS)
    rows, _ = fitting_rows(name, TABLE_ROWS, pairs[0][0])
    return [{"view": TABLE_VIEW, "kind": "barrier", "model": name, "seeds": list(pair),
             "method": m, "group": g, "points": o.points, "split": o.split, "space": space}
            for m, g in rows for space in table_spaces(name, "both")
            for pair in pairs]  # fmt: skip


def _ablation_views(name: str, seeds: tuple[int, ...] | None) -> list[dict[str, Any]]:
    from landscape.experiments.barriers import ablation as abl
    from landscape.experiments.barriers.tables import table_spaces
    from landscape.sources import available_seeds

    if name not in dict(abl.STEPS):
        return []
    if seeds is None:  # the three the page looks for first, and the pair it falls back on
        trained = tuple(r["seed"] for r in available_seeds(name))
        sets = list(dict.fromkeys(s for s in (trained[:3], trained[:2]) if len(s) >= 2))
    else:
        sets = [tuple(seeds)] if len(seeds) >= 2 else []
    return [{"view": ABLATION_VIEW, "kind": "ablation", "model": name, "seeds": list(s),
             "space": space, "points": abl.POINTS, "split": page.SPLIT}
            for s in sets for space in table_spaces(name, "both")]  # fmt: skip


def describe(request: dict[str, Any]) -> str:
    """One request of :func:`standard_views` in a few words (for the build's and check's lines)."""
    detail = {"barrier": lambda r: f"{r['method']}/{r['group']}"
                         + (f" {r['space']}" if r["space"] != page.SPACE else "")
                         + (f" seeds {r['seeds'][0]} {r['seeds'][1]}"
                            if r["view"] == TABLE_VIEW else ""),
              "triangle": lambda r: f"{r['method']}/{r['group']}",
              "eigenangles": lambda r: f"seeds {r['seeds'][0]} {r['seeds'][1]}",
              "gauge-sweep": lambda r: r["part"],
              "atlas": lambda r: f"{r['group']} {r['projection']}",
              "ablation": lambda r: f"{r['space']} seeds {r['seeds']}",
              "surface": lambda r: f"seed {r['seeds'][0]} {r['resolution']}×{r['resolution']}",
              }[request["kind"]]  # fmt: skip
    return f"{request['model']} {request['view']} {detail(request)}"


def ask(request: dict[str, Any], cache: Cache) -> dict[str, Any]:
    """One request of :func:`standard_views`, through ``cache``."""
    from landscape import experiments
    from landscape.experiments.atlas import AtlasOptions, atlas
    from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep

    r = {k: v for k, v in request.items() if k not in ("view", "kind", "seconds")}
    kind, model = request["kind"], r.pop("model")
    if kind == "eigenangles":
        return experiments.eigenangle_view(model, r["seeds"], learned=r["learned"], cache=cache)
    if kind == "gauge-sweep":
        part = r["part"]
        return gauge_sweep(model, r["seed"], GaugeOptions(draws=r["draws"], parts=(part,)),
                           context=experiments.RunContext(cache=cache))[part]  # fmt: skip
    if kind == "atlas":
        return atlas(model, r.pop("seeds"), AtlasOptions(**r),
                     context=experiments.RunContext(cache=cache))
    if kind == "surface":
        from landscape.experiments.surfaces import SurfaceOptions, surface

        seeds, method, group = r.pop("seeds"), r.pop("method"), r.pop("group")
        return surface(model, seeds, method, group, SurfaceOptions(**r),
                       context=experiments.RunContext(cache=cache))  # fmt: skip
    if kind == "ablation":
        from landscape.experiments.barriers.ablation import ablation_step

        return ablation_step(model, context=experiments.RunContext(cache=cache), **r)
    seeds, method, group = r.pop("seeds"), r.pop("method"), r.pop("group")
    if kind == "triangle":
        return experiments.triangle(model, seeds, method, group, experiments.TriangleOptions(**r),
                                    context=experiments.RunContext(cache=cache))  # fmt: skip
    return experiments.barrier(model, seeds, method, group, cache=cache, **r)
