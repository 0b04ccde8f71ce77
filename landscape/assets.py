"""Build the shipped zoo checkpoints in ``assets/zoo`` (``python -m landscape.assets``).

Each checkpoint is trained through the same cached path as ``landscape train`` and written as
``<name>/seed<S>.safetensors``; ``manifest.json`` records how: configuration, training recipe,
data identity, seed, metrics, curves and the weight digest that ``landscape train`` is checked
against.

``--results`` computes the pages' default views of the zoo's transformer entries (the
Interpolation page's curves, the Triangle page's grids, the Eigenangles page's angles, the Gauge
page's parts computed on load, the Atlas's coordinates) and ships their cache entries in
``assets/results`` (read after the cache: :mod:`landscape.store.cache`), results only, never
weights, with ``index.json`` naming each request, and lists each entry's file digest in the
package (``landscape/store/shipped_results.json``: only what it lists is served as shipped);
``--check-results`` asks each request of the index again, served from the shipped entries alone,
and says which no longer are (a changed algorithm version, data or checkpoint) and which entries
the list does not serve.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from landscape import page_defaults as page
from landscape.device import CPU
from landscape.errors import LandscapeError
from landscape.models.train import TRAIN_VERSION, tqdm_progress, train
from landscape.models.zoo import ZOO
from landscape.page_defaults import method_group
from landscape.store.cache import (
    SHIPPED_DIGESTS,
    SHIPPED_KINDS,
    SUFFIX,
    Cache,
    NotCached,
    ReadOnlyCache,
    shipped_digest_list,
    shipped_digests,
    write_shipped_digests,
)
from landscape.store.files import replace_file
from landscape.store.paths import assets_root, shipped_results_root

DEFAULT_SEEDS = {"mlp-digits": range(12), "vit-digits": range(3), "gpt-shakespeare": range(3),
                 "vit-fashion": range(3), "vit-fashion-d256": range(3),
                 "vit-fashion-d128": range(3), "gpt-shakespeare-d128": range(3),
                 "gpt-shakespeare-d128-drop0.3": range(3),
                 "llama-shakespeare-d128": range(3)}  # fmt: skip

# What may ship in assets/ (checkpoints, manifest, README figure): the package stays a quick
# clone. The transformer entries for the barrier tables hold most of it; the paper-scale entries
# (ZooModel.ships False) are not in DEFAULT_SEEDS and never ship.
ASSETS_BUDGET_MB = 60


def build(plan: dict[str, Any], out: Path, device: torch.device = CPU) -> list[dict[str, Any]]:
    records = []
    manifest = out / "manifest.json"
    if manifest.is_file():  # keep the records of models not rebuilt this time
        old = json.loads(manifest.read_text())["checkpoints"]
        records.extend(r for r in old if r["name"] not in plan)
    for name, seeds in plan.items():
        model = ZOO[name]
        for seed in seeds:
            ckpt, _ = train(name, seed, device=device, progress=tqdm_progress(f"{name} {seed}"))
            rel = f"{name}/seed{seed}.safetensors"
            (out / name).mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in ckpt.params.items()}, out / rel)
            m = ckpt.meta
            extra = {"curves": m["curves"]}
            if "vocab" in m:
                extra["vocab"] = m["vocab"]
            records.append({
                "name": name, "seed": seed, "file": rel, "dataset": model.dataset,
                "config": model.config.to_dict(), "train": model.train.to_dict(),
                "data": m["data"], "metrics": m["metrics"], "digest": m["digest"],
                "seconds": m["seconds"], "device": m["device"], "train_version": TRAIN_VERSION,
                "kernels": m.get("kernels"), "extra": extra,
            })  # fmt: skip
            print(f"{name} seed {seed}: {m['metrics']}", flush=True)
    _write_manifest(manifest, records)
    return records


def _write_manifest(manifest: Path, records: list[dict[str, Any]]) -> None:
    records.sort(key=lambda r: (list(ZOO).index(r["name"]), r["seed"]))
    replace_file(manifest, lambda tmp: tmp.write_text(json.dumps({"checkpoints": records},
                                                                   indent=1)))  # fmt: skip


def verify(models: list[str], out: Path) -> list[dict[str, Any]]:
    """Retrain every shipped checkpoint of ``models`` in a fresh cache and record this
    machine's CPU kernels with each record whose weight digest it reproduces bit for bit, so
    ``landscape train`` promises bit-identical weights exactly where that has been seen."""
    manifest = out / "manifest.json"
    records = json.loads(manifest.read_text())["checkpoints"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(tmp)
        for rec in records:
            if rec["name"] not in models:
                continue
            ckpt, _ = train(rec["name"], rec["seed"], device=CPU, cache=cache)
            same = ckpt.meta["digest"] == rec["digest"]
            if same:
                rec["kernels"] = ckpt.meta["kernels"]
            rows.append({"name": rec["name"], "seed": rec["seed"], "same_digest": same})
            print(f"{rec['name']} seed {rec['seed']}: "
                  f"{'bit-identical' if same else 'differs'}", flush=True)  # fmt: skip
    _write_manifest(manifest, records)
    return rows


# The curves of the README figure and of the app's Home page: naive against aligned, (label,
# method, group), on the test split of mlp-digits.
LMC_SERIES = (("naive", "naive", "perm"),
              ("weight matching, permutations", "weight", "perm"),
              ("weight matching, rotations", "weight", "orth"),
              ("learned matching, rotations", "learned", "orth"))  # fmt: skip
# Home draws one pair on a λ grid of step 0.05, read from this file (no model is loaded there).
HOME_MODEL, HOME_SEEDS, HOME_POINTS = "mlp-digits", (0, 1), 21


def home_curves_path() -> Path:
    return assets_root() / "home" / f"lmc-{HOME_MODEL}.json"


def readme_figure(out: Path, pairs: int = 3) -> Path:
    """The README's figure: mlp-digits interpolation curves, naive against aligned (test split)."""
    from landscape.experiments import barrier, pairs_for
    from landscape.plots import figure_interpolation
    from landscape.plots.export import to_png

    series = []
    for label, method, group in LMC_SERIES:
        results = [barrier("mlp-digits", p, method, group) for p in pairs_for("mlp-digits", pairs)]
        series.append({"label": label, "results": results})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(to_png(figure_interpolation(series), scale=1.5))
    return out


