"""Pictures that say what the numbers say: identical checkpoints at one place on the atlas, one
Haar reference per width, the triangle's outline following its colour, a note where a method is
above naive, and every method its own colour, dash and marker."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from landscape import plots
from landscape.experiments.atlas import distinct_rows, project, project_distinct
from landscape.experiments.basins import barrier_from_curve, barycentric_grid, triangle_from_values
from landscape.experiments.eigen.angles import (
    angle_summary,
    eigenangles,
    haar_draws,
    haar_orthogonal,
    haar_reference,
)
from landscape.matching import matching_key
from landscape.plots.interpolation import above_naive
from landscape.plots.theme import (
    METHOD_DASH,
    NEUTRAL,
    PALETTE,
    colour_distance,
    deuteranopia,
    method_key,
    method_style,
)
from landscape.plots.triangle import basin, basin_fraction

# ---------------------------------------------------------------- method styles

METHODS = list(METHOD_DASH)


def test_every_method_has_its_own_dash_and_no_two_look_alike_with_deuteranopia() -> None:
    styles = {m: method_style(m) for m in METHODS}
    assert len({s.dash for s in styles.values()}) == len(styles)  # a dash per method
    assert len({(s.colour, s.dash, s.symbol) for s in styles.values()}) == len(styles)
    for a, b in itertools.combinations(METHODS, 2):
        seen = colour_distance(deuteranopia(styles[a].colour), deuteranopia(styles[b].colour))
        assert seen >= 15 or styles[a].dash != styles[b].dash, (a, b, seen)


def test_the_palette_keeps_its_first_colours_and_tells_twelve_series_apart() -> None:
    """Figures already printed use the first eight colours and the methods' colours: they stay.
    Twelve series (the mlp-digits zoo's seeds on the Atlas) get twelve colours, none the
    baseline's grey, and no two alike, with deuteranopia too."""
    assert PALETTE[:8] == ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
                           "#F0E442", "#000000"]  # fmt: skip
    colours = {m: method_style(m).colour for m in ("naive", "weight/perm", "activation/perm",
                                                   "learned/orth", "unknown/perm")}  # fmt: skip
    assert colours == {"naive": NEUTRAL, "weight/perm": "#0072B2", "activation/perm": "#E69F00",
                       "learned/orth": "#D55E00", "unknown/perm": "#000000"}  # fmt: skip
    twelve = [PALETTE[i % len(PALETTE)] for i in range(12)]  # as the figures pick them
    assert len(set(twelve)) == 12 and NEUTRAL not in twelve
    for a, b in itertools.combinations([*twelve, NEUTRAL], 2):
        assert colour_distance(a, b) > 20, (a, b)
        assert colour_distance(deuteranopia(a), deuteranopia(b)) > 8, (a, b)
    seeds = list(range(12))  # the Atlas of twelve seeds: a colour each
    points = [{"seed": s, "kind": "seed", "copy": 0, "raw": [s, 0.0], "aligned": [s, 1.0],
               "distance_raw": 0.0, "distance_aligned": 0.0, "on_seed_raw": False,
               "on_seed_aligned": False} for s in seeds]  # fmt: skip
    fig = plots.figure_atlas({"seeds": seeds, "reference": 0, "projection": "pca",
                              "explained_raw": [0.5, 0.2], "explained_aligned": [0.9, 0.1],
                              "orbit_ratio_raw": 1.0, "orbit_ratio_aligned": 0.0,
                              "points": points})  # fmt: skip
    drawn = {t.name: t.marker.color for t in fig.data if t.showlegend}
    assert len(drawn) == 12 and len(set(drawn.values())) == 12, drawn


def test_the_deuteranopia_simulation_merges_red_and_green_but_keeps_blue_and_yellow() -> None:
    red_green = colour_distance(deuteranopia("#D55E00"), deuteranopia("#6F8F00"))
    assert red_green < colour_distance("#D55E00", "#6F8F00") / 3
    assert colour_distance(deuteranopia("#0072B2"), deuteranopia("#E69F00")) > 60
    assert deuteranopia("#888888") == "#888888"  # greys stay grey


