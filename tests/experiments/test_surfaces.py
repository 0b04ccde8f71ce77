"""2-D surfaces: filter-normalised directions, the plane through three models, the cached
experiment (docs/design.md §1, *Surfaces*)."""

import pytest
import torch
import torch.nn.functional as F

from landscape.errors import LandscapeError
from landscape.experiments.directions import direction_pair, filter_axes, filter_norms, grid_axis
from landscape.experiments.surfaces import SurfaceOptions, plane_coordinates, surface
from landscape.models import forward, init_params
from landscape.sources import Source, data_of
from tests.conftest import tiny_config, tiny_inputs
from tests.experiments.test_result_fields import surface_problems


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


def own_loss(model: str, seed: int, split: str = "test") -> tuple[float, float]:
    """Loss and accuracy of the checkpoint itself, by one plain forward (not the mixer)."""
    ckpt = Source(model, seed).load()
    ev = data_of(ckpt).evaluation(split)
    with torch.no_grad():
        logits = forward(ckpt.cfg, ckpt.params, ev.inputs).to(torch.float64)
    loss = F.cross_entropy(logits, ev.targets.reshape(-1))
    return float(loss), float((logits.argmax(-1) == ev.targets.reshape(-1)).double().mean())


@pytest.mark.parametrize(
    "name,shape,axes",
    [
        pytest.param("blocks.0.attn.W_Q", (2, 8, 4), (1,), id="W_Q-per-head-unit"),
        pytest.param("blocks.0.attn.W_O", (2, 4, 8), (0, 1), id="W_O-all-heads"),
        pytest.param("blocks.0.mlp.W_in", (8, 12), (0,), id="W_in-column"),
        pytest.param("embed.W_E", (7, 8), (0,), id="W_E-column"),
        pytest.param("blocks.0.attn.b_Q", (2, 4), None, id="b_Q-vector"),
        pytest.param("blocks.0.ln1.w", (8,), None, id="gain-vector"),
        pytest.param("embed.cls", (8,), None, id="cls-vector"),
    ],
)
def test_filter_axes(name, shape, axes):
    assert filter_axes(name, shape) == axes


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_filter_normalisation_keeps_each_filters_norm(arch):
    cfg = tiny_config(arch)
    params = init_params(cfg, 0)
    # gains and biases away from 1 and 0, so that "keep" is told from a default
    params = {k: v + 0.1 * torch.randn(v.shape, generator=torch.Generator().manual_seed(1))
              for k, v in params.items()}  # fmt: skip
    d1, d2 = direction_pair(params, seed=3)
    kept, _ = direction_pair(params, seed=3, vectors="keep")
    filters = 0
    for name, theta in params.items():
        norms = filter_norms(name, theta)
        if norms is None:
            assert torch.equal(d1[name], torch.zeros_like(theta)), name
            assert torch.equal(kept[name], theta), name
            continue
        filters += norms.numel()
        for d in (d1, d2, kept):
            torch.testing.assert_close(filter_norms(name, d[name]), norms, rtol=1e-6, atol=0)
        assert not torch.allclose(d1[name], d2[name])  # two draws, not one
    assert filters > 0
    again, _ = direction_pair(params, seed=3)
    assert all(torch.equal(again[k], d1[k]) for k in params)  # seeded


def test_grid_axis_has_an_exact_zero():
    axis = grid_axis(-0.7, 0.7, 21)
    assert axis[10].item() == 0.0 and axis[0].item() == -0.7 and axis[-1].item() == 0.7


def test_plane_coordinates_are_gram_schmidt():
    a = {"W": torch.zeros(3, 1, dtype=torch.float64)}
    b = {"W": torch.tensor([[2.0], [0.0], [0.0]], dtype=torch.float64)}
    c = {"W": torch.tensor([[1.0], [3.0], [4.0]], dtype=torch.float64)}
    bx, cx, cy = plane_coordinates(a, b, c)
    assert (bx, cx, cy) == pytest.approx((2.0, 1.0, 5.0))
    with pytest.raises(LandscapeError, match="one line"):
        plane_coordinates(a, b, {"W": 3 * b["W"]})


