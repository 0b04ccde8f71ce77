"""Paths in a mergekit configuration: written as UTF-8 text that mergekit reads back as the same
path (an emoji, a ``+`` or ``@`` in a folder name), and a name that is not valid UTF-8 refused
before any work, nothing written."""

import json
import os

import pytest
import yaml

from landscape.cli import main
from landscape.experiments.merging import export
from landscape.experiments.merging.mergekit import MERGE_METHODS, mergekit_yaml
from tests.conftest import tiny_llama
from tests.experiments.test_export import _family

pytest.importorskip("transformers")
mergekit_config = pytest.importorskip("mergekit.config")


def _paths(text: str) -> list[str]:
    """The model paths mergekit reads from the YAML ``text``."""
    config = mergekit_config.MergeConfiguration.model_validate(yaml.safe_load(text))
    refs = [m.model for m in config.models] + [config.base_model] * bool(config.base_model)
    return [r.model.path for r in refs]


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


def test_an_emoji_folder_is_the_path_mergekit_reads(tmp_path, cache_env, capsys):
    root = tmp_path / "models 😀"
    root.mkdir()
    _family(root, tiny_llama, "mk-emoji")
    out, config = root / "b 😀", root / "merge 😀.yaml"
    assert main(["align", "mk-emoji", "--seeds", "0", "1", "--out", str(out),
                 "--mergekit-config", str(config), "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    assert r["mergekit"]["path"] == str(config)
    paths = _paths(config.read_text(encoding="utf-8"))
    assert paths == [str(root / "mk-emoji0"), str(out)]
    assert all(os.path.isdir(p) for p in paths)  # mergekit's own test before the hub


@pytest.mark.parametrize("method", MERGE_METHODS)
def test_paths_mergekit_would_split_or_yaml_would_refuse_are_read_whole(tmp_path, method):
    a, b = tmp_path / "a+lora@rev😀", tmp_path / "b\x7f\u0085é"
    text = mergekit_yaml(a, b, method, 0.25)
    assert set(_paths(text)) == {str(a), str(b)}


@pytest.mark.parametrize("flag", ["--out", "--out-a", "--mergekit-config"])
def test_a_name_that_is_not_utf8_is_refused_before_any_work(tmp_path, cache_env, capsys,
                                                           monkeypatch, flag):  # fmt: skip
    _family(tmp_path, tiny_llama, "mk-bytes")
    capsys.readouterr()
    bad = os.fsdecode(os.fsencode(tmp_path) + b"/name\xff")
    given = {"--out": str(tmp_path / "b"), "--out-a": str(tmp_path / "a"),
             "--mergekit-config": str(tmp_path / "m.yaml"), flag: bad}  # fmt: skip

    def no_work(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(export, "load", no_work)
    argv = ["align", "mk-bytes", "--seeds", "0", "1", "--group", "orth"]
    assert main(argv + [x for kv in given.items() for x in kv]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the command's status line
    assert err.startswith("landscape: error: ") and f"{flag} " in err, err
    assert "not valid UTF-8" in err, err
    assert "name\\xff" in err
    assert not any(os.path.lexists(p) for p in given.values())