def _curve(height: float, seeds=(0, 1), method: str | None = None, group: str = "perm") -> dict:
    lam = [i / 10 for i in range(11)]
    loss = [0.1 + height * 4 * x * (1 - x) for x in lam]
    acc = [0.95 - height * 0.2 * 4 * x * (1 - x) for x in lam]
    r = {**barrier_from_curve(lam, loss, acc).to_dict(), "seeds": list(seeds)}
    return r if method is None else {**r, "method": method, "group": group}


def _lines(fig) -> dict:
    return {t.name: t for t in fig.data if t.showlegend}


def test_curve_figures_draw_each_method_in_its_theme_style() -> None:
    series = [{"label": m, "results": [_curve(0.5)], "method": m} for m in METHODS]
    lines = _lines(plots.figure_interpolation(series))
    for m in METHODS:
        style = method_style(m)
        assert (lines[m].line.color, lines[m].line.dash) == (style.colour, style.dash)
        assert lines[m].marker.symbol == style.symbol
    # Home's series are named in words: the style comes from the results' method and group
    home = [{"label": "weight matching, rotations", "results": [_curve(0.1, method="weight",
                                                                        group="orth")]},
            {"label": "naive", "results": [_curve(1.0, method="naive")]}]  # fmt: skip
    lines = _lines(plots.figure_interpolation(home))
    assert lines["weight matching, rotations"].line.dash == method_style("weight/orth").dash
    assert lines["naive"].line.dash == method_style("naive").dash
    widths = {"d_model": 64, "rows": [{"width": w, "method": m, "group": "orth",
                                       "barrier_loss": 1.0, "barrier_accuracy": 0.1}
                                      for w in (16, 32) for m in ("naive", "weight")]}  # fmt: skip
    lines = _lines(plots.figure_widths(widths))
    assert lines["weight"].line.dash == method_style("weight/orth").dash
    assert lines["naive"].line.color == method_style("naive").colour


def test_method_key_names_a_method_that_aligns_nothing_alone() -> None:
    assert method_key("naive", "orth", aligns=False) == "naive"
    assert method_key("learned", "signed-perm", aligns=True) == "learned/signed-perm"
    # the fact is the registry's: naive's entry does not align, learned's does
    assert matching_key("naive", "orth") == "naive"
    assert matching_key("learned", "signed-perm") == "learned/signed-perm"


# ---------------------------------------------------------------- above naive


def test_a_method_above_naive_gets_a_note_computed_from_its_numbers() -> None:
    pairs = [(0, 1), (2, 3)]
    series = [
        {"label": "naive", "method": "naive", "results": [_curve(1.0, p) for p in pairs]},
        {"label": "weight/perm", "method": "weight/perm",
         "results": [_curve(0.2, p) for p in pairs]},
        {"label": "weight/orth", "method": "weight/orth",
         "results": [_curve(1.5, p) for p in pairs]},
    ]  # fmt: skip
    notes = above_naive(series, split="train")
    assert [n["label"] for n in notes] == ["weight/orth"]
    (note,) = notes
    assert note["metrics"] == ["loss", "accuracy"] and note["pairs"] == 2
    assert note["loss"] == pytest.approx(1.5) and note["naive_loss"] == pytest.approx(1.0)
    assert note["note"].startswith("weight/orth is above naive here")
    assert "matching the weights does not reduce this barrier" in note["note"]
    assert "train split" in note["note"] and "1.500 against 1.000 nats" in note["note"]
    # only the pairs both hold are compared: on (2, 3) alone the method is below naive
    series[2]["results"] = [_curve(1.5, (0, 1)), _curve(0.1, (2, 3))]
    series[0]["results"] = [_curve(1.0, (2, 3))]
    assert above_naive(series) == []
    # and each space against its own naive line
    spaced = [{**s, "space": "circuits"} for s in series[:1]] + [
        {**series[2], "results": [_curve(1.5, (2, 3))]}
    ]
    assert above_naive(spaced) == []


