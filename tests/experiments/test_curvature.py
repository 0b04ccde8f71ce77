"""Curvature along a path: Hessian-vector products, Lanczos and Hutchinson against exact
Hessians (float64) and a known quadratic."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from landscape.errors import LandscapeError
from landscape.experiments.curvature import (
    CurvatureOptions,
    CurvatureRequest,
    HessianProducts,
    hutchinson_trace,
    parameter_blocks,
    top_eigenvalues,
)
from landscape.experiments.hessian import OUTSIDE_BLOCKS, top_eigenpairs
from landscape.models import forward, init_params
from landscape.sources import Source
from tests.conftest import tiny_config, tiny_inputs


def _problem(arch: str, rows: int = 4):
    """A tiny float64 model, a batch, and its exact Hessian over the sorted parameters."""
    cfg = tiny_config(arch)
    params = {k: v.double() for k, v in init_params(cfg, 0).items()}
    x = tiny_inputs(cfg, rows)
    if x.is_floating_point():
        x = x.double()
    shape = (rows, cfg.n_ctx) if arch == "gpt" else (rows,)
    y = torch.randint(0, cfg.n_out, shape, generator=torch.Generator().manual_seed(1))
    names = sorted(params)
    sizes = [params[k].numel() for k in names]

    def loss(flat: torch.Tensor) -> torch.Tensor:
        parts = torch.split(flat, sizes)
        q = {k: p.reshape(params[k].shape) for k, p in zip(names, parts, strict=True)}
        logits = forward(cfg, q, x, fast=False)
        return F.cross_entropy(logits.reshape(y.numel(), -1), y.reshape(-1))

    flat = torch.cat([params[k].reshape(-1) for k in names])
    exact = torch.autograd.functional.hessian(loss, flat, vectorize=True)
    return cfg, params, x, y, exact


@pytest.fixture(scope="module", params=["mlp", "gpt"])
def problem(request):
    return _problem(request.param)


def test_top_eigenvalues_match_the_exact_hessian(problem):
    cfg, params, x, y, exact = problem
    h = HessianProducts(cfg, params, x, y, chunk_rows=len(y))
    values, converged = top_eigenvalues(h.matvec(), h.size(), 3, seed=0)
    want = torch.linalg.eigvalsh(exact).flip(0)[:3].tolist()
    assert converged
    assert values == pytest.approx(want, rel=1e-6)
    assert h.loss == pytest.approx(float(F.cross_entropy(
        forward(cfg, params, x, fast=False).reshape(y.numel(), -1), y.reshape(-1))), rel=1e-12)


def _signed(u: torch.Tensor) -> torch.Tensor:
    """Each column signed so that its entry of largest magnitude is positive."""
    at = u.abs().argmax(0)
    return u * u[at, torch.arange(u.shape[1])].sign()


def test_top_eigenvectors_match_the_exact_hessian(problem):
    """Eigenpairs by Lanczos against ``eigh`` of the exact Hessian: the values within 1e-6
    relative, the vectors equal once both are signed by the convention (largest-magnitude entry
    positive), whatever Lanczos starts from."""
    cfg, params, x, y, exact = problem
    h = HessianProducts(cfg, params, x, y, chunk_rows=len(y))
    values, u = torch.linalg.eigh(exact)
    want_values, want = values.flip(0)[:2], _signed(u.flip(1)[:, :2])
    for seed in (0, 7):
        got_values, vectors, converged = top_eigenpairs(h.matvec(), h.size(), 2, seed=seed)
        assert converged and vectors.shape == (h.size(), 2)
        assert got_values == pytest.approx(want_values.tolist(), rel=1e-6)
        assert np.abs(vectors.T @ want.numpy()) == pytest.approx(np.eye(2), abs=1e-8)
        torch.testing.assert_close(torch.from_numpy(vectors), want, rtol=0, atol=1e-6)
        top = np.abs(vectors).argmax(0)
        assert (vectors[top, [0, 1]] > 0).all()
    # a flat vector and its per-parameter tensors are one another
    d = h.unflatten(vectors[:, 0])
    assert {k: tuple(t.shape) for k, t in d.items()} == {k: tuple(params[k].shape) for k in d}
    assert torch.equal(h.flatten(d), torch.from_numpy(vectors[:, 0]))


def test_products_in_chunks_equal_one_pass(problem):
    """A batch cut into chunks (each product recomputes its graph) gives H·v of the whole
    batch's mean loss, as does one kept graph."""
    cfg, params, x, y, exact = problem
    v = torch.randn(exact.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for rows in (1, 3, len(y)):
        h = HessianProducts(cfg, params, x, y, chunk_rows=rows)
        assert torch.allclose(h.product(v), exact @ v, rtol=1e-10, atol=1e-10), rows


def test_block_eigenvalue_is_the_diagonal_blocks(problem):
    cfg, params, x, y, exact = problem
    h = HessianProducts(cfg, params, x, y, chunk_rows=len(y))
    offsets, at = {}, 0
    for k in h.names:
        offsets[k] = range(at, at + params[k].numel())
        at += params[k].numel()
    for block, names in parameter_blocks(h.names).items():
        idx = torch.tensor([i for k in names for i in offsets[k]])
        want = float(torch.linalg.eigvalsh(exact[idx][:, idx])[-1])
        (top,), ok = top_eigenvalues(h.matvec(names), h.size(names), 1)
        assert ok and top == pytest.approx(want, rel=1e-6), block


def test_trace_estimate_is_within_its_error_of_the_exact_trace(problem):
    cfg, params, x, y, exact = problem
    h = HessianProducts(cfg, params, x, y, chunk_rows=len(y))
    trace, se = hutchinson_trace(h.matvec(), h.size(), 64, seed=0)
    assert se > 0
    assert abs(trace - float(exact.trace())) < 3 * se
    # the same seed draws the same probes
    assert hutchinson_trace(h.matvec(), h.size(), 64, seed=0) == (trace, se)


def _quadratic(spectrum: list[float], seed: int = 0):
    """L(θ) = ½ θᵀAθ with A = Q·diag(spectrum)·Qᵀ: its Hessian-vector product by double
    backward, and A."""
    n = len(spectrum)
    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    a = q @ torch.diag(torch.tensor(spectrum, dtype=torch.float64)) @ q.T
    a = (a + a.T) / 2
    theta = torch.randn(n, generator=gen, dtype=torch.float64, requires_grad=True)

    def matvec(v: np.ndarray) -> np.ndarray:
        (g,) = torch.autograd.grad(0.5 * theta @ a @ theta, theta, create_graph=True)
        (hv,) = torch.autograd.grad(g @ torch.from_numpy(np.asarray(v).reshape(-1)), theta)
        return hv.detach().numpy()

    return matvec, a


def test_known_quadratic_is_exact():
    spectrum = [9.0, 5.0, 4.5, 2.0, -7.0] + [0.01 * i for i in range(45)]
    matvec, a = _quadratic(spectrum)
    values, converged = top_eigenvalues(matvec, len(spectrum), 4, seed=3)
    assert converged
    assert values == pytest.approx([9.0, 5.0, 4.5, 2.0], rel=1e-12)  # largest, not -7
    trace, se = hutchinson_trace(matvec, len(spectrum), 200, seed=1)
    assert abs(trace - sum(spectrum)) < 3 * se


def test_hutchinson_is_exact_on_a_diagonal_hessian():
    d = np.array([3.0, -1.0, 0.5, 2.0])
    trace, se = hutchinson_trace(lambda v: d * np.asarray(v).reshape(-1), 4, 8)
    assert trace == pytest.approx(4.5, abs=1e-15) and se == 0.0


def test_parameter_blocks_are_the_blocks_then_the_rest():
    names = ["W_E", "blocks.10.mlp.W_in", "blocks.2.attn.W_Q", "blocks.2.ln1.w", "ln_final.w"]
    assert parameter_blocks(names) == {
        "blocks.2": ["blocks.2.attn.W_Q", "blocks.2.ln1.w"],
        "blocks.10": ["blocks.10.mlp.W_in"],
        OUTSIDE_BLOCKS: ["W_E", "ln_final.w"],
    }


@pytest.mark.parametrize(
    "options,match",
    [
        pytest.param({"top_k": 0}, "--top-k", id="top-k"),
        pytest.param({"points": 1}, "--points", id="points"),
        pytest.param({"probes": -1}, "--probes", id="probes"),
        pytest.param({"split": "val"}, "split", id="split"),
        pytest.param({"dtype": "float16"}, "dtype", id="dtype"),
    ],
)
def test_options_are_refused_in_one_line(options, match):
    with pytest.raises(LandscapeError, match=match):
        CurvatureOptions(**options)


def test_lambdas_default_to_the_endpoints_and_the_midpoint():
    assert CurvatureOptions().lambdas().tolist() == [0.0, 0.5, 1.0]
    assert not math.isnan(CurvatureOptions(points=5).lambdas()[2])


def test_a_request_reads_its_options_and_refuses_a_bad_group():
    a, b = Source("mlp-digits", 0), Source("mlp-digits", 1)
    req = CurvatureRequest(a, b, "naive", "perm", options={"top_k": 2})
    assert req.options == CurvatureOptions(top_k=2) and req.methods == ("naive",)
    assert CurvatureRequest(a, b).methods == ("naive", "weight")
    with pytest.raises(LandscapeError, match="unknown group"):
        CurvatureRequest(a, b, "weight", "rotations")


def test_a_parameter_the_loss_does_not_read_has_no_curvature(problem):
    cfg, params, x, y, exact = problem
    h = HessianProducts(cfg, {**params, "unread": torch.ones(3, dtype=torch.float64)}, x, y, 2)
    v = torch.ones(h.size(), dtype=torch.float64)
    hv = h.product(v)
    at = sum(params[k].numel() for k in sorted(params) if k < "unread")
    assert hv[at : at + 3].tolist() == [0.0, 0.0, 0.0]
    assert h.product(torch.ones(3, dtype=torch.float64), ["unread"]).tolist() == [0.0] * 3