def test_surface_at_the_origin_is_the_models_loss_and_is_cached():
    r = surface("mlp-digits", [0], options=SurfaceOptions(5, extent=0.5, directions_seed=1))
    loss, acc = own_loss("mlp-digits", 0)
    assert r["loss"][2][2] == pytest.approx(loss, abs=1e-6)  # the middle of the grid is θ
    assert r["points"][0]["loss"] == pytest.approx(loss, abs=1e-6)
    assert r["points"][0]["accuracy"] == pytest.approx(acc, abs=1e-12)
    assert len(r["loss"]) == 5 and len(r["loss"][0]) == 5 and r["x"][2] == 0.0
    corners = [r["loss"][0][0], r["loss"][0][4], r["loss"][4][0], r["loss"][4][4]]
    assert min(corners) > loss  # a trained model sits in a basin of the random plane
    assert r["cached"] is False
    again = surface("mlp-digits", [0], options=SurfaceOptions(5, extent=0.5, directions_seed=1))
    assert again["cached"] is True and again["loss"] == r["loss"]
    other = surface("mlp-digits", [0], options=SurfaceOptions(5, extent=0.5, directions_seed=2))
    assert other["cached"] is False and other["loss"] != r["loss"]


DIGITS = {"name": "digits", "split": "numpy default_rng(0) permutation, 1300/497"}


@pytest.mark.parametrize(
    "seeds,method,options,key",
    [
        pytest.param([0], "weight", SurfaceOptions(5, extent=0.5, directions_seed=1),
                     {"directions_seed": 1, "extent": 0.5, "resolution": 5, "vectors": "zero"},
                     id="random"),
        pytest.param([0, 1, 2], "weight", SurfaceOptions(4, margin=0.3, path_points=5),
                     {"group": "perm", "margin": 0.3, "matching_version": 5, "method": "weight",
                      "path_points": 5, "resolution": 4}, id="plane"),
        pytest.param([0], "weight", SurfaceOptions(3, directions="hessian", hessian_batch=10),
                     {"curvature_version": 1, "directions": "hessian", "directions_seed": 0,
                      "extent": 1.0, "hessian": {"batch": 10, "dtype": "float32",
                                                 "split": "train"},
                      "kept": 1, "resolution": 3, "vectors": "zero"}, id="hessian"),
    ],
)  # fmt: skip
def test_a_surfaces_cache_key_is_the_one_it_always_had(monkeypatch, seeds, method, options, key):
    """The inputs of a surface's entry, as they were when ``surface`` took its options as
    keywords: surfaces cached before are still read back."""
    from landscape.store.cache import Cache, digest_tensors

    seen = []
    real = Cache.get_or_compute

    def spy(self, kind, inputs, compute):
        if kind != "surface":
            return real(self, kind, inputs, compute)
        seen.append(inputs)
        raise LookupError("recorded")

    monkeypatch.setattr(Cache, "get_or_compute", spy)
    with pytest.raises(LookupError, match="recorded"):
        surface("mlp-digits", seeds, method, "perm", options)
    (inputs,) = seen
    ckpts = [Source("mlp-digits", s).load() for s in seeds]
    assert inputs.pop("models") == [digest_tensors(c.params) for c in ckpts]
    assert inputs.pop("cfg") == ckpts[0].cfg.to_dict()
    assert inputs == {**key, "data": DIGITS, "split": "test", "version": 1}


def test_plane_points_are_the_models_own_losses():
    r = surface("mlp-digits", [0, 1, 2], "weight", "perm", SurfaceOptions(4, path_points=5))
    assert r["function_ok"], r["warnings"]
    assert [p["label"] for p in r["points"]] == [f"mlp-digits seed {s}" for s in (0, 1, 2)]
    for point, seed in zip(r["points"], (0, 1, 2), strict=True):
        loss, acc = own_loss("mlp-digits", seed)
        assert point["loss"] == pytest.approx(loss, abs=1e-6), seed
        assert point["accuracy"] == pytest.approx(acc, abs=1e-12), seed
    a, b, c = (p for p in r["points"])
    assert (a["x"], a["y"], b["y"]) == (0.0, 0.0, 0.0) and c["y"] > 0
    # the paths run from model to model, and the grid reaches past the triangle
    ab = r["paths"][0]
    assert ab["label"] == "mlp-digits seed 0–mlp-digits seed 1"
    assert (ab["x"][0], ab["x"][-1]) == pytest.approx((0.0, b["x"]))
    assert ab["loss"][0] == a["loss"] and ab["loss"][-1] == b["loss"]
    assert min(r["x"]) < min(0.0, c["x"]) and max(r["x"]) > b["x"] and max(r["y"]) > c["y"]
    assert len(r["loss"]) == 4 and len(r["loss"][0]) == 4
    assert surface("mlp-digits", [0, 1, 2], "weight", "perm",
                   SurfaceOptions(4, path_points=5))["cached"]  # fmt: skip