@pytest.mark.parametrize(
    ("naive", "ours"),
    [(0.0, 0.0), (0.002, 0.0035), (0.05, 0.055), (1.0, 1.04)],
    ids=["equal-zero", "untrained-thousandths", "under-absolute-margin", "under-share"],
)
def test_a_barrier_within_the_margin_of_naive_is_not_above_it(naive, ours) -> None:
    """Barriers of an untrained pair differ by thousandths of a nat, and equal ones (0.0 against
    0.0) are never above: no warning below both margins."""
    series = [
        {"label": "naive", "method": "naive", "results": [_curve(naive)]},
        {"label": "weight/perm", "method": "weight/perm", "results": [_curve(ours)]},
    ]
    assert above_naive(series) == []


def test_a_barrier_past_both_margins_is_above_naive() -> None:
    from landscape.plots.interpolation import clearly_above

    series = [
        {"label": "naive", "method": "naive", "results": [_curve(0.5)]},
        {"label": "weight/perm", "method": "weight/perm", "results": [_curve(0.6)]},
    ]
    assert [n["label"] for n in above_naive(series)] == ["weight/perm"]
    assert clearly_above(0.0201, 0.01, "loss") and not clearly_above(0.0199, 0.01, "loss")
    assert not clearly_above(2.09, 2.0, "loss") and clearly_above(2.11, 2.0, "loss")
    assert not clearly_above(0.004, 0.0, "accuracy") and clearly_above(0.006, 0.0, "accuracy")


# ---------------------------------------------------------------- atlas


def test_identical_rows_are_projected_once_and_placed_on_their_original() -> None:
    gen = np.random.default_rng(0)
    x = gen.normal(size=(6, 40))
    x[3] = x[0] + 1e-13  # round-off: the same checkpoint
    x[5] = x[1]
    assert distinct_rows(x) == [0, 1, 2, 0, 4, 1]
    coords, var, used, first = project_distinct(x, "pca")
    assert used == "pca" and first == [0, 1, 2, 0, 4, 1]
    assert np.array_equal(coords[3], coords[0]) and np.array_equal(coords[5], coords[1])
    assert not np.array_equal(coords[2], coords[0])
    plain, _ = project(x[[0, 1, 2, 4]], "pca")
    assert np.allclose(coords[[0, 1, 2, 4]], plain)  # the distinct points as PCA puts them
    # two distinct checkpoints: UMAP has no neighbourhoods, PCA is drawn and said so
    few = np.stack([x[0], x[0], x[1], x[1]])
    coords, _, used, _ = project_distinct(few, "umap")
    assert used == "pca" and np.array_equal(coords[0], coords[1])


@pytest.mark.slow  # UMAP compiles its code on first use: about a minute
def test_umap_draws_identical_checkpoints_at_one_place() -> None:
    pytest.importorskip("umap")
    gen = np.random.default_rng(1)
    seeds = gen.normal(size=(6, 30))
    x = np.concatenate([seeds, seeds, seeds])  # every seed with two copies equal to it
    coords, _, used, first = project_distinct(x, "umap")
    assert used == "umap" and first == list(range(6)) * 3
    for k in range(6):
        assert np.array_equal(coords[k], coords[k + 6]) and np.array_equal(
            coords[k], coords[k + 12]
        )
    assert len({tuple(c) for c in coords}) == 6


def test_atlas_draws_copies_that_equal_their_seed_on_their_seed(tmp_path, monkeypatch) -> None:
    from landscape.experiments.atlas import AtlasOptions, atlas
    from landscape.experiments.context import RunContext
    from landscape.store.cache import Cache

    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    result = atlas(
        "mlp-digits",
        [0, 1, 2],
        AtlasOptions(copies=2),
        context=RunContext(cache=Cache(tmp_path / "cache")),
    )
    copies = [p for p in result["points"] if p["kind"] == "gauge copy"]
    seeds = {p["seed"]: p for p in result["points"] if p["kind"] == "seed"}
    assert result["orbit_ratio_aligned"] < 1e-9 < result["orbit_ratio_raw"]
    assert all(p["on_seed_aligned"] and p["distance_aligned"] < 1e-9 for p in copies)
    assert all(p["aligned"] == seeds[p["seed"]]["aligned"] for p in copies)  # the same place
    assert all(p["raw"] != seeds[p["seed"]]["raw"] and not p["on_seed_raw"] for p in copies)
    assert result["duplicates_aligned"] == len(copies) and result["duplicates_raw"] == 0
    fig = plots.figure_atlas(result)
    note = [a.text for a in fig.layout.annotations if "equal their seed" in a.text]
    assert note == [f"aligned: {len(copies)} of {len(copies)} copies equal their seed, drawn on "
                    "it (no jitter)"]  # fmt: skip


