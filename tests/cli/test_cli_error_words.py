"""One-line errors that name the real problem in the user's words: no internal exception, no
value rounded into another, no option blamed for another's, no setting guessed."""

from __future__ import annotations

import json

import pytest

from landscape.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


BARRIER = ["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "naive", "--points", "3",
           "--json"]  # fmt: skip


def _refused(capsys, argv, *fragments) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("landscape: error:"), err
    line = err[-1]
    assert "Traceback" not in line and "Error:" not in line, line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


def _checkpoint(tmp_path):
    from landscape.models import init_params
    from landscape.models.checkpoint import Checkpoint, save_checkpoint_dir
    from landscape.models.zoo import ZOO

    cfg = ZOO["gpt-shakespeare"].config
    return save_checkpoint_dir(Checkpoint(cfg, init_params(cfg, 0), {"name": "mine"}),
                               tmp_path / "mine")  # fmt: skip


def test_a_huge_memory_budget_is_refused_in_words(capsys, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "1e300")
    _refused(capsys, BARRIER, "LANDSCAPE_MEMORY_GB", "at most", "1e300")


def test_a_device_this_machine_lacks_is_refused_even_for_a_cached_result(capsys):
    assert main([*BARRIER, "--device", "cpu"]) == 0  # now cached
    capsys.readouterr()
    _refused(capsys, [*BARRIER, "--device", "mps"], "'mps'", "not available")
    _refused(capsys, [*BARRIER, "--device", "meta"], "unknown device 'meta'")


def test_a_value_out_of_range_is_quoted_as_given(tmp_path, capsys):
    _refused(capsys, ["align", "mlp-digits", "--seeds", "0", "1", "--out", str(tmp_path / "o"),
                      "--merge", "1.0000001"], "got 1.0000001")  # fmt: skip


def test_a_text_that_is_a_device_or_folder_is_named_so(tmp_path, capsys):
    ckpt = _checkpoint(tmp_path)
    _refused(capsys, ["recover", str(ckpt), "--text", "/dev/zero", "--groups", "perm"],
             "/dev/zero is not a regular file")  # fmt: skip
    _refused(capsys, ["recover", str(ckpt), "--text", str(tmp_path), "--groups", "perm"],
             "is a folder")  # fmt: skip


@pytest.mark.parametrize(("name", "argv"), [("LANDSCAPE_CACHE", ["cache", "info"]),
                                            ("LANDSCAPE_FAMILIES", ["family", "list"])])
def test_an_empty_folder_variable_is_refused(capsys, monkeypatch, name, argv):
    monkeypatch.setenv(name, "")
    _refused(capsys, [*argv, "--json"], name, "empty")


def test_shipped_results_take_zero_or_one(capsys, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_SHIPPED_RESULTS", "maybe")
    _refused(capsys, BARRIER, "LANDSCAPE_SHIPPED_RESULTS", "'maybe'")
    monkeypatch.setenv("LANDSCAPE_SHIPPED_RESULTS", " 0 ")
    assert main(BARRIER) == 0
    assert json.loads(capsys.readouterr().out)["barrier_loss"] is not None


def test_pair_barrier_of_one_checkpoint_is_refused(tmp_path, capsys):
    ckpt = _checkpoint(tmp_path)
    _refused(capsys, ["pair-barrier", str(ckpt), f"{ckpt}/./", "--text", "/dev/null"],
             "one checkpoint")  # fmt: skip
