"""Shipped results: cache entries in assets/results, read after the cache, keyed alike, never
written or removed; the build and the check of python -m landscape.assets --results."""

from __future__ import annotations

import json

import pytest
import torch

from landscape.assets import results as assets
from landscape.assets import views as asset_views
from landscape.sources.zoo import available_seeds
from landscape.store.cache import Cache
from landscape.store.paths import shipped_results_root


def _entry(root, kind="barrier", inputs=None, value=1.5):
    c = Cache(root, shipped=False)
    key = c.key(kind, inputs or {"x": 1})
    c.put(kind, key, {}, {"value": value})
    return c.path(kind, key), key


def test_a_shipped_entry_is_served_after_the_cache(tmp_path):
    shipped, _ = _entry(tmp_path / "shipped")
    cache = Cache(tmp_path / "cache", shipped=tmp_path / "shipped")
    entry, hit = cache.get_or_compute("barrier", {"x": 1}, lambda: pytest.fail("computed"))
    assert hit and entry.meta == {"value": 1.5}
    # the cache's own entry comes first
    own, _ = _entry(tmp_path / "cache", value=2.0)
    assert cache.get_or_compute("barrier", {"x": 1}, lambda: None)[0].meta == {"value": 2.0}
    # clearing the cache leaves the shipped entry alone
    cache.clear()
    assert shipped.is_file() and not own.exists()
    assert cache.get_or_compute("barrier", {"x": 1}, lambda: None)[0].meta == {"value": 1.5}


def test_only_result_kinds_are_shipped_and_other_inputs_miss(tmp_path):
    _entry(tmp_path / "shipped", kind="matching")
    _entry(tmp_path / "shipped", kind="barrier", inputs={"x": 1})
    cache = Cache(tmp_path / "cache", shipped=tmp_path / "shipped")
    assert cache.get("matching", cache.key("matching", {"x": 1})) is None
    assert cache.get("barrier", cache.key("barrier", {"x": 2})) is None


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_shipped_entry_is_a_miss_and_stays(tmp_path, damage):
    shipped, key = _entry(tmp_path / "shipped")
    data = bytearray(shipped.read_bytes())
    if damage == "flip":
        data[-3] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    shipped.write_bytes(bytes(data))
    cache = Cache(tmp_path / "cache", shipped=tmp_path / "shipped")
    assert cache.get("barrier", key) is None
    assert shipped.read_bytes() == bytes(data)  # never removed nor rewritten
    entry, hit = cache.get_or_compute("barrier", {"x": 1}, lambda: ({}, {"value": 3.0}))
    assert not hit and entry.meta == {"value": 3.0}
    assert shipped.read_bytes() == bytes(data) and cache.path("barrier", key).is_file()


def test_the_environment_turns_shipped_results_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_SHIPPED_RESULTS", "0")
    assert Cache(tmp_path).shipped is None
    monkeypatch.setenv("LANDSCAPE_SHIPPED_RESULTS", "1")
    assert Cache(tmp_path).shipped == shipped_results_root()


def test_built_results_serve_the_page_request_without_computing(tmp_path, monkeypatch):
    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")
    out = tmp_path / "results"
    monkeypatch.setattr(asset_views, "VIEW_METHODS", (("weight", "perm"),))
    index = assets.build_results(["mlp-digits"], out, ("interpolation", "triangle"))
    assert [(r["view"], r["kind"]) for r in index] == [("interpolation", "barrier"),
                                                        ("triangle", "triangle")]  # fmt: skip
    assert assets.check_results(out) == []
    # an empty cache over the shipped entries: the requests are served, no matching runs
    from landscape.experiments.barriers import alignment, pipeline

    for module in (alignment, pipeline):  # align's matching, and the pipeline's unstored one
        monkeypatch.setattr(module, "_match", lambda *a, **k: pytest.fail("matched"))
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "empty"))
    cache = Cache(shipped=out)
    for request in index:
        r = assets.ask(request, cache)
        assert r["cached"] and r["function_check"] < 1e-4
    # a request the shipped entries were not made for is reported, with why
    stale = [{**index[0], "points": index[0]["points"] + 2}]
    (out / "index.json").write_text(json.dumps(stale))
    found = assets.check_results(out)
    assert len(found) == 1 and "no shipped barrier entry" in found[0]["why"]