@pytest.mark.parametrize(
    "seeds,options,match",
    [
        pytest.param([0, 1], {}, "one seed", id="two-seeds"),
        pytest.param([0, 1, 1], {}, "repeat", id="repeated-seed"),
        pytest.param([0], {"resolution": 1}, "at least 2", id="resolution-1"),
        pytest.param([0], {"extent": 0.0}, "--extent", id="zero-extent"),
        pytest.param([0], {"vectors": "half"}, "vectors", id="unknown-vectors"),
        pytest.param([0, 1, 2], {"method": "telepathy"}, "unknown method", id="bad-method"),
        pytest.param([0], {"split": "dev"}, "split", id="bad-split"),
    ],
)
def test_bad_requests_are_refused_before_work(seeds, options, match):
    with pytest.raises(LandscapeError, match=match):
        method = options.pop("method", "weight")
        surface("mlp-digits", seeds, method, "orth", SurfaceOptions(**options))


def test_resolution_is_bounded_by_the_memory_budget(monkeypatch):
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.0001")  # 52 grid points
    surface("mlp-digits", [0], options=SurfaceOptions(7))  # 49 points and the origin fit
    with pytest.raises(LandscapeError, match="--resolution 8 asks for 65 grid points"):
        surface("mlp-digits", [0], options=SurfaceOptions(8))
    with pytest.raises(LandscapeError, match="--resolution 5 and --path-points 21 ask for 88 "):
        surface("mlp-digits", [0, 1, 2], options=SurfaceOptions(5, path_points=21))


class _Data:
    """The little of :class:`landscape.sources.Data` a surface reads: an evaluation split."""

    def __init__(self, inputs, targets):
        self.split_ = type("Split", (), {"inputs": inputs, "targets": targets})()

    def evaluation(self, name):
        return self.split_

    def eval_options(self, cfg, inputs):
        return {}


@pytest.mark.parametrize("arch", ["vit", "gpt"])
def test_surface_origin_on_attention_models(arch):
    """Learned positions and a class token ride in the mixed embeddings: the middle of the grid
    is still the model, and a grid point off it is the model moved along the directions."""
    from landscape.experiments.surfaces import surface_directions

    cfg = tiny_config(arch)
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg, batch=6)
    with torch.no_grad():
        logits = forward(cfg, params, x).to(torch.float64)
    n_pred = logits.shape[0] * (logits.shape[1] if logits.dim() == 3 else 1)
    y = torch.randint(0, cfg.n_out, (n_pred,), generator=torch.Generator().manual_seed(1))
    y = y.reshape(logits.shape[:-1])
    s = surface_directions(cfg, params, _Data(x, y),
                           SurfaceOptions(3, extent=0.5, directions_seed=2))
    own = float(F.cross_entropy(logits.reshape(-1, cfg.n_out), y.reshape(-1)))
    assert s.loss[1][1] == pytest.approx(own, abs=1e-6)
    d1, d2 = direction_pair(params, 2)
    moved = {k: params[k] + 0.5 * d1[k] - 0.5 * d2[k] for k in params}  # (α, β) = (0.5, −0.5)
    with torch.no_grad():
        far = forward(cfg, moved, x).to(torch.float64)
    far_loss = float(F.cross_entropy(far.reshape(-1, cfg.n_out), y.reshape(-1)))
    assert s.loss[0][2] == pytest.approx(far_loss, abs=1e-5)  # rows along β, columns along α


# ---------------------------------------------------------------- Hessian directions


class _Batch(_Data):
    """A split that is both the Hessian's batch and the evaluated data."""

    def split(self, name):
        from landscape.data import Split

        return Split(self.split_.inputs, self.split_.targets)


