import multiprocessing as mp
import time

import pytest
import torch

from landscape.store.cache import Cache, digest_tensors


def test_round_trip_and_hit(tmp_path):
    cache = Cache(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"w": torch.arange(6.0).reshape(2, 3)}, {"note": "x", "values": [1.5, 2]}

    e1, hit1 = cache.get_or_compute("thing", {"a": 1}, compute)
    e2, hit2 = cache.get_or_compute("thing", {"a": 1}, compute)
    assert (hit1, hit2) == (False, True) and len(calls) == 1
    assert torch.equal(e2.tensors["w"], e1.tensors["w"]) and e2.meta == {
        "note": "x",
        "values": [1.5, 2],
    }
    assert cache.info()["entries"] == 1
    assert cache.key("thing", {"a": 1}) != cache.key("thing", {"a": 2})


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_corrupt_entry_is_recomputed_not_served(tmp_path, damage):
    cache = Cache(tmp_path)
    good = {"w": torch.ones(100)}
    cache.get_or_compute("thing", {"a": 1}, lambda: (good, {}))
    path = cache.path("thing", cache.key("thing", {"a": 1}))
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[-5] ^= 0xFF
    elif damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:
        raw = bytearray(b"not an entry")
    path.write_bytes(bytes(raw))
    entry, hit = cache.get_or_compute("thing", {"a": 1}, lambda: ({"w": torch.zeros(3)}, {}))
    assert not hit and torch.equal(entry.tensors["w"], torch.zeros(3))
    assert torch.equal(cache.get("thing", entry.key).tensors["w"], torch.zeros(3))


def test_interrupted_compute_leaves_nothing(tmp_path):
    cache = Cache(tmp_path)

    def boom():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.get_or_compute("thing", {"a": 1}, boom)
    assert cache.info()["entries"] == 0
    assert not list(tmp_path.rglob(".tmp-*"))


def _worker(root, out):
    cache = Cache(root)

    def slow():
        time.sleep(0.5)
        return {"w": torch.randn(10)}, {"pid": mp.current_process().pid}

    entry, hit = cache.get_or_compute("thing", {"a": 1}, slow)
    out.put((digest_tensors(entry.tensors), hit))


def test_concurrent_writers_compute_once(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), q)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    assert len({d for d, _ in results}) == 1  # everyone sees the one stored entry
    assert sorted(h for _, h in results) == [False, True, True]
    assert Cache(tmp_path).info()["entries"] == 1


def test_unwritable_cache_still_returns_result(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = Cache(blocker)  # the root is a file: every write fails
    entry, hit = cache.get_or_compute("thing", {"a": 1}, lambda: ({"w": torch.ones(2)}, {}))
    assert not hit and torch.equal(entry.tensors["w"], torch.ones(2))
    assert "not cached" in capsys.readouterr().err


def test_clear(tmp_path):
    cache = Cache(tmp_path)
    cache.get_or_compute("a", {"x": 1}, lambda: ({"w": torch.ones(1)}, {}))
    cache.get_or_compute("b", {"x": 1}, lambda: ({"w": torch.ones(1)}, {}))
    assert cache.clear("a") == 1 and cache.info()["entries"] == 1
    assert cache.clear() == 1 and cache.info()["entries"] == 0


def test_metas_and_entries_of_one_kind(tmp_path):
    """``metas(kind)`` reads the headers of that kind's entries only (the app lists seeds with it
    on every page run), and ``entries(kind)`` walks that kind's folder alone."""
    cache = Cache(tmp_path, shipped=False)
    for kind, n in (("barrier", 2), ("checkpoint", 3)):
        for i in range(n):
            cache.get_or_compute(kind, {"i": i}, lambda i=i: ({}, {"i": i}))
    assert sorted(m["i"] for _, m in cache.metas("checkpoint")) == [0, 1, 2]
    assert sorted(m["i"] for _, m in cache.metas("barrier")) == [0, 1]
    assert {k for k, _ in cache.entries("barrier")} == {"barrier"}
    assert len(list(cache.entries())) == 5 and not list(cache.entries("surface"))