def home_curves(out: Path) -> Path:
    """The app's Home page curves: the barrier result of every :data:`LMC_SERIES` for the shipped
    pair ``HOME_SEEDS`` of ``HOME_MODEL`` on ``HOME_POINTS`` values of λ (test split), as JSON, so
    that Home draws at once on any machine."""
    from landscape.experiments import barrier

    series = [{"label": label, "result": barrier(HOME_MODEL, HOME_SEEDS, method, group,
                                                 points=HOME_POINTS)}
              for label, method, group in LMC_SERIES]  # fmt: skip
    doc = {"model": HOME_MODEL, "seeds": list(HOME_SEEDS), "points": HOME_POINTS,
           "split": "test", "series": series}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


# ---------------------------------------------------------------- shipped results

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
VIEWS = ("interpolation", "triangle", "eigenangles", "gauge", "atlas")
# The Llama ablation's entries (``landscape ablation``) ship one entry × merge space at a time,
# as far as they are measured: their checkpoints train for hours and never ship, so this view is
# built only when asked (``--views ablation``), from the seeds trained on this machine.
ABLATION_VIEW = "ablation"
# The Interpolation page's curves ship in both merge spaces (Table 2's two columns), so that
# "both" opens at once too; circuits where the model has circuits (attention, no q/k norm).
VIEW_SPACES = ("weights", "circuits")
LOCK_NAME = ".build.lock"  # one build ships into a results folder at a time
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
    seed; the Atlas of the first six seeds; for an entry of the Llama ablation, its measurement
    in each merge space on ``ablation_seeds`` (default: the first three trained)."""
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
    if ABLATION_VIEW in views:
        out += _ablation_views(name, ablation_seeds)
    return out


def _ablation_views(name: str, seeds: tuple[int, ...] | None) -> list[dict[str, Any]]:
    from landscape.experiments.barriers import ablation as abl
    from landscape.experiments.barriers.tables import table_spaces
    from landscape.sources import available_seeds

    if name not in dict(abl.STEPS):
        return []
    if seeds is None:
        seeds = tuple(r["seed"] for r in available_seeds(name))[:3]
    if len(seeds) < 2:
        return []
    return [{"view": ABLATION_VIEW, "kind": "ablation", "model": name, "seeds": list(seeds),
             "space": space, "points": abl.POINTS, "split": page.SPLIT}
            for space in table_spaces(name, "both")]  # fmt: skip


def describe(request: dict[str, Any]) -> str:
    """One request of :func:`standard_views` in a few words (for the build's and check's lines)."""
    detail = {"barrier": lambda r: f"{r['method']}/{r['group']}"
                         + (f" {r['space']}" if r["space"] != page.SPACE else ""),
              "triangle": lambda r: f"{r['method']}/{r['group']}",
              "eigenangles": lambda r: f"seeds {r['seeds'][0]} {r['seeds'][1]}",
              "gauge-sweep": lambda r: r["part"],
              "atlas": lambda r: f"{r['group']} {r['projection']}",
              "ablation": lambda r: f"{r['space']} seeds {r['seeds']}",
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
    if kind == "ablation":
        from landscape.experiments.barriers.ablation import ablation_step

        return ablation_step(model, context=experiments.RunContext(cache=cache), **r)
    seeds, method, group = r.pop("seeds"), r.pop("method"), r.pop("group")
    if kind == "triangle":
        return experiments.triangle(model, seeds, method, group, experiments.TriangleOptions(**r),
                                    context=experiments.RunContext(cache=cache))  # fmt: skip
    return experiments.barrier(model, seeds, method, group, cache=cache, **r)


class _Recording(Cache):
    """A cache that remembers which entries of the shipped kinds were asked for: a request's
    own results, the ones a build ships (not the matchings they were computed from). ``reuse``:
    a results folder whose verified entries answer before anything is computed."""

    def __init__(self, root: Path, reuse: Path | None = None) -> None:
        super().__init__(root, shipped=reuse or False)
        self.read: list[tuple[str, str]] = []
        self.computed = 0  # entries of any kind computed, not read

    def source(self, kind: str, key: str) -> Path:
        """The file an entry read was served from: the work cache's, else the reused folder's."""
        own = self.path(kind, key)
        if own.is_file() or self.shipped is None:
            return own
        return self.shipped / kind / key[:2] / f"{key}{SUFFIX}"

    def get_or_compute(self, kind: str, inputs: dict[str, Any], compute: Any) -> Any:
        if kind in SHIPPED_KINDS:
            self.read.append((kind, self.key(kind, inputs)))
        entry, hit = super().get_or_compute(kind, inputs, compute)
        self.computed += not hit
        return entry, hit


def build_results(models: list[str], out: Path, views: tuple[str, ...] = VIEWS,
                  work: Path | None = None, reuse: Path | None = None,
                  digests: Path | None = None,
                  ablation_seeds: tuple[int, ...] | None = None,
                  ) -> list[dict[str, Any]]:  # fmt: skip
    """Compute the standard ``views`` of ``models`` in a cache of their own (``work``, kept so
    that an interrupted build resumes; default a temporary one) and ship the result entries the
    requests read in ``out``, refusing any that holds tensors (results only, never weights).
    ``reuse``: a results folder (say, ``out`` itself) whose entries, verified, answer a request
    before it is computed, so that adding a view does not compute the others again. The index
    rows and entries of other models and views are kept. A row's ``seconds`` is how long its
    request took to compute: in this build, or, where this build only read it (``work`` or
    ``reuse`` held it), as the index's earlier row for the same request says. ``digests``: the
    list of the shipped entries' file digests to rewrite last (the package's
    :data:`~landscape.store.cache.SHIPPED_DIGESTS` when ``out`` is the shipped results folder:
    only what it lists is served as shipped). ``ablation_seeds``: the seeds of the ablation view
    (default: each entry's first three trained)."""
    index_path = out / "index.json"
    built, read_only = [], set()
    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="landscape-results-"))
            )
        cache = _Recording(work, reuse)
        for name in models:
            for request in standard_views(name, views, ablation_seeds):
                if request["kind"] == "ablation" and not _stored(request, work, reuse):
                    print(f"{describe(request)}: not measured here, left out", flush=True)
                    continue
                t0, computed = time.perf_counter(), cache.computed
                ask(request, cache)
                built.append({**request, "seconds": round(time.perf_counter() - t0, 1)})
                if cache.computed == computed:
                    read_only.add(len(built) - 1)
                print(f"{describe(request)}: {built[-1]['seconds']} s", flush=True)
        # Shipping reads the index now, not when the build began, and holds the folder's lock:
        # a build of other models that shipped meanwhile keeps its rows and its entries.
        out.mkdir(parents=True, exist_ok=True)
        stack.enter_context(_locked(out))
        earlier = _index(out)
        index = [r for r in earlier if not (r["model"] in models and r["view"] in views)]
        took = {_request_id(r): r["seconds"] for r in earlier if "seconds" in r}
        index += [{**r, "seconds": took.get(_request_id(r), r["seconds"])} if i in read_only
                  else r for i, r in enumerate(built)]  # fmt: skip
        for kind, key in dict.fromkeys(cache.read):
            entry = cache.get(kind, key)
            if entry is None:
                raise LandscapeError(f"the {kind} entry {key} vanished from {work}")
            if entry.tensors:
                raise LandscapeError(f"a {kind} entry holds tensors; only results ship")
            target = out / kind / key[:2] / f"{key}{SUFFIX}"
            source = cache.source(kind, key)
            if source.resolve() == target.resolve():
                continue  # reused from ``out`` itself: already there
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        text = json.dumps(index, indent=1) + "\n"
        replace_file(index_path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        for path in prune_results(out):
            print(f"removed {path.relative_to(out)}: no request of the index reaches it",
                  flush=True)  # fmt: skip
        if digests is not None:
            listed = write_shipped_digests(out, digests)
            print(f"{digests}: {len(listed)} shipped result(s) listed", flush=True)
    return index


def _stored(request: dict[str, Any], work: Path, reuse: Path | None) -> bool:
    """Whether ``request`` is answered by the work cache or the reused folder without computing
    (the ablation's entries train for hours: a build ships them as measured, never measures)."""
    try:
        ask(request, ReadOnlyCache(work, shipped=reuse or False))
    except NotCached:
        return False
    return True


def unlisted_results(out: Path, digests: Path = SHIPPED_DIGESTS) -> list[str]:
    """The entries of the shipped results folder ``out`` that the package's digest list does not
    serve (edited or added after the build), and those it lists that are gone: one line each."""
    listed, found = shipped_digests(digests), shipped_digest_list(out)
    problems = [f"{k}: not listed in {digests.name}" for k in found if k not in listed]
    problems += [f"{k}: edited since the build (its digest is not the listed one)"
                 for k in found if k in listed and listed[k] != found[k]]  # fmt: skip
    problems += [f"{k}: listed but missing" for k in listed if k not in found]
    return problems


def _request_id(row: dict[str, Any]) -> str:
    """An index row's request, less its time: what identifies it across builds."""
    return json.dumps({k: v for k, v in row.items() if k != "seconds"}, sort_keys=True)


@contextlib.contextmanager
def _locked(out: Path) -> Any:
    """Hold ``out``'s build lock (``.build.lock``, not shipped) while the body runs."""
    with open(out / LOCK_NAME, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class _Serving(ReadOnlyCache):
    """An empty read-only cache over shipped entries that remembers the entries it served."""

    def __init__(self, root: Path, shipped: Path) -> None:
        super().__init__(root, shipped=shipped)
        self.read: set[tuple[str, str]] = set()

    def get_or_compute(self, kind: str, inputs: dict[str, Any], compute: Any) -> Any:
        self.read.add((kind, self.key(kind, inputs)))
        return super().get_or_compute(kind, inputs, compute)


def _index(out: Path) -> list[dict[str, Any]]:
    """The requests a shipped results folder was built for (its ``index.json``; none yet: [])."""
    index_path = out / "index.json"
    return json.loads(index_path.read_text()) if index_path.is_file() else []


def _serve(out: Path, requests: list[dict[str, Any]]
           ) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:  # fmt: skip
    """Every request asked as the pages ask it, through an empty cache over ``out``: the
    requests it no longer serves (each with why), and the entries it read."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="landscape-results-") as d:
        cache = _Serving(Path(d), out)
        for request in requests:
            try:
                ask(request, cache)
            except NotCached as e:
                stale.append({**request, "why": f"no shipped {e} entry for today's inputs"})
    return stale, cache.read


def data_here(model: str) -> bool:
    """Whether the data of zoo entry ``model`` are on this machine, so that a request's cache
    key can be formed (its data identity reads them); True for a name that is no zoo entry."""
    from landscape.models.zoo import data_identity

    if model not in ZOO:
        return True
    try:
        data_identity(ZOO[model])
    except LandscapeError:
        return False
    return True


def prune_results(out: Path) -> list[Path]:
    """Remove the shipped entries in ``out`` that no request of its index reaches (a request
    whose key changed leaves its old entry behind, which would ship for nothing); returns the
    paths removed. An unreached request is :func:`check_results`' to report. Where the data of
    some request are not on this machine, its key cannot be formed, so nothing is removed (its
    entries would look unreached)."""
    index = _index(out)
    for r in index:
        if not data_here(r["model"]):
            print(f"nothing pruned: the data of {r['model']} are not on this machine", flush=True)
            return []
    _, read = _serve(out, index)
    reached = {out / kind / key[:2] / f"{key}{SUFFIX}" for kind, key in read}
    removed = [p for p in sorted(out.rglob(f"*{SUFFIX}")) if p not in reached]
    for p in removed:
        p.unlink()
        with contextlib.suppress(OSError):  # its folder, when it held nothing else
            p.parent.rmdir()
    return removed


def check_results(out: Path, requests: list[dict[str, Any]] | None = None
                  ) -> list[dict[str, Any]]:  # fmt: skip
    """The requests (default: the index's) that the entries of ``out`` no longer serve, each
    with why."""
    return _serve(out, _index(out) if requests is None else requests)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_SEEDS))
    ap.add_argument("--out", type=Path, help="the folder built into (default assets/zoo; with "
                    "--results and --check-results, assets/results)")  # fmt: skip
    ap.add_argument("--readme", action="store_true", help="only redraw the README figure")
    ap.add_argument("--home", action="store_true", help="only recompute the app's Home curves")
    ap.add_argument(
        "--results",
        action="store_true",
        help="compute the pages' default views of the models (default: the zoo's "
        "transformer entries) and ship their results in assets/results",
    )
    ap.add_argument(
        "--views",
        nargs="+",
        choices=[*VIEWS, ABLATION_VIEW],
        default=list(VIEWS),
        help="with --results: the pages whose default views are built (ablation: the Llama "
        "ablation's entries as measured in the --work cache; never by default)",
    )
    ap.add_argument(
        "--ablation-seeds",
        type=int,
        nargs="+",
        help="with --views ablation: the seeds of every entry (default: its first three trained)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        help="with --results: the cache the views are computed in, kept (an "
        "interrupted build resumes); default a temporary one",
    )
    ap.add_argument(
        "--reuse",
        type=Path,
        nargs="?",
        const=True,
        help="with --results: answer requests from the verified entries of a results folder "
        "(default, with no folder named: the one built into) before computing them",
    )
    ap.add_argument(
        "--check-results",
        action="store_true",
        help="say which shipped results today's requests no longer reach",
    )
    ap.add_argument("--verify", action="store_true",
                    help="retrain the shipped checkpoints and record this machine's kernels "
                         "where the weights come out bit for bit")  # fmt: skip
    args = ap.parse_args()
    if args.readme:
        print(readme_figure(assets_root() / "readme" / "lmc.png"))
        return
    if args.home:
        print(home_curves(home_curves_path()))
        return
    if args.results:
        if args.models != list(DEFAULT_SEEDS):
            models = args.models
        elif args.views == [ABLATION_VIEW]:
            from landscape.experiments.barriers.ablation import STEPS

            models = [name for name, _ in STEPS]
        else:
            models = list(RESULT_MODELS)
        out = args.out or shipped_results_root()
        reuse = out if args.reuse is True else args.reuse
        # the package's digest list describes the shipped folder alone
        shipped = out.resolve() == shipped_results_root().resolve()
        seeds = tuple(args.ablation_seeds) if args.ablation_seeds else None
        build_results(models, out, tuple(args.views), args.work, reuse,
                      digests=SHIPPED_DIGESTS if shipped else None,
                      ablation_seeds=seeds)  # fmt: skip
        return
    if args.check_results:
        out = args.out or shipped_results_root()
        stale = check_results(out)
        for r in stale:
            print(f"{describe(r)}: {r['why']}")
        print(f"{len(stale)} shipped result(s) not reached")
        unlisted = unlisted_results(out) if out.resolve() == shipped_results_root().resolve() \
            else []
        for line in unlisted:
            print(line)
        if unlisted:
            print(f"{len(unlisted)} shipped result(s) not served as shipped: rebuild them "
                  "(--results --reuse)")  # fmt: skip
        raise SystemExit(1 if stale or unlisted else 0)
    if args.verify:
        verify(args.models, args.out or assets_root() / "zoo")
        return
    build({m: DEFAULT_SEEDS[m] for m in args.models}, args.out or assets_root() / "zoo")


if __name__ == "__main__":
    main()
