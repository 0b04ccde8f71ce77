import math

import pytest
import torch

from landscape.experiments.basins import (
    BarrierCurve,
    TriangleResult,
    barrier_from_curve,
    barycentric_grid,
)
from landscape.experiments.context import RunContext
from landscape.experiments.evaluation import (
    EvalOptions,
    barrier_curve,
    evaluate_path,
    evaluate_triangle,
    interpolate,
)
from landscape.models import forward, init_params, loss_and_accuracy
from tests.conftest import tiny_config, tiny_inputs

ARCHS = [pytest.param(a, id=a) for a in ("mlp", "vit", "gpt")]


def _data(cfg, n: int = 10, seed: int = 0):
    x = tiny_inputs(cfg, batch=n, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    shape = (n, cfg.n_ctx) if cfg.arch == "gpt" else (n,)
    return x, torch.randint(0, cfg.n_out, shape, generator=gen)


def _loop(cfg, a, b, x, y, lambdas):
    """Reference: one model per λ, the whole data set in one batch."""
    out = []
    for lam in lambdas:
        p = {k: lam * a[k] + (1 - lam) * b[k] for k in a}
        loss, acc = loss_and_accuracy(cfg, forward(cfg, p, x), y)
        out.append((float(loss), float(acc)))
    return torch.tensor(out, dtype=torch.float64).T


def test_interpolate_convention_lambda_one_is_a(gen):
    cfg = tiny_config("vit")
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    stacked = interpolate(a, b, [1.0, 0.25, 0.0])
    for k in a:
        assert stacked[k].shape == (3, *a[k].shape)
        assert torch.equal(stacked[k][0], a[k])
        assert torch.equal(stacked[k][2], b[k])
        assert torch.allclose(stacked[k][1], 0.25 * a[k] + 0.75 * b[k])


@pytest.mark.parametrize("arch", ARCHS)
def test_vmapped_path_matches_per_lambda_loop(arch):
    cfg = tiny_config(arch)
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    x, y = _data(cfg)
    lambdas = [0.0, 0.2, 0.5, 0.7, 1.0]
    # batches of 4 over 10 samples (a ragged last batch) and λ in chunks of 2
    loss, acc = evaluate_path(cfg, a, b, x, y, lambdas, EvalOptions(4, chunk=2))
    ref_loss, ref_acc = _loop(cfg, a, b, x, y, lambdas)
    assert loss.dtype == torch.float64 and loss.shape == (5,)
    assert (loss - ref_loss).abs().max() < 1e-6
    assert (acc - ref_acc).abs().max() < 1e-6
    # endpoints are the models themselves
    la, aa = loss_and_accuracy(cfg, forward(cfg, a, x), y)
    lb, ab = loss_and_accuracy(cfg, forward(cfg, b, x), y)
    assert loss[-1] == pytest.approx(float(la), abs=1e-6) and acc[-1] == pytest.approx(float(aa))
    assert loss[0] == pytest.approx(float(lb), abs=1e-6) and acc[0] == pytest.approx(float(ab))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("chunk", [1, 3], ids=["plain", "vmap"])
@pytest.mark.parametrize("n_out", [5, 20], ids=["narrow", "wide"])
def test_path_matches_loop_for_every_pass_and_loss_layout(arch, chunk, n_out):
    cfg = tiny_config(arch).replace(n_out=n_out)
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    x, y = _data(cfg, n=7)
    lambdas = [0.0, 0.3, 0.6, 1.0]
    loss, acc = evaluate_path(cfg, a, b, x, y, lambdas, EvalOptions(5, chunk=chunk))
    ref_loss, ref_acc = _loop(cfg, a, b, x, y, lambdas)
    assert (loss - ref_loss).abs().max() < 1e-6
    assert (acc - ref_acc).abs().max() < 1e-6


@pytest.mark.parametrize("chunk", [1, 2], ids=["plain", "vmap"])
def test_progress_reaches_the_total_in_order(chunk):
    cfg = tiny_config("vit")
    a, b = init_params(cfg, 0), init_params(cfg, 1)
    x, y = _data(cfg)
    calls = []
    heard = RunContext(progress=lambda s, d, t: calls.append((d, t)))
    evaluate_path(cfg, a, b, x, y, 5, EvalOptions(4, chunk=chunk), context=heard)
    done = [d for d, _ in calls]
    assert done == sorted(done) and calls[-1] == (15, 15)  # 5 models × 3 batches


@pytest.mark.parametrize("arch", ARCHS)
def test_barrier_of_a_model_with_itself_is_zero(arch):
    cfg = tiny_config(arch)
    a = init_params(cfg, 3)
    x, y = _data(cfg)
    curve = barrier_curve(cfg, a, a, x, y, lambdas=7, options=EvalOptions(3))
    assert abs(curve.barrier_loss) < 1e-6
    assert abs(curve.barrier_accuracy) < 1e-6
    assert curve.endpoint_loss[0] == curve.endpoint_loss[1]


def test_float64_models_and_progress(gen):
    cfg = tiny_config("mlp")
    a, b = init_params(cfg, 0, torch.float64), init_params(cfg, 1, torch.float64)
    x, y = _data(cfg)
    calls = []
    heard = RunContext(progress=lambda s, d, t: calls.append((d, t)))
    loss, _ = evaluate_path(cfg, a, b, x, y, 4, EvalOptions(3, chunk=3), context=heard)
    ref_loss, _ = _loop(cfg, a, b, x.double(), y, torch.linspace(0, 1, 4, dtype=torch.float64))
    assert (loss - ref_loss).abs().max() < 1e-12
    assert calls[-1] == (16, 16) and len(calls) == 8  # 2 chunks × 4 batches


def test_barrier_from_curve_definition():
    # unsorted grid; chord from (λ=0: L_B=1, acc_B=0.9) to (λ=1: L_A=2, acc_A=0.8)
    curve = barrier_from_curve([1.0, 0.5, 0.0, 0.25], [2.0, 3.0, 1.0, 1.1], [0.8, 0.5, 0.9, 0.9])
    assert curve.lambdas == [0.0, 0.25, 0.5, 1.0]
    assert curve.barrier_loss == pytest.approx(3.0 - 1.5)
    assert curve.lambda_peak_loss == 0.5
    assert curve.barrier_accuracy == pytest.approx(0.85 - 0.5)
    assert curve.lambda_peak_accuracy == 0.5
    assert curve.endpoint_loss == (2.0, 1.0)
    assert curve.endpoint_accuracy == (0.8, 0.9)


def test_barrier_is_zero_for_a_convex_curve():
    lam = torch.linspace(0, 1, 11, dtype=torch.float64)
    curve = barrier_from_curve(lam, 1 + lam - lam * (1 - lam), 0.5 + 0.0 * lam)
    assert curve.barrier_loss == 0.0 and curve.barrier_accuracy == 0.0


@pytest.mark.parametrize("missing", [0.0, 1.0], ids=["no-B", "no-A"])
def test_barrier_needs_both_endpoints(missing):
    lam = [v for v in (0.0, 0.5, 1.0) if v != missing]
    with pytest.raises(ValueError, match=f"λ = {missing:g}"):
        barrier_from_curve(lam, [1.0, 1.0], [1.0, 1.0])


def test_barrier_curve_json_round_trip():
    curve = barrier_from_curve([0.0, 1 / 3, 1.0], [1.0, 2.0 / 3, 1.5], [0.9, 0.1, 0.7])
    back = BarrierCurve.from_json(curve.to_json())
    assert back == curve


@pytest.mark.parametrize("r", [1, 2, 5, 10])
def test_barycentric_grid(r):
    g = barycentric_grid(r)
    assert g.shape == ((r + 1) * (r + 2) // 2, 3)
    assert torch.allclose(g.sum(1), torch.ones(len(g), dtype=torch.float64))
    assert (g >= 0).all()
    assert len({tuple(round(v * r) for v in row) for row in g.tolist()}) == len(g)
    for corner in torch.eye(3, dtype=torch.float64):
        assert (g == corner).all(1).sum() == 1
    assert torch.equal(g[0], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))


def test_barycentric_grid_rejects_zero():
    with pytest.raises(ValueError):
        barycentric_grid(0)


@pytest.mark.parametrize("arch", ARCHS)
def test_triangle_matches_loop_and_round_trips(arch):
    cfg = tiny_config(arch)
    pa, pb, pc = (init_params(cfg, s) for s in (0, 1, 2))
    x, y = _data(cfg)
    tri = evaluate_triangle(cfg, (pa, pb, pc), x, y, 3, EvalOptions(4, chunk=4))
    assert len(tri.loss) == 10 and tri.resolution == 3
    for w, loss, acc in zip(tri.points, tri.loss, tri.accuracy, strict=True):
        p = {k: w[0] * pa[k] + w[1] * pb[k] + w[2] * pc[k] for k in pa}
        ref_loss, ref_acc = loss_and_accuracy(cfg, forward(cfg, p, x), y)
        assert loss == pytest.approx(float(ref_loss), abs=1e-6)
        assert acc == pytest.approx(float(ref_acc), abs=1e-6)
    for c, params in enumerate((pa, pb, pc)):
        ref_loss, _ = loss_and_accuracy(cfg, forward(cfg, params, x), y)
        assert tri.corner_loss[c] == pytest.approx(float(ref_loss), abs=1e-6)
    f64 = torch.float64
    chord = torch.tensor(tri.points, dtype=f64) @ torch.tensor(tri.corner_loss, dtype=f64)
    excess = torch.tensor(tri.loss, dtype=f64) - chord
    assert tri.basin_fraction == pytest.approx(float((excess <= tri.tol).double().mean()))
    assert tri.max_excess_loss == pytest.approx(float(excess.max()))
    assert TriangleResult.from_json(tri.to_json()) == tri


def test_triangle_of_one_model_is_all_basin():
    cfg = tiny_config("mlp")
    a = init_params(cfg, 0)
    x, y = _data(cfg)
    tri = evaluate_triangle(cfg, (a, a, a), x, y, resolution=4, tol=1e-6)
    assert tri.basin_fraction == 1.0
    assert math.isclose(max(tri.loss), min(tri.loss), abs_tol=1e-6)


def test_cpu_slices_give_every_matrix_enough_positions_and_leave_the_zoo_as_it_was():
    from landscape.experiments.evaluation import (
        CPU_SLICE_ELEMENTS,
        MIN_SLICE_POSITIONS,
        _activation_elements,
        slice_rows,
    )
    from landscape.models import ModelConfig
    from landscape.models.zoo import ZOO

    cpu = torch.device("cpu")
    # a large-vocabulary model on short windows: the activation rule alone asks for one row
    llm = ModelConfig("gpt", d_model=64, d_mlp=128, n_layers=1, n_out=49152, n_heads=2,
                      d_head=32, d_vocab=49152, n_ctx=8192)  # fmt: skip
    assert CPU_SLICE_ELEMENTS // _activation_elements(llm, 64) == 0
    assert slice_rows(llm, 16, cpu, positions=64) * 64 >= MIN_SLICE_POSITIONS
    assert slice_rows(llm, 16, cpu, positions=64) == 8  # two equal slices, no short remainder
    assert slice_rows(llm, 3, cpu, positions=64) == 3  # never more rows than the batch
    assert slice_rows(llm, 16, torch.device("cuda"), positions=64) == 16
    for name, model in ZOO.items():  # the zoo's slices come from the activation rule alone
        cfg = model.config
        most = max(1, CPU_SLICE_ELEMENTS // _activation_elements(cfg))
        want = -(-512 // -(-512 // most))
        assert slice_rows(cfg, 512, cpu) == want, name
