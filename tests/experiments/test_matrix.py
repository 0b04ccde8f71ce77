"""The all-pairs barrier matrix: symmetric, 0 on the diagonal, each cell the pair's barrier."""

from __future__ import annotations

import pytest

from landscape.errors import LandscapeError
from landscape.experiments import RunContext, barrier
from landscape.experiments.barriers.matrix import MatrixOptions, barrier_matrix
from landscape.sources.zoo import available_seeds

SEEDS = [0, 1, 2]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    if len(available_seeds("mlp-digits")) < len(SEEDS):
        pytest.skip("the shipped zoo has fewer than 3 mlp-digits seeds")


@pytest.mark.parametrize("method", ["naive", "weight"])
def test_matrix_is_symmetric_zero_on_the_diagonal_and_each_cell_is_the_barrier(method):
    stages = []
    m = barrier_matrix(
        "mlp-digits",
        SEEDS,
        method,
        "perm",
        MatrixOptions(points=5),
        context=RunContext(progress=lambda stage, done, total: stages.append(done / total)),
    )
    assert len(m["pairs"]) == 3 and stages[-1] == pytest.approx(1.0)
    for key in ("barrier_loss", "barrier_accuracy"):
        z = m[key]
        assert [z[i][i] for i in range(3)] == [0.0, 0.0, 0.0]
        assert all(z[i][j] == z[j][i] for i in range(3) for j in range(3))
    for i, a in enumerate(SEEDS):
        for j, b in enumerate(SEEDS[i + 1 :], start=i + 1):
            one = barrier("mlp-digits", (a, b), method, "perm", points=5)
            assert one["cached"]  # the matrix measured it through the same cached path
            assert m["barrier_loss"][i][j] == one["barrier_loss"]
            assert m["barrier_accuracy"][i][j] == one["barrier_accuracy"]
            assert m["pairs"][i + j - 1]["cache_key"] == one["cache_key"] != ""
    assert m["barrier_loss"][0][1] > 0  # naive and weight matching of these seeds: a barrier


@pytest.mark.parametrize("seeds", [[0], [1, 1, 2]], ids=["one seed", "repeated seed"])
def test_matrix_refuses_fewer_than_two_distinct_seeds(seeds):
    with pytest.raises(LandscapeError, match="seed"):
        barrier_matrix("mlp-digits", seeds, "naive", "perm", MatrixOptions(points=5))