def test_hessian_axes_are_the_exact_eigenvectors_filter_normalised():
    """Float64, a batch that is the evaluated split: the axes are the exact Hessian's top two
    eigenvectors (signed by the convention) filter-normalised, the recorded eigenvalues the
    exact ones, and the loss along the first axis near the centre curves like ½·κ₁·α², κ₁ =
    d₁ᵀHd₁ recorded; the eigenvector itself curves like ½·λ₁·t²."""
    from landscape.experiments.directions import filter_normalise
    from landscape.experiments.surfaces import surface_directions
    from tests.experiments.test_curvature import _problem, _signed

    cfg, params, x, y, exact = _problem("mlp")
    values, u = torch.linalg.eigh(exact)
    want = _signed(u.flip(1)[:, :2])
    names = sorted(params)
    sizes = [params[k].numel() for k in names]

    def as_params(flat):
        return {k: p.reshape(params[k].shape) for k, p in zip(names, torch.split(flat, sizes),
                                                               strict=True)}  # fmt: skip

    def flat(d):
        return torch.cat([d[k].reshape(-1) for k in names])

    h = 1e-3
    s = surface_directions(cfg, params, _Batch(x, y), SurfaceOptions(3, "train", "hessian",
                           extent=h), hessian={"dtype": "float64"})  # fmt: skip
    info = s.hessian
    assert info["converged"] and info["dtype"] == "float64" and info["batch"]["rows"] == len(y)
    assert info["eigenvalues"] == pytest.approx(values.flip(0)[:2].tolist(), rel=1e-6)
    d1, d2 = (filter_normalise(as_params(want[:, j]), params) for j in range(2))
    curvatures = [float(flat(d) @ exact @ flat(d)) for d in (d1, d2)]
    assert info["axis_curvatures"] == pytest.approx(curvatures, rel=1e-9)
    # the grid's middle row runs along d₁ (α), its middle column along d₂ (β)
    grid = torch.tensor(s.loss, dtype=torch.float64)
    for line, kappa in ((grid[1], curvatures[0]), (grid[:, 1], curvatures[1])):
        second = float(line[0] + line[2] - 2 * line[1]) / h**2
        assert second == pytest.approx(kappa, rel=1e-3)
    # the unnormalised eigenvector: its curvature is λ₁ itself
    lam1, v1 = float(values[-1]), as_params(want[:, 0])

    def loss_at(t):
        q = {k: params[k] + t * v1[k] for k in names}
        return float(F.cross_entropy(forward(cfg, q, x, fast=False), y))

    t = 1e-3
    assert (loss_at(t) + loss_at(-t) - 2 * loss_at(0.0)) / t**2 == pytest.approx(lam1, rel=1e-3)


def test_hessian_surface_is_keyed_recorded_and_curves_like_its_axis():
    """On the zoo's MLP: Hessian directions are another cache entry than random ones of the same
    seed, record their eigenvalues and axis curvatures, and the loss along the first axis near
    the centre (the training split, the Hessian on all of it) fits ½·κ₁·α² (loosely: float32
    and a trained model's higher derivatives)."""
    import numpy as np

    options = {"resolution": 5, "extent": 1e-3, "split": "train"}
    hessian = SurfaceOptions(directions="hessian", hessian_batch=10_000, **options)
    r = surface("mlp-digits", [0], options=hessian)
    assert r["cached"] is False and r["directions"] == "hessian"
    assert surface_problems(r) == []  # what Hessian directions record is declared
    info = r["hessian"]
    assert info["converged"] and info["batch"]["rows"] == 1300 and info["split"] == "train"
    lam1, lam2 = info["eigenvalues"]
    assert lam1 >= lam2 > 0
    k1, _ = info["axis_curvatures"]
    x = np.asarray(r["x"])
    fitted = 2 * np.polyfit(x, np.asarray(r["loss"][2]), 2)[0]
    assert fitted == pytest.approx(k1, rel=0.15)
    again = surface("mlp-digits", [0], options=hessian)
    assert again["cached"] is True and again["hessian"] == info
    random = surface("mlp-digits", [0], options=SurfaceOptions(**options))
    assert random["cached"] is False and random["directions"] == "random"
    assert "hessian" not in random and random["loss"] != r["loss"]
    # the sharpest axis is far sharper than a random one
    assert 2 * np.polyfit(x, np.asarray(random["loss"][2]), 2)[0] < k1 / 10
    # the default batch (512 of the 1,300 training examples) is another entry again
    other = surface("mlp-digits", [0], options=SurfaceOptions(directions="hessian", **options))
    assert other["cached"] is False and other["hessian"]["batch"]["rows"] == 512


def test_hessian_directions_are_refused_over_the_memory_budget_and_for_a_plane(monkeypatch):
    with pytest.raises(LandscapeError, match="only for a surface around one model"):
        surface("mlp-digits", [0, 1, 2], options=SurfaceOptions(directions="hessian"))
    with pytest.raises(LandscapeError, match="unknown directions"):
        surface("mlp-digits", [0], options=SurfaceOptions(directions="sharpest"))
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")
    surface("mlp-digits", [0], options=SurfaceOptions(3))  # random directions fit
    with pytest.raises(LandscapeError, match="the Hessian of 10890 parameters needs"):
        surface("mlp-digits", [0], options=SurfaceOptions(3, directions="hessian"))
