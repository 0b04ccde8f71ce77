"""The app's one way to a stored result (``state.stored_else_computed``) and the barrier memo
keyed by the request. Each test has its own empty disk cache (``tests/app/conftest.py``)."""

from __future__ import annotations

import landscape.experiments as experiments
from app.state import barriers as state
from landscape.experiments import seeds_request


def test_read_else_compute_then_read_again() -> None:
    calls, stored = [], []

    def read() -> int:
        calls.append("read")
        if not stored:
            raise state.NotCached("test")
        return stored[0]

    def compute() -> None:
        calls.append("compute")
        stored.append(42)

    assert state.stored_else_computed(read, compute) == 42
    assert calls == ["read", "compute", "read"]
    calls.clear()
    assert state.stored_else_computed(read, compute) == 42 and calls == ["read"]


def test_the_barrier_memo_is_keyed_by_the_request(monkeypatch) -> None:
    real, computed = experiments.measure_barrier, []

    def measure_barrier(request, **kw):
        computed.append((request, kw.get("progress") is not None))
        return real(request, **kw)

    monkeypatch.setattr(experiments, "measure_barrier", measure_barrier)
    state._stored_barrier.clear()
    request = seeds_request("mlp-digits", (0, 1), "naive", points=3)
    first = state.barrier(request, None, progress=lambda *a: None)
    # a miss on disk (read-only, no progress), the computation (with it), the read that memoises
    assert [p for _, p in computed] == [False, True, False]
    assert first["model"] == "mlp-digits" and first["seeds"] == [0, 1] and first["cached"]
    computed.clear()
    twin = seeds_request("mlp-digits", [0, 1], "naive", points=3)  # another, equal request
    assert state.barrier(twin, None) == first and computed == []
    other = seeds_request("mlp-digits", (0, 1), "naive", points=4)
    assert state.barrier(other, None)["lambdas"] != first["lambdas"] and computed
