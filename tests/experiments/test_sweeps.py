"""Sweeps on Ray: the same table as the serial run, a killed worker retried, clear refusals."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from landscape.errors import LandscapeError
from landscape.experiments import RunContext, TableOptions, table
from landscape.experiments.sweeps import Recording, check_executor, store
from landscape.store.cache import Cache

ARGS = {"pairs": 1, "points": 5}  # the table's pairs and points


def _table(threads: int | None = None, **options) -> dict:
    pairs = ARGS["pairs"]
    given = TableOptions(points=ARGS["points"], **options)
    return table("mlp-digits", pairs, given, context=RunContext(threads=threads))


def _strip(result):  # times differ between runs; everything measured must not
    return [{k: v for k, v in r.items() if k != "matching_seconds"} for r in result["rows"]]


def _kill_one_cell(stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first Ray worker seen running a table cell (its process title)."""
    while not stop.is_set() and not killed:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"ray::_barrier_cell" in cmd:
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
                return
        time.sleep(0.02)


def test_refusals():
    with pytest.raises(LandscapeError, match="unknown executor"):
        check_executor("dask")
    with pytest.raises(LandscapeError, match="--executor ray"):
        check_executor("local", "auto")


def test_a_workers_cache_sends_back_the_entries_of_its_kinds(tmp_path):
    """What a unit read or computed of the kinds it names, with whether it was a hit; the
    driver stores each entry it does not hold."""
    worker = tmp_path / "worker"
    Cache(worker).get_or_compute("barrier", {"cell": 1}, lambda: ({}, {"loss": 1.0}))
    cache = Recording(["barrier"], worker)
    cache.get_or_compute("barrier", {"cell": 1}, lambda: pytest.fail("it is cached"))
    cache.get_or_compute("barrier", {"cell": 2}, lambda: ({}, {"loss": 2.0}))
    cache.get_or_compute("matching", {"pair": 1}, lambda: ({}, {}))  # not a kind it sends
    found = sorted(cache.found.values(), key=lambda f: f.meta["loss"])
    assert [(f.kind, f.meta, f.hit) for f in found] == [
        ("barrier", {"loss": 1.0}, True), ("barrier", {"loss": 2.0}, False)]  # fmt: skip
    driver = Cache(tmp_path / "driver")
    store(driver, found)
    written = {f.key: driver.path(f.kind, f.key).stat().st_mtime_ns for f in found}
    store(driver, found)  # already there: nothing is written again
    assert written == {f.key: driver.path(f.kind, f.key).stat().st_mtime_ns for f in found}
    assert sorted(m["loss"] for _, m in driver.metas("barrier")) == [1.0, 2.0]
    assert not list(driver.metas("matching"))


@pytest.mark.slow
def test_ray_table_equals_the_serial_one_and_survives_a_killed_worker(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "serial"))
    # one thread, as the workers run: float32 results round differently on another count
    serial = _table(threads=1)
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "ray"))  # the workers inherit it
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_one_cell, args=(stop, killed), daemon=True)
    killer.start()
    try:
        distributed = _table(executor="ray")
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was seen running a cell"
    assert _strip(distributed) == _strip(serial)
    # every cell is in the driver's cache: a serial rerun reads them all
    n = sum(1 for _ in Cache(tmp_path / "ray").metas("barrier"))
    assert n == len(serial["rows"])
    again = _table(threads=1)
    assert _strip(again) == _strip(serial)
