"""The stores against hostile files, round 3: a cache clear that may remove only what the cache
wrote, ``align --out`` folders that appear whole or not at all, cache entries that are not
regular files or are absurdly large, and user JSON files nested or sized to break the parser.

Every hostile file is built here, in pytest's tmp_path."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch
from safetensors import SafetensorError

import landscape.models.checkpoint as checkpoint_module
from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments.merging.export import write_aligned
from landscape.experiments.transport import load_artifact
from landscape.models import init_params
from landscape.models.checkpoint import (
    Checkpoint,
    check_save_target,
    load_checkpoint_dir,
    save_checkpoint_dir,
)
from landscape.models.exporters import TOKENIZER_FILES, export_hf
from landscape.models.importers import import_checkpoint
from landscape.sources import load_any
from landscape.store import families as fm
from landscape.store.cache import Cache
from tests.conftest import refused_import, tiny_config, tiny_llama


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    monkeypatch.setenv("LANDSCAPE_DATA", str(tmp_path / "data"))
    return tmp_path


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links not followed) by relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}  # fmt: skip


def _dirs(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


# ---------------------------------------------------------------- 1. cache clear

LOOKALIKE = "ab" + "0" * 62  # a file named exactly like an entry, holding something else
USER_FILES = {
    "myproject/src/main.py": b"print('hello')\n",
    "checkpoints/llama/config.json": b'{"model_type": "llama"}',
    "aligned/config.json": b'{"format": "landscape"}',  # an align --out folder under the cache
    "aligned/model.safetensors": b"weights",
    "notes/ab/readme.lsc": b"a file of mine with the cache's suffix",
    f"lookalike/ab/{LOOKALIKE}.lsc": b"named like an entry, not one",
    f"lookalike/ab/{LOOKALIKE}.lock": b"named like a lock, not one",
    "barrier/zz/mine.txt": b"foreign content in a folder named like a kind",
    "data/shakespeare.txt": b"fetched text",
    "families/x.json": b"{}",
    ".config/app/settings.json": b"{}",
}


def _entry(cache: Cache, kind: str, n: int) -> Path:
    cache.get_or_compute(kind, {"n": n}, lambda: ({"w": torch.ones(2)}, {"n": n}))
    return cache.path(kind, cache.key(kind, {"n": n}))


def test_cache_clear_removes_only_what_the_cache_wrote(cache_env, capsys):
    cache = Cache()
    entries = [_entry(cache, "barrier", 0), _entry(cache, "matching", 1)]
    for rel, blob in USER_FILES.items():
        (cache.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache.root / rel).write_bytes(blob)
    (cache.root / "empty-folder").mkdir()
    old_user_tmp = cache.root / "myproject" / "ab" / ".tmp-notes.lsc"
    old_user_tmp.parent.mkdir()
    old_user_tmp.write_bytes(b"an old file of mine named like a temporary one")
    _age(old_user_tmp, 2 * 3600)
    user_files = _files(cache.root)
    for p in entries:
        for made in (p, p.with_suffix(".lock")):  # an entry and its lock: the cache's files
            del user_files[str(made.relative_to(cache.root))]

    assert main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 2
    assert main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 2
    assert _files(cache.root) == user_files
    assert not any(p.exists() for p in entries)
    assert (cache.root / "empty-folder").is_dir() and (cache.root / "barrier" / "zz").is_dir()
    assert not (cache.root / "matching").exists()  # the cache's own kind folder, emptied


def test_cache_clear_in_a_home_folder_removes_nothing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    for rel in ("Documents/report.txt", ".ssh/config", "src/ab/notes.lsc", "Music/a/b/c.mp3"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(rel)
    for rel in ("Desktop", "Pictures/2024"):
        (home / rel).mkdir(parents=True)
    before, folders = _files(home), _dirs(home)
    monkeypatch.setenv("LANDSCAPE_CACHE", str(home))
    for argv in (["cache", "clear"], ["cache", "clear", "--kind", "Documents"],
                 ["cache", "clear", "--kind", "Desktop"], ["cache", "info"]):  # fmt: skip
        assert main([*argv, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out.get("removed", 0) == 0 and out.get("entries", 0) == 0
    assert _files(home) == before and _dirs(home) == folders


# ---------------------------------------------------------------- 2. align --out


@pytest.fixture
def llama_dir(tmp_path):
    d = tmp_path / "src"
    tiny_llama(0).save_pretrained(d, safe_serialization=True)
    return d


def _written(src: Path) -> list[str]:
    """The files an export of the Hugging Face directory ``src`` holds."""
    return sorted(["config.json", "model.safetensors",
                   *(f for f in TOKENIZER_FILES if (src / f).is_file())])  # fmt: skip


def _export(src: Path, out: Path) -> dict:
    ckpt = import_checkpoint(src)
    return export_hf(ckpt.cfg, ckpt.params, src, out)


def test_align_out_never_deletes_a_folder_it_did_not_create(tmp_path, llama_dir):
    parent = tmp_path / "o"
    victim = parent / ".victim.tmp"
    victim.mkdir(parents=True)
    (victim / "thesis.tex").write_text("years of work")
    _export(llama_dir, parent / "victim")
    assert (victim / "thesis.tex").read_text() == "years of work"
    assert sorted(os.listdir(parent)) == [".victim.tmp", "victim"]
    assert sorted(os.listdir(parent / "victim")) == _written(llama_dir)


NO_SPACE = {
    "oserror": OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    "safetensors": SafetensorError('Error while serializing: IoError(Os { code: 28, kind: '
                                   'StorageFull, message: "No space left on device" })'),
}  # fmt: skip


def _fills_the_disk(error: BaseException):
    def write(_tensors, path, *_args, **_kwargs):
        Path(path).write_bytes(b"the first bytes")  # a full disk leaves a partial file
        raise error

    return write


@pytest.mark.parametrize("error", list(NO_SPACE))
def test_a_full_disk_in_export_is_one_line_and_leaves_nothing(tmp_path, llama_dir, monkeypatch,
                                                              error):  # fmt: skip
    ckpt = import_checkpoint(llama_dir)
    parent = tmp_path / "o"
    parent.mkdir()
    monkeypatch.setattr(safetensors.torch, "save_file", _fills_the_disk(NO_SPACE[error]))
    with pytest.raises(LandscapeError) as err:
        export_hf(ckpt.cfg, ckpt.params, llama_dir, parent / "victim")
    msg = str(err.value)
    assert "\n" not in msg and str(parent / "victim") in msg and "no space left" in msg.lower()
    assert os.listdir(parent) == []


@pytest.mark.parametrize("error", list(NO_SPACE))
def test_a_full_disk_in_align_out_is_one_line_and_leaves_nothing(cache_env, monkeypatch, capsys,
                                                                 error):  # fmt: skip
    parent = cache_env / "o"
    parent.mkdir()
    monkeypatch.setattr(checkpoint_module, "save_file", _fills_the_disk(NO_SPACE[error]))
    assert main(["align", "mlp-digits", "--seeds", "0", "1", "--out", str(parent / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines
    assert err.startswith("landscape: error:") and "Traceback" not in err, err
    assert str(parent / "x") in err and "no space left" in err.lower()
    assert os.listdir(parent) == []


def _race(monkeypatch, where, name: str, write) -> list:
    """Run ``write(i)`` in two threads that both finish their safetensors file before either
    goes on; returns what each returned or raised."""
    real = getattr(where, name)
    both = threading.Barrier(2, timeout=10)

    def together(*args, **kwargs):
        real(*args, **kwargs)
        with contextlib.suppress(threading.BrokenBarrierError):
            both.wait()

    monkeypatch.setattr(where, name, together)
    results: list = [None, None]

    def run(i: int) -> None:
        try:
            results[i] = write(i)
        except Exception as e:  # noqa: BLE001 - a raw error is what the test looks for
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def _one_winner(results: list, out: Path, files: list[str]) -> None:
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(losers) == 1, results
    assert isinstance(losers[0], LandscapeError), repr(losers[0])
    assert "exists" in str(losers[0]) and "\n" not in str(losers[0])
    assert sorted(os.listdir(out)) == files  # nothing of the loser's inside the winner's folder
    assert os.listdir(out.parent) == [out.name]  # and no temporary folder beside it


def test_two_concurrent_exports_to_one_folder_one_wins(tmp_path, llama_dir, monkeypatch):
    ckpt = import_checkpoint(llama_dir)
    out = tmp_path / "o" / "victim"
    out.parent.mkdir()
    results = _race(monkeypatch, safetensors.torch, "save_file",
                    lambda i: export_hf(ckpt.cfg, ckpt.params, llama_dir, out))  # fmt: skip
    _one_winner(results, out, _written(llama_dir))
    back = import_checkpoint(out)
    assert all(torch.equal(back.params[k], v) for k, v in ckpt.params.items())


def test_two_concurrent_align_outs_to_one_folder_one_wins(cache_env, monkeypatch):
    out = cache_env / "o" / "x"
    out.parent.mkdir()
    write_aligned("mlp-digits", [0, 1], cache_env / "warm")  # the alignment is cached once
    results = _race(monkeypatch, checkpoint_module, "save_file",
                    lambda i: write_aligned("mlp-digits", [0, 1], out))  # fmt: skip
    _one_winner(results, out, ["config.json", "model.safetensors"])
    assert load_checkpoint_dir(out).cfg == load_checkpoint_dir(cache_env / "warm").cfg


def test_a_full_disk_in_train_save_is_one_line(cache_env, monkeypatch):
    cfg = tiny_config("mlp")
    ckpt = Checkpoint(cfg, init_params(cfg, 0), {})
    monkeypatch.setattr(checkpoint_module, "save_file", _fills_the_disk(NO_SPACE["safetensors"]))
    with pytest.raises(LandscapeError, match="no space left") as err:
        save_checkpoint_dir(ckpt, cache_env / "saved")
    assert "\n" not in str(err.value) and str(cache_env / "saved") in str(err.value)


# ---------------------------------------------------------------- 7. cache entries


def _key_path(cache: Cache) -> Path:
    p = cache.path("barrier", cache.key("barrier", {"a": 1}))
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def _fresh():
    return {"w": torch.arange(3.0)}, {"fresh": True}


def _get_within(cache: Cache, unblock: Path | None = None, seconds: float = 20):
    """``get_or_compute`` in a thread, so a read that blocks fails the test instead of hanging
    it (a FIFO reader is then released by opening its other end)."""
    out: dict = {}

    def run() -> None:
        try:
            out["r"] = cache.get_or_compute("barrier", {"a": 1}, _fresh)
        except BaseException as e:  # noqa: BLE001 - reported below
            out["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        if unblock is not None:
            with contextlib.suppress(OSError):
                os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
            t.join(5)
        pytest.fail("reading the cache entry blocked")
    if "e" in out:
        raise out["e"]
    return out["r"]


def _recomputed(cache: Cache, p: Path, capsys) -> None:
    assert stat.S_ISREG(p.lstat().st_mode)  # the recomputed entry, a plain file
    assert cache.get("barrier", cache.key("barrier", {"a": 1})).meta == {"fresh": True}
    assert "corrupt cache entry" in capsys.readouterr().err


def test_a_fifo_entry_is_removed_and_recomputed(cache_env, capsys):
    cache = Cache()
    p = _key_path(cache)
    os.mkfifo(p)
    entry, hit = _get_within(cache, unblock=p)
    assert not hit and entry.meta == {"fresh": True}
    _recomputed(cache, p, capsys)


def test_listings_do_not_block_on_a_fifo_entry(cache_env):
    cache = Cache()
    good = _entry(cache, "barrier", 0)
    fifo = good.parent / f"{good.name[:2]}{'1' * 62}.lsc"
    os.mkfifo(fifo)
    done: dict = {}

    def run() -> None:
        done["metas"] = dict(cache.metas("barrier"))
        done["info"] = cache.info()["entries"]
        done["cleared"] = cache.clear()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("a listing blocked on a FIFO")
    assert list(done["metas"].values()) == [{"n": 0}]
    assert done["info"] == 1 and done["cleared"] == 1 and not good.exists()


def _sparse(path: Path, size: int = 2**40, prefix: bytes = b"") -> Path:
    """A file of ``size`` bytes (1 TB by default) that takes no room: ``prefix``, then a hole."""
    with open(path, "wb") as f:
        f.write(prefix)
        f.truncate(size)
    return path


@pytest.mark.parametrize("target", ["dev-zero", "sparse-file", "good-entry"])
def test_a_symlinked_entry_is_removed_not_followed(cache_env, capsys, target):
    cache = Cache()
    p = _key_path(cache)
    if target == "dev-zero":
        dest = Path("/dev/zero")
    elif target == "sparse-file":
        dest = _sparse(cache_env / "huge")
    else:  # a genuine entry elsewhere: still not a file the cache wrote at this path
        other = Cache(cache_env / "other")
        _stored = other.get_or_compute("barrier", {"a": 1}, lambda: ({}, {"fresh": False}))
        dest = other.path("barrier", _stored[0].key)
    os.symlink(dest, p)
    entry, hit = _get_within(cache)
    assert not hit and entry.meta == {"fresh": True}
    _recomputed(cache, p, capsys)
    assert dest.exists()  # only the link was removed


@pytest.mark.parametrize("fill", ["hole", "entry-then-hole"])
def test_a_huge_sparse_entry_is_refused_before_reading(cache_env, capsys, fill):
    cache = Cache()
    p = _key_path(cache)
    good = b""
    if fill == "entry-then-hole":  # a genuine header, then a terabyte the header does not cover
        cache.get_or_compute("barrier", {"a": 1}, lambda: ({"w": torch.ones(4)}, {"old": 1}))
        good = p.read_bytes()
    _sparse(p, prefix=good)
    entry, hit = _get_within(cache)
    assert not hit and entry.meta == {"fresh": True}
    _recomputed(cache, p, capsys)


def test_an_absurd_header_length_is_refused_in_listings(cache_env, capsys):
    cache = Cache()
    p = _entry(cache, "barrier", 0)
    raw = p.read_bytes()
    p.write_bytes(raw[:4] + (2**63 - 1).to_bytes(8, "little") + raw[12:])
    assert dict(cache.metas("barrier")) == {}
    assert "corrupt cache entry" in capsys.readouterr().err and not p.exists()


# ---------------------------------------------------------------- 8. user JSON files

DEEP = "[" * 200_000


def _register(name: str) -> None:
    fam = fm.Family(name=name, members=("/ckpt/a", "/ckpt/b"), arch="mlp",
                    architecture="MLP, 2 layers", parameters=100, data="digits")  # fmt: skip
    fm.save_family(fam)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("landscape: error:") and "\n" not in err, err
    return err


@pytest.mark.parametrize("content", ["deep", "deep-object", "huge-int"])
def test_a_hostile_family_file_is_one_stray_file(cache_env, capsys, content):
    _register("good")
    text = {"deep": DEEP, "deep-object": '{"a":' * 100_000,
            "huge-int": '{"name": "bad", "parameters": ' + "9" * 5000 + "}"}[content]
    (fm.families_root() / "bad.json").write_text(text)
    assert [f.name for f in fm.families()] == ["good"]
    warned = capsys.readouterr().err
    assert "bad.json" in warned and "Traceback" not in warned and len(warned.splitlines()) == 1
    assert main(["family", "list", "--json"]) == 0
    assert [f["name"] for f in json.loads(capsys.readouterr().out)["families"]] == ["good"]
    assert main(["family", "show", "bad"]) == 2
    assert "bad.json" in _one_line_error(capsys)
    (problem,) = fm.family_problems()
    assert "bad.json" in problem and "\n" not in problem


@pytest.mark.parametrize("page", ["models", "interpolation"])
def test_a_deeply_nested_family_file_does_not_break_the_app(cache_env, page):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.app.common import MAIN

    _register("good")
    (fm.families_root() / "deep.json").write_text(DEEP)
    st.cache_data.clear()  # the app's listings of an earlier test's families
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if page == "models":
        (warning,) = [w.value.replace("\\", "") for w in at.warning  # markdown-escaped
                      if "families directory" in w.value]  # fmt: skip
        assert "deep.json" in warning and "nested too deeply" in warning


def test_an_oversized_family_file_is_refused_before_parsing(cache_env, capsys, monkeypatch):
    _register("good")
    big = fm.Family(name="big", members=tuple(f"/ckpt/{i:06d}" for i in range(20_000)),
                    arch="mlp", architecture="MLP", parameters=1, data="digits")  # fmt: skip
    fm.save_family(big)
    assert fm.family("big") == big  # within the default budget
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")
    assert [f.name for f in fm.families()] == ["good"]
    warned = capsys.readouterr().err
    assert "big.json" in warned and "LANDSCAPE_MEMORY_GB" in warned


def _hf_with(llama_dir: Path, name: str, text: str) -> Path:
    (llama_dir / name).write_text(text)
    return llama_dir


@pytest.mark.parametrize(
    "field,value,words",
    [
        pytest.param(None, DEEP, ["config.json", "nested"], id="nested"),
        pytest.param("hidden_size", "9" * 5000, ["config.json", "hidden_size", "5000 digits"],
                     id="5000-digits"),
        pytest.param("hidden_size", "1" + "0" * 60, ["config.json", "hidden_size"],
                     id="60-digits"),
        pytest.param("num_hidden_layers", str(2**40), ["config.json", "num_hidden_layers"],
                     id="2**40-layers"),
        pytest.param("vocab_size", "[" + "9" * 5000 + "]", ["config.json", "vocab_size"],
                     id="in-a-list"),
    ],
)  # fmt: skip
def test_a_hostile_config_json_is_one_line_naming_file_and_field(llama_dir, field, value, words):
    cfg = (llama_dir / "config.json").read_text()
    if field is None:
        text = value
    else:
        old = json.dumps({field: json.loads(cfg)[field]})[1:-1]  # '"hidden_size": 32'
        assert old in cfg
        text = cfg.replace(old, f'"{field}": {value}')
    refused_import(_hf_with(llama_dir, "config.json", text), *words)


def test_a_nested_safetensors_index_is_one_line(tmp_path):
    d = tmp_path / "sharded"
    tiny_llama(0).save_pretrained(d, safe_serialization=True, max_shard_size="4KB")
    assert (d / "model.safetensors.index.json").is_file()
    refused_import(_hf_with(d, "model.safetensors.index.json", DEEP),
                   "model.safetensors.index.json", "nested")  # fmt: skip


def test_nested_landscape_configs_are_one_line(tmp_path, capsys):
    cfg = tiny_config("mlp")
    d = save_checkpoint_dir(Checkpoint(cfg, init_params(cfg, 0), {}), tmp_path / "ckpt")
    (d / "config.json").write_text(DEEP)
    for load in (load_any, load_checkpoint_dir):
        with pytest.raises(LandscapeError, match="config.json") as err:
            load(d)
        assert "\n" not in str(err.value)
    with pytest.raises(LandscapeError, match="not a landscape checkpoint"):
        check_save_target(d)  # train --save: a directory holding something else
    assert main(["inspect", str(d)]) == 2
    assert "config.json" in _one_line_error(capsys)


def test_a_nested_artifact_sidecar_is_one_line(tmp_path):
    (tmp_path / "probe.safetensors").write_bytes(b"")
    (tmp_path / "probe.json").write_text(DEEP)
    with pytest.raises(LandscapeError, match="probe.json") as err:
        load_artifact(tmp_path / "probe")
    assert "\n" not in str(err.value)
