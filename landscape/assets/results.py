"""The shipped results in ``assets/results`` (read after the cache: :mod:`landscape.store.cache`):
the build that computes the standard views (:mod:`landscape.assets.views`) and ships their result
entries, results only, never weights, with ``index.json`` naming each request and the package's
list of file digests (only what it lists is served as shipped); the check that asks each request
again, served from the shipped entries alone; and the pruning of entries no request reaches."""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from landscape.assets.views import VIEWS, ask, describe, standard_views
from landscape.errors import LandscapeError
from landscape.models.zoo import ZOO
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

LOCK_NAME = ".build.lock"  # one build ships into a results folder at a time
# What the shipped results may take beside the checkpoints' budget
# (:data:`landscape.assets.checkpoints.ASSETS_BUDGET_MB`): results are small JSON entries (a
# barrier about 12 KB, a surface about 17 KB), and the pages open at once only where they ship.
RESULTS_BUDGET_MB = 2


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
    (default: each entry's first three trained, and its first two)."""
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