def test_the_table_view_ships_the_cells_landscape_table_reads(tmp_path, monkeypatch):
    """A Table 2 built as the table view is served whole to ``landscape table``: every cell
    (rows × both spaces × pairs) read from the shipped entries, nothing matched or evaluated."""
    if len(available_seeds("vit-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 vit-digits seeds")
    from landscape.experiments import RunContext
    from landscape.experiments.barriers import alignment, pipeline
    from landscape.experiments.barriers.tables import TableOptions, table

    rows = (("naive", "perm"), ("weight", "perm"))
    monkeypatch.setattr(asset_views, "TABLE_MODELS", ("vit-digits",))
    monkeypatch.setattr(asset_views, "TABLE_ROWS", rows)
    monkeypatch.setattr(asset_views, "TABLE_PAIRS", 2)
    assert asset_views.standard_views("mlp-digits", (asset_views.TABLE_VIEW,)) == []
    out = tmp_path / "results"
    index = assets.build_results(["vit-digits"], out, (asset_views.TABLE_VIEW,))
    cells = {(r["method"], r["group"], r["space"], tuple(r["seeds"])) for r in index}
    assert len(index) == len(cells) == 2 * 2 * 2  # rows × spaces × pairs, each once
    assert {r["view"] for r in index} == {"table"} and assets.check_results(out) == []
    for module in (alignment, pipeline):
        monkeypatch.setattr(module, "_match", lambda *a, **k: pytest.fail("matched"))
    monkeypatch.setattr(pipeline, "evaluate_mixtures", lambda *a, **k: pytest.fail("evaluated"))
    served = table("vit-digits", 2, TableOptions(rows=rows, space="both"),
                   context=RunContext(cache=Cache(tmp_path / "empty", shipped=out)))
    assert [(r["method"], r["space"]) for r in served["rows"]] == [
        ("naive", "weights"), ("naive", "circuits"), ("weight", "weights"),
        ("weight", "circuits")]  # fmt: skip
    assert all(len(r["per_pair_loss"]) == 2 for r in served["rows"])


def test_every_shipped_result_is_reached_by_todays_requests():
    """The shipped results answer today's requests: a changed algorithm version, data key or
    checkpoint would leave them unreachable (then: python -m landscape.assets --results)."""
    index_path = shipped_results_root() / "index.json"
    if not index_path.is_file():
        pytest.skip("no shipped results")
    index = json.loads(index_path.read_text())
    # a request whose data are not installed here cannot form its key
    here = [r for r in index if assets.data_here(r["model"])]
    if not here:
        pytest.skip("no shipped result has its data on this machine")
    torch.set_num_threads(1)
    assert assets.check_results(shipped_results_root(), here) == []


def _result(r: dict) -> dict:
    """A result less what says how it was obtained (its time, whether it was read)."""
    return {k: v for k, v in r.items() if k not in ("seconds", "cached")}


def _floats(x):
    """Every number of a result, in order (its structure compared separately)."""
    if isinstance(x, dict):
        return [v for k in x for v in _floats(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for e in x for v in _floats(e)]
    return [float(x)] if isinstance(x, (int, float)) and not isinstance(x, bool) else []


def _shape(x):
    """A result with every number replaced by its type: what must match exactly."""
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_shape(e) for e in x]
    return "number" if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def test_built_page_views_are_served_alone_and_equal_a_fresh_computation(tmp_path, monkeypatch):
    """The Eigenangles, Gauge and Atlas views hold results only (no weights): built for a small
    entry, they serve the page's requests from an empty cache with every computation failing,
    and equal the same requests computed afresh."""
    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")
    torch.set_num_threads(1)
    monkeypatch.setattr(asset_views, "GAUGE_ON_LOAD", ("table", "claims"))
    monkeypatch.setattr(asset_views, "GAUGE_DRAWS", 1)
    monkeypatch.setattr(asset_views, "ATLAS_SEEDS", 3)
    out = tmp_path / "results"
    index = assets.build_results(["mlp-digits"], out, ("eigenangles", "gauge", "atlas"))
    assert [r["kind"] for r in index] == ["eigenangles", "gauge-sweep", "gauge-sweep", "atlas"]
    assert sorted(p.parent.parent.name for p in out.rglob("*.lsc")) == [
        "atlas", "eigenangles", "gauge-sweep", "gauge-sweep"]  # fmt: skip
    assert assets.check_results(out) == []
    fresh = [assets.ask(r, Cache(tmp_path / "fresh", shipped=False)) for r in index]

    from landscape.experiments import atlas
    from landscape.experiments.eigen import view as eigenview
    from landscape.experiments.gauge import runner as gauge_runner

    def refuse(*args, **kwargs):
        raise AssertionError("computed instead of read")

    for module, name in ((eigenview, "pair_angles"), (atlas, "_compute"),
                         (gauge_runner, "_table_part"), (gauge_runner, "claim_check")):  # fmt: skip
        monkeypatch.setattr(module, name, refuse)
    for request, computed in zip(index, fresh, strict=True):
        served = assets.ask(request, Cache(tmp_path / "empty", shipped=out))
        # the same fields as a second computation in this process, every number equal up to
        # rounding (one kernel's last bit may follow its buffers' alignment)
        what = assets.describe(request)
        assert _shape(_result(served)) == _shape(_result(computed)), what
        assert _floats(_result(served)) == pytest.approx(_floats(_result(computed)), rel=1e-12,
                                                         abs=1e-12, nan_ok=True), what
    # another pair is another key: reported, not served
    assert len(assets.check_results(out, [{**index[0], "seeds": [0, 2]}])) == 1


def test_a_build_refuses_an_entry_that_holds_tensors(tmp_path, monkeypatch):
    from landscape.errors import LandscapeError

    def heavy(request, cache):
        return cache.get_or_compute("atlas", {"x": 1}, lambda: ({"w": torch.zeros(3)}, {}))

    monkeypatch.setattr(assets, "ask", heavy)
    with pytest.raises(LandscapeError, match="holds tensors"):
        assets.build_results(["vit-digits"], tmp_path / "results", ("atlas",))
    assert not list((tmp_path / "results").rglob("*.lsc"))


def test_a_build_removes_entries_no_request_reaches(tmp_path, monkeypatch):
    """An entry left by an earlier build whose key changed ships for nothing: the build removes
    it, and keeps every entry its index reaches."""
    if len(available_seeds("mlp-digits")) < 3:
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")
    torch.set_num_threads(1)
    monkeypatch.setattr(asset_views, "ATLAS_SEEDS", 3)
    out = tmp_path / "results"
    assets.build_results(["mlp-digits"], out, ("atlas",))
    (kept,) = out.rglob("*.lsc")
    stale = out / "atlas" / "00" / ("0" * 64 + kept.suffix)
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(kept.read_bytes())
    assert assets.prune_results(out) == [stale]
    assert list(out.rglob("*.lsc")) == [kept]
    assert not stale.parent.exists() or stale.parent == kept.parent  # an emptied folder goes
    assert assets.check_results(out) == []
    stale.parent.mkdir(exist_ok=True)
    stale.write_bytes(kept.read_bytes())
    assets.build_results(["mlp-digits"], out, ("atlas",))  # a rebuild prunes too
    assert list(out.rglob("*.lsc")) == [kept]


def test_a_build_keeps_what_another_shipped_while_it_computed(tmp_path, monkeypatch):
    """Two builds into one folder (say, one model on each core): the one that ships last reads
    the index when it ships, so the other's rows and entries stay."""
    out = tmp_path / "results"

    def views(name, views, ablation_seeds=None):
        return [{"view": "atlas", "kind": "atlas", "model": name, "group": "perm",
                 "projection": "pca"}]

    def ask(request, cache):
        if request["model"] == "slow" and not (out / "index.json").exists():
            assets.build_results(["fast"], out, ("atlas",))  # ships while "slow" computes
        return cache.get_or_compute("atlas", {"model": request["model"]},
                                    lambda: ({}, {"model": request["model"]}))  # fmt: skip

    monkeypatch.setattr(assets, "standard_views", views)
    monkeypatch.setattr(assets, "ask", ask)
    assets.build_results(["slow"], out, ("atlas",))
    index = json.loads((out / "index.json").read_text())
    assert sorted(r["model"] for r in index) == ["fast", "slow"]
    assert len(list(out.rglob("*.lsc"))) == 2
    assert assets.check_results(out) == []


def test_the_interpolation_views_ship_in_both_spaces_where_the_model_has_circuits():
    def spaces(name):
        return [r["space"] for r in assets.standard_views(name, ("interpolation",))]

    n = len(asset_views.VIEW_METHODS)
    assert spaces("vit-digits") == ["weights"] * n + ["circuits"] * n
    assert spaces("llama-shakespeare-d128") == ["weights"] * n + ["circuits"] * n  # per offset
    assert spaces("mlp-digits") == ["weights"] * n  # no heads


def test_a_build_reuses_a_results_folder_instead_of_computing(tmp_path, monkeypatch):
    """Adding a view to shipped results computes only what the folder lacks: its entries
    answer first, are copied to another folder whole, and stay as they are in their own."""
    monkeypatch.setattr(asset_views, "VIEW_METHODS", (("weight", "perm"),))
    out = tmp_path / "results"
    assets.build_results(["mlp-digits"], out, ("interpolation",))
    files = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.lsc")}
    from landscape.experiments.barriers import alignment, pipeline

    for module in (alignment, pipeline):  # align's matching, and the pipeline's unstored one
        monkeypatch.setattr(module, "_match", lambda *a, **k: pytest.fail("matched"))
    other = tmp_path / "other"
    assets.build_results(["mlp-digits"], other, ("interpolation",), reuse=out)
    assert {p.relative_to(other): p.read_bytes() for p in other.rglob("*.lsc")} == files
    assert assets.check_results(other) == []
    # a row read, not computed, keeps the time its computation took (as the index said)
    index_path = out / "index.json"
    index = json.loads(index_path.read_text())
    index_path.write_text(json.dumps([{**r, "seconds": 123.4} for r in index]))
    assets.build_results(["mlp-digits"], out, ("interpolation",), reuse=out)  # into itself
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*.lsc")} == files
    assert assets.check_results(out) == []
    assert [r["seconds"] for r in json.loads(index_path.read_text())] == [123.4] * len(index)


def _shipped_files() -> list:
    return sorted(shipped_results_root().rglob("*.lsc"))


def test_every_shipped_result_is_listed_in_the_package_and_served(tmp_path):
    """The package's digest list names exactly the shipped entries, each with its file's
    digest, and the default cache serves each (rebuild: python -m landscape.assets --results)."""
    from landscape.store.cache import SHIPPED_DIGESTS, file_digest, shipped_digests

    files = _shipped_files()
    if not files:
        pytest.skip("no shipped results")
    listed = shipped_digests()
    assert SHIPPED_DIGESTS.is_file() and set(listed) == {
        f"{p.parent.parent.name}/{p.stem}" for p in files}  # fmt: skip
    cache = Cache(tmp_path / "empty")
    for p in files:
        kind, key = p.parent.parent.name, p.stem
        assert listed[f"{kind}/{key}"] == file_digest(p), p
        assert cache.get(kind, key) is not None, p
    assert assets.unlisted_results(shipped_results_root()) == []


def _forge(path, kind: str, key: str, tmp_path) -> None:
    """Rewrite the entry at ``path`` with other results and every digest recomputed: a valid
    entry for its key, as anyone with write access could make."""
    entry = Cache(tmp_path / "read", shipped=path.parents[2]).get(kind, key)
    assert entry is not None
    forger = Cache(tmp_path / "forger", shipped=False)
    meta = json.loads(json.dumps(entry.meta).replace("\"barrier_loss\": ", "\"barrier_loss\": 9"))
    forged = forger.put(kind, key, entry.tensors, {**meta, "forged": True})
    path.write_bytes(forger.path(kind, key).read_bytes())
    assert forged.meta["forged"]


def test_an_edited_or_added_shipped_entry_is_never_served_as_shipped(tmp_path, monkeypatch,
                                                                     capsys):  # fmt: skip
    import shutil

    files = [p for p in _shipped_files() if p.parent.parent.name == "barrier"]
    if len(files) < 2:
        pytest.skip("fewer than two shipped barrier entries")
    assets_copy, shipped = tmp_path / "assets", shipped_results_root()
    shutil.copytree(shipped, assets_copy / "results")
    monkeypatch.setenv("LANDSCAPE_ASSETS", str(assets_copy))
    edited, kept = files[0], files[1]
    copy = assets_copy / "results" / edited.relative_to(shipped)
    _forge(copy, "barrier", edited.stem, tmp_path)
    # an entry under a key no build shipped, with valid digests
    forger = Cache(tmp_path / "added", shipped=False)
    added_key = forger.key("barrier", {"forged": 1})
    forger.put("barrier", added_key, {}, {"barrier_loss": 0.0})
    added = assets_copy / "results" / "barrier" / added_key[:2] / f"{added_key}.lsc"
    added.parent.mkdir(parents=True, exist_ok=True)
    added.write_bytes(forger.path("barrier", added_key).read_bytes())

    cache = Cache(tmp_path / "cache")
    assert cache.shipped == assets_copy / "results"
    assert cache.get("barrier", edited.stem) is None  # edited after the build: a miss, said
    assert "not the one the package lists" in capsys.readouterr().err
    assert cache.get("barrier", added_key) is None  # never built: a miss
    assert cache.get("barrier", kept.stem) is not None  # the others are served as before
    problems = assets.unlisted_results(assets_copy / "results")
    assert any("edited since the build" in p for p in problems)
    assert any(added_key in p and "not listed" in p for p in problems)


def test_the_build_rewrites_the_digest_list(tmp_path, monkeypatch):
    """What builds the shipped results lists them last: exactly the entries it shipped."""
    def one_entry(request, cache):
        return cache.get_or_compute("atlas", {"x": request["model"]}, lambda: ({}, {"v": 1}))

    monkeypatch.setattr(assets, "ask", one_entry)
    monkeypatch.setattr(assets, "prune_results", lambda out: [])
    digests = tmp_path / "shipped_results.json"
    digests.write_text(json.dumps({"entries": {"atlas/stale": "0" * 64}}))
    out = tmp_path / "results"
    assets.build_results(["vit-digits"], out, ("atlas",), digests=digests)
    from landscape.store.cache import shipped_digest_list, shipped_digests

    assert shipped_digests(digests) == shipped_digest_list(out) and len(shipped_digest_list(out))


def test_the_ablation_ships_each_measured_entry_and_the_page_reads_it(tmp_path, monkeypatch):
    """``--views ablation`` ships each entry × space of the Llama ablation as measured (here:
    small shipped models standing in for its entries), and the stored ablation is read from the
    shipped folder alone, without computing."""
    from landscape.experiments import RunContext
    from landscape.experiments.barriers import ablation as abl

    if len(available_seeds("vit-digits")) < 2:
        pytest.skip("the shipped zoo has fewer than 2 vit-digits seeds")
    monkeypatch.setattr(abl, "STEPS", (("vit-digits", "a stand-in"), ("mlp-digits", "other")))
    monkeypatch.setattr(abl, "ROWS", (("naive", "perm"),))
    monkeypatch.setattr(abl, "POINTS", 5)
    out, work = tmp_path / "results", tmp_path / "work"
    abl.ablation(abl.STEPS[:1], seeds=(0, 1),
                 context=RunContext(cache=Cache(work)))  # measured first, as by hand
    index = assets.build_results(["vit-digits"], out, (asset_views.ABLATION_VIEW,), work=work,
                                 ablation_seeds=(0, 1))  # fmt: skip
    assert [(r["kind"], r["space"], r["seeds"]) for r in index] == [
        ("ablation", "weights", [0, 1]), ("ablation", "circuits", [0, 1])]
    assert [p.parent.parent.name for p in out.rglob("*.lsc")] == ["ablation", "ablation"]
    assert assets.check_results(out) == []
    assert assets.standard_views("gpt-shakespeare", (asset_views.ABLATION_VIEW,)) == []  # no entry
    # a build ships what is measured and never measures: three seeds were not, and are left out
    again = assets.build_results(["vit-digits"], tmp_path / "other", (asset_views.ABLATION_VIEW,),
                                 work=work, ablation_seeds=(0, 1, 2))  # fmt: skip
    assert again == [] and not list((tmp_path / "other").rglob("*.lsc"))
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(abl, "measure_barrier", lambda *a, **k: pytest.fail("computed"))
    from landscape.store.cache import ReadOnlyCache

    for space in ("weights", "circuits"):
        r = abl.ablation_step("vit-digits", seeds=(0, 1), space=space,
                              context=RunContext(cache=ReadOnlyCache(shipped=out)))
        assert r["cached"] and r["pairs"] == [[0, 1]] and r["cells"][0]["space"] == space


def test_nothing_is_pruned_where_some_request_has_no_data_here(tmp_path, monkeypatch):
    """A request whose data are not on this machine cannot form its key, so its entries look
    unreached: the prune then removes nothing rather than the entries of that request."""
    from landscape.errors import LandscapeError
    from landscape.models import zoo

    out = tmp_path / "results"
    path, key = _entry(out, "barrier", {"x": 1})
    (out / "index.json").write_text(json.dumps([{"view": "interpolation", "kind": "barrier",
                                                 "model": "vit-fashion-d128"}]))  # fmt: skip

    def missing(model, data_dir=None):
        raise LandscapeError("Fashion-MNIST file not found")

    monkeypatch.setattr(zoo, "data_identity", missing)
    assert assets.prune_results(out) == [] and path.is_file()
