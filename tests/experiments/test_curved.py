"""Curved paths between two endpoints: an untrained curve is the straight line, training lowers
the path's highest loss, and the endpoints never move."""

from __future__ import annotations

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.experiments import RunContext, seeds_request
from landscape.experiments.barriers.curved import (
    KINDS,
    CurveOptions,
    curve,
    curve_weights,
    line_controls,
    train_controls,
)
from landscape.experiments.evaluation import interpolate, mix
from landscape.sources import Source, data_of
from landscape.sources.zoo import available_seeds

SEEDS = (0, 1)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def _needs_pair() -> None:
    if len(available_seeds("mlp-digits")) < 2:
        pytest.skip("the shipped zoo has fewer than 2 mlp-digits seeds")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bends", [1, 3], ids=["one bend", "three bends"])
def test_control_points_on_the_line_give_the_line(kind, bends, gen):
    a = {"w": torch.randn(4, 3, generator=gen, dtype=torch.float64)}
    b = {"w": torch.randn(4, 3, generator=gen, dtype=torch.float64)}
    lam = torch.linspace(0, 1, 11, dtype=torch.float64)
    w = curve_weights(kind, bends, lam)
    assert w.shape == (11, bends + 2)
    assert torch.allclose(w.sum(1), torch.ones(11, dtype=torch.float64))
    assert w[-1].tolist() == [1.0] + [0.0] * (bends + 1)  # λ = 1 is A exactly
    assert w[0].tolist() == [0.0] * (bends + 1) + [1.0]  # λ = 0 is B exactly
    on_line = mix([a, *line_controls(a, b, bends), b], w)["w"]
    assert torch.allclose(on_line, interpolate(a, b, lam)["w"], atol=1e-12)


def test_quadratic_bezier_and_chain_weights_are_the_formulas():
    lam = torch.tensor([0.3], dtype=torch.float64)
    t = 0.7  # t = 1 − λ runs from A to B
    bezier = curve_weights("bezier", 1, lam)[0].tolist()
    assert bezier == pytest.approx([(1 - t) ** 2, 2 * t * (1 - t), t**2])
    chain = curve_weights("chain", 1, lam)[0].tolist()  # past the bend: θ → B
    assert chain == pytest.approx([0.0, 2 * (1 - t), 2 * t - 1])


@pytest.mark.parametrize("method", ["naive", "weight"])
def test_an_untrained_curve_has_the_straight_barrier(method):
    _needs_pair()
    r = curve(seeds_request("mlp-digits", SEEDS, method, "perm", points=9),
              CurveOptions(kind="bezier", steps=0))  # fmt: skip
    for al in r["alignments"]:
        line, path = al["line"], al["curve"]
        assert line["barrier_loss"] > 0.05  # a real barrier to reproduce
        assert path["loss"] == pytest.approx(line["loss"], abs=1e-5)
        assert path["barrier_loss"] == pytest.approx(line["barrier_loss"], abs=1e-5)
        assert path["barrier_accuracy"] == pytest.approx(line["barrier_accuracy"], abs=1e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_training_lowers_the_highest_loss_and_keeps_the_endpoints(kind):
    _needs_pair()
    stages = []
    request = seeds_request("mlp-digits", SEEDS, "naive", "perm", points=9)
    r = curve(request, CurveOptions(kind=kind, steps=150),
              context=RunContext(progress=lambda stage, done, total: stages.append(done / total)))
    (al,) = r["alignments"]
    line, path = al["line"], al["curve"]
    assert max(path["loss"]) < max(line["loss"]) - 0.1
    assert path["barrier_loss"] < line["barrier_loss"] / 2
    # the endpoints are the checkpoints: the same losses as the line's, bit for bit
    assert path["loss"][0] == line["loss"][0] and path["loss"][-1] == line["loss"][-1]
    assert len(al["training_loss"]) == 50 and stages[-1] == pytest.approx(1.0)
    again = curve(request, CurveOptions(kind=kind, steps=150))
    assert again["alignments"][0]["cached"] and again["rows"] == r["rows"]


def test_training_moves_only_the_control_points():
    _needs_pair()
    a, b = Source("mlp-digits", 0).load(), Source("mlp-digits", 1).load()
    before = {k: v.clone() for k, v in a.params.items()}
    (ctrl,), losses = train_controls(a.cfg, a.params, b.params, data_of(a),
                                     CurveOptions("bezier", steps=20))  # fmt: skip
    assert all(torch.equal(before[k], a.params[k]) for k in before)
    mid = line_controls(a.params, b.params, 1)[0]
    assert any(not torch.allclose(ctrl[k], mid[k]) for k in mid)
    assert len(losses) == 20 and all(x > 0 for x in losses)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "spline"}, "unknown curve kind 'spline'"),
        ({"bends": 0}, "--bends must be between 1"),
        ({"steps": -1}, "--steps must be between 0"),
        ({"lr": 0.0}, "--lr must be a positive number"),
        ({"seeds": (1, 1)}, "two different seeds"),
        ({"method": "magic"}, "unknown method 'magic'"),
        ({"dtype": "bfloat16"}, "a curve does not take the request's dtype"),
    ],
    ids=["kind", "bends", "steps", "lr", "same seeds", "method", "unread field"],
)
def test_bad_requests_are_one_line_before_anything_loads(kwargs, match):
    args = {"seeds": SEEDS, "method": "weight", **kwargs}
    drawn = {k: args.pop(k) for k in ("kind", "bends", "steps", "lr") if k in args}
    with pytest.raises(LandscapeError, match=match):
        request = seeds_request("no-such-model", args.pop("seeds"), args.pop("method"), "perm",
                                **args)  # fmt: skip
        curve(request, CurveOptions(**drawn))
