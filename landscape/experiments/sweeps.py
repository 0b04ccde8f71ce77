"""Sweeps beyond one process: the cells of a table computed as Ray tasks.

``executor="local"`` (the default) computes every cell in this process. ``executor="ray"``
sends each cell (one pair × method × group × space of a barrier table) to a Ray worker, which
measures it through the one barrier pipeline (``experiments.measure_barrier``, its own machine's
cache for checkpoints and matchings) and returns the barrier's cache entry. The driver stores
every entry in its own content-addressed cache, then assembles the table there exactly as the
serial run does, now reading every cell from the cache: the same table (bit for bit against a
serial run on one thread, as each worker runs; float32 rounds differently on other thread
counts), and a rerun on this machine reads it without Ray. A task whose worker dies is
retried by Ray (``MAX_RETRIES``).

``address`` connects to a running cluster (``ray start --head``, or ``auto``); without it a
local one is started for the sweep with one worker per core and shut down after it. Ray is an
optional dependency (``pip install 'landscape[ray]'``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from landscape.errors import LandscapeError
from landscape.progress import Progress, tell
from landscape.store.cache import Cache

EXECUTORS = ("local", "ray")
MAX_RETRIES = 3  # attempts after a worker dies mid-task


def check_executor(executor: str, address: str | None = None) -> None:
    """Refuse an unknown executor, an address without Ray, or Ray when it is not installed."""
    if executor not in EXECUTORS:
        raise LandscapeError(f"unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise LandscapeError("--address connects to a Ray cluster: use it with --executor ray")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise LandscapeError(
                "--executor ray needs Ray: pip install 'landscape[ray]' (or pip install ray)"
            ) from None


@contextlib.contextmanager
def _cluster(address: str | None) -> Iterator[Any]:
    import ray

    started = False
    if not ray.is_initialized():
        from landscape.threads import cores

        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": cores()}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        except Exception as e:  # noqa: BLE001 - a cluster that cannot be reached: one line
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
            raise LandscapeError(f"cannot start or reach {where}: {e}") from None
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def _barrier_cell(model: str, seeds: tuple[int, int], method: str, group: str, space: str,
                  points: int, split: str) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """On a worker: one barrier measured, its cache key and meta (a barrier entry holds no
    tensors). One torch thread: the cluster runs a task per core."""
    from landscape.experiments.runs import measure_barrier
    from landscape.sources import Source

    run = measure_barrier(Source(model, seeds[0]), Source(model, seeds[1]), method, group,
                          points=points, split=split, space=space, threads=1)  # fmt: skip
    return run.key, run.entry


def barrier_cells(
    model: str,
    cells: Sequence[tuple[tuple[int, int], str, str, str]],
    *,
    points: int,
    split: str,
    address: str | None = None,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> int:
    """Compute the barrier of every ``(seeds, method, group, space)`` cell of ``model`` on Ray
    and store each entry in ``cache`` (this machine's). Returns how many were stored. A cell a
    worker finds in its own cache costs it a lookup."""
    cache = cache or Cache()
    todo = list(cells)
    if not todo:
        return 0
    with _cluster(address) as ray:
        task = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False, num_cpus=1)(
            _barrier_cell
        )
        pending = {
            task.remote(model, tuple(seeds), method, group, space, points, split): i
            for i, (seeds, method, group, space) in enumerate(todo)
        }
        done = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                pending.pop(ref)
                try:
                    key, meta = ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the cell's own error, as one line
                    cause = e.cause if isinstance(e.cause, Exception) else e
                    raise LandscapeError(f"a table cell failed on a Ray worker: {cause}") from None
                cache.put("barrier", key, {}, meta)
                done += 1
                tell(progress, "cells", done, len(todo))
    return len(todo)
