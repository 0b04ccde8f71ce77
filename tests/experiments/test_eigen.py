import math

import pytest
import torch

from landscape.experiments.eigen.angles import angle_summary, det_sign, eigenangles, haar_orthogonal


def _block_rotation(thetas: list[float]) -> torch.Tensor:
    g = torch.zeros(2 * len(thetas), 2 * len(thetas), dtype=torch.float64)
    for k, t in enumerate(thetas):
        c, s = math.cos(t), math.sin(t)
        g[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = torch.tensor(
            [[c, -s], [s, c]], dtype=torch.float64
        )
    return g


def test_identity_has_zero_angles():
    angles = eigenangles(torch.eye(7))
    assert angles.dtype == torch.float64
    assert angles.abs().max() < 1e-12
    s = angle_summary(angles)
    assert s == {"share_small": 1.0, "median_abs": 0.0, "mean_abs": 0.0, "n": 7, "small": 0.3}


def test_planted_block_rotation_gives_its_angles():
    thetas = [0.1, 0.7, 2.0, 3.0]
    g = _block_rotation(thetas)
    q = haar_orthogonal(8, seed=1)
    angles = eigenangles(q @ g @ q.T)  # a change of basis keeps the spectrum
    expected = torch.tensor(sorted(thetas + [-t for t in thetas]), dtype=torch.float64)
    assert (angles - expected).abs().max() < 1e-10
    s = angle_summary(angles)
    assert s["share_small"] == 0.25 and s["n"] == 8
    assert s["mean_abs"] == pytest.approx(sum(thetas) / 4)


def test_reflection_angle_is_plus_pi():
    g = torch.diag(torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=torch.float64))
    angles = eigenangles(g)
    assert torch.equal(angles, torch.tensor([0.0, math.pi, math.pi, math.pi], dtype=torch.float64))
    assert det_sign(g) == -1
    assert (angles > -math.pi).all() and (angles <= math.pi).all()


@pytest.mark.parametrize("proper", [False, True], ids=["O", "SO"])
def test_haar_is_orthogonal_and_seeded(proper):
    g = haar_orthogonal(16, seed=3, proper=proper)
    assert g.dtype == torch.float64
    assert (g.T @ g - torch.eye(16, dtype=torch.float64)).abs().max() < 1e-12
    assert torch.equal(g, haar_orthogonal(16, seed=3, proper=proper))
    if proper:
        assert det_sign(g) == 1
    else:
        assert det_sign(g) in (-1, 1)


def test_haar_determinant_takes_both_signs():
    assert {det_sign(haar_orthogonal(5, seed=s)) for s in range(20)} == {-1, 1}


def test_haar_angles_spread_like_a_random_rotation():
    s = angle_summary(eigenangles(haar_orthogonal(256, seed=0)))
    assert s["n"] == 256
    assert abs(s["median_abs"] - math.pi / 2) < 0.25
    assert s["share_small"] < 0.2  # uniform angles would give 0.3/π ≈ 0.095


@pytest.mark.parametrize("d", [5, 6, 33, 64])
def test_the_symmetric_route_gives_the_angles_of_a_haar_draw(d):
    """Odd and even widths, both determinants: the same angles as the general eigenproblem,
    the real eigenvalues ±1 at 0 and π exactly."""
    from landscape.experiments.eigen.angles import orthogonal_eigenangles

    dets = set()
    for seed in range(8):
        q = haar_orthogonal(d, seed=seed)
        dets.add(det_sign(q))
        fast = orthogonal_eigenangles(q)
        assert fast.shape == (d,)
        assert torch.allclose(fast, eigenangles(q), atol=1e-9, rtol=0)
    assert dets == {-1, 1}