# ---------------------------------------------------------------- eigenangles


def test_the_haar_reference_depends_on_the_width_alone_and_averages_many_draws() -> None:
    d = 32
    ref = haar_reference(d)
    assert len(ref) == haar_draws(d) * d == 200 * d
    assert torch.equal(ref, haar_reference(d))  # the same for every pair of width d
    # the first draw is one of the pooled (the reference takes its angles by the symmetric
    # route, eigen.orthogonal_eigenangles: the same to round-off, not to the bit)
    first = eigenangles(haar_orthogonal(d, seed=0))
    assert (first[:, None] - ref[None, :]).abs().min(1).values.max() < 1e-12
    s = angle_summary(ref)
    # large-d Haar eigenangles are nearly uniform on (−π, π]: median |φ| ≈ π/2, share ≈ 0.3/π
    assert s["median_abs"] == pytest.approx(math.pi / 2, abs=0.05)
    assert s["share_small"] == pytest.approx(0.3 / math.pi, abs=0.015)
    assert haar_draws(768) * 768 >= 25_600 and haar_draws(768) < 200


def test_the_eigenangle_page_compares_two_pairs_with_one_haar_reference(tmp_path) -> None:
    from landscape.experiments import eigenangle_result
    from landscape.store.cache import Cache

    cache = Cache(tmp_path / "cache")
    one = eigenangle_result("mlp-digits", (0, 1), learned=False, cache=cache)
    two = eigenangle_result("mlp-digits", (2, 3), learned=False, cache=cache)
    assert one["angles_wm"] != two["angles_wm"]
    assert one["angles_haar"] == two["angles_haar"] and one["summary_haar"] == two["summary_haar"]
    assert one["summary_haar"] == angle_summary(haar_reference(one["d_model"]))
    fig_one, fig_two = plots.figure_eigenangles(one), plots.figure_eigenangles(two)
    haar = [next(t for t in f.data if t.name.startswith("Haar")) for f in (fig_one, fig_two)]
    assert list(haar[0].x) == list(haar[1].x)
    assert haar[0].name == f"Haar-random O(d): average of {one['haar_draws']} seeded draws"


# ---------------------------------------------------------------- triangle


def _triangle() -> dict:
    """A triangle whose loss basin and accuracy basin differ: the loss rises towards the middle
    while the accuracy stays on the corners' plane except at C's side."""
    pts = barycentric_grid(4)
    loss = [0.1 + 1.0 * (1 - max(p)) for p in pts.tolist()]
    acc = [0.9 - 0.2 * p[2] * (1 - p[2]) for p in pts.tolist()]
    r = triangle_from_values(pts, loss, acc, 4).to_dict()
    return {**r, "method": "weight", "group": "perm", "seeds": [0, 1, 2], "split": "test"}


def test_the_outline_follows_the_colour_metric_and_names_its_criterion() -> None:
    r = _triangle()
    by_loss, loss_words = basin(r, "loss")
    by_acc, acc_words = basin(r, "accuracy")
    assert by_loss != by_acc  # the test means something: the two criteria differ here
    assert by_loss == [e <= r["tol"] for e in r["excess_loss"]]
    assert basin_fraction(r, "loss") == pytest.approx(r["basin_fraction"])
    pts = r["points"]
    assert by_acc == [0.2 * p[2] * (1 - p[2]) <= 0.01 + 1e-12 for p in pts]
    for metric, inside, words in (("loss", by_loss, loss_words), ("accuracy", by_acc, acc_words)):
        fig = plots.figure_triangles([r], metric=metric)
        outline = list(fig.data[0].marker.line.color)
        assert outline == ["#222" if b else "rgba(0,0,0,0)" for b in inside]
        assert f"<br>basin {100 * sum(inside) / len(inside):.0f}%" in (
            fig.layout.annotations[0].text
        )
        assert any(a.text == f"outlined: the {metric} basin, {words}"
                   for a in fig.layout.annotations)  # fmt: skip
    assert "nats above" in loss_words and "1 point below" in acc_words
