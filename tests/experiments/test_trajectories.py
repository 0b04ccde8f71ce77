"""Training paths on a surface's plane: exact float64 projections (a path in the plane comes back
with its coordinates and error 0; one off it with its known error), a path's own plane, and the
paths on a surface of mlp-digits."""

from __future__ import annotations

import math

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.experiments.trajectories import flat, path_directions, project_path
from tests.experiments.test_result_fields import surface_problems

SHAPES = {"a.W": (4, 3), "b": (5,), "c.W": (2, 2, 3)}


def _params(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {k: torch.randn(s, generator=gen, dtype=torch.float64) for k, s in SHAPES.items()}


def _combine(origin, terms):
    return {k: origin[k] + sum(c * d[k] for c, d in terms) for k in origin}


def _normal(d1, d2, seed: int):
    """A unit vector orthogonal to d1 and d2 (Gram–Schmidt, float64)."""
    names = sorted(d1)
    q, _ = torch.linalg.qr(torch.stack([flat(d1, names), flat(d2, names)], dim=1))
    n = flat(_params(seed), names)
    n = n - q @ (q.T @ n)
    n = n / n.norm()
    parts = torch.split(n, [math.prod(SHAPES[k]) for k in names])
    return {k: p.reshape(SHAPES[k]) for k, p in zip(names, parts, strict=True)}


# coordinates of a path: its start far out, its end at the origin
COORDS = [(2.0, -1.5), (1.2, -0.4), (0.5, 0.3), (0.1, 0.05), (0.0, 0.0)]


def test_a_path_in_the_plane_comes_back_exactly():
    origin, d1, d2 = _params(0), _params(1), _params(2)  # d1 and d2 not orthogonal
    points = [_combine(origin, [(a, d1), (b, d2)]) for a, b in COORDS]
    got = project_path(points, origin, d1, d2)
    for (a, b), x, y in zip(COORDS, got["x"], got["y"], strict=True):
        assert x == pytest.approx(a, abs=1e-12) and y == pytest.approx(b, abs=1e-12)
    assert max(got["errors"]) <= 1e-10 and got["error"] <= 1e-10
    assert got["errors"][-1] == 0.0 and got["distances"][-1] == 0.0  # the origin itself


def test_a_path_off_the_plane_has_its_known_error():
    origin, d1, d2 = _params(0), _params(1), _params(2)
    n = _normal(d1, d2, 3)
    offs = [1.0, -0.5, 2.0, 0.0, 0.0]
    points = [_combine(origin, [(a, d1), (b, d2), (c, n)])
              for (a, b), c in zip(COORDS, offs, strict=True)]  # fmt: skip
    got = project_path(points, origin, d1, d2)
    names = sorted(origin)
    inside = [float(flat(_combine(origin, [(a, d1), (b, d2)]), names).sub(flat(origin, names))
                    .norm()) for a, b in COORDS]  # fmt: skip
    for k, ((a, b), c) in enumerate(zip(COORDS, offs, strict=True)):
        assert got["x"][k] == pytest.approx(a, abs=1e-12)
        assert got["y"][k] == pytest.approx(b, abs=1e-12)
        whole = math.hypot(inside[k], c)
        assert got["errors"][k] == pytest.approx(abs(c) / whole if whole else 0.0, abs=1e-12)
    whole = sum(i * i + c * c for i, c in zip(inside, offs, strict=True))
    overall = math.sqrt(sum(c * c for c in offs) / whole)
    assert got["error"] == pytest.approx(overall, abs=1e-12) and got["error"] > 0.1


def test_directions_on_one_line_span_no_plane():
    origin, d1 = _params(0), _params(1)
    with pytest.raises(LandscapeError, match="one line"):
        project_path([origin], origin, d1, {k: 2 * v for k, v in d1.items()})


def test_a_planar_path_lies_in_its_own_plane():
    origin, d1, d2 = _params(0), _params(1), _params(2)
    points = [_combine(origin, [(a, d1), (b, d2)]) for a, b in COORDS]
    u1, u2, info = path_directions(points, origin)
    got = project_path(points, origin, u1, u2)
    assert max(got["errors"]) <= 1e-10
    assert sum(info["explained"]) == pytest.approx(1.0, abs=1e-12)
    reach = max(math.hypot(x, y) for x, y in zip(got["x"], got["y"], strict=True))
    assert reach == pytest.approx(1.0, abs=1e-12)  # scaled to the farthest point
    assert got["x"][0] >= 0 and got["y"][0] >= 0  # the start's coordinates are non-negative
    names = sorted(origin)
    assert float(flat(u1, names) @ flat(u2, names)) == pytest.approx(0.0, abs=1e-9)


def test_a_path_off_every_plane_is_no_plane_of_its_own():
    origin, d1 = _params(0), _params(1)
    with pytest.raises(LandscapeError, match="spans no plane"):
        path_directions([_combine(origin, [(t, d1)]) for t in (2.0, 1.0, 0.0)], origin)


def test_paths_on_a_surface_of_mlp_digits(tmp_path, monkeypatch):
    """The plane of seed 0's path: its own path lies near it, ends at the centre, and every
    snapshot's projection is the one the library's projection gives; seed 1's path, trained
    apart, lies far outside it."""
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    from landscape.experiments.surfaces import SurfaceOptions, surface

    options = SurfaceOptions(3, directions="trajectory", extent=1.2, trajectories=[0, 1],
                             every=250)  # fmt: skip
    out = surface("mlp-digits", [0], options=options)
    assert surface_problems(out) == []  # the paths and their plane are what is declared
    own, other = out["trajectories"]
    assert out["trajectory"]["steps"] == own["steps"] == [0, 250, 500, 750, 1000]
    assert sum(out["trajectory"]["explained"]) <= 1.0
    assert own["errors"][-1] == 0.0 and own["x"][-1] == own["y"][-1] == 0.0  # the centre
    assert own["error"] < 0.5 < other["error"] <= 1.0
    assert max(math.hypot(x, y) for x, y in zip(own["x"], own["y"], strict=True)) \
        == pytest.approx(1.0, abs=1e-6)  # fmt: skip
    again = surface("mlp-digits", [0], options=options)
    assert again["cached"] and again["trajectories"] == [{**t, "cached": True}
                                                         for t in out["trajectories"]]  # fmt: skip
