"""Files and folders written for a user to share (``align --out``, ``--mergekit-config``,
``--figure``) get the modes the umask gives, not the 0600/0700 of the temporary files they are
written through."""

from __future__ import annotations

import os
import stat

import pytest

from landscape.cli import main
from landscape.experiments.merging.mergekit import write_mergekit_config
from landscape.plots import files


@pytest.fixture(params=[0o022, 0o027], ids=["umask-022", "umask-027"])
def mask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_align_out_folder_and_files_get_the_umask_modes(tmp_path, monkeypatch, capsys, mask):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "aligned"
    assert main(["align", "mlp-digits", "--seeds", "0", "1", "--method", "naive",
                 "--out", str(out), "--json"]) == 0  # fmt: skip
    assert _mode(out) == 0o777 & ~mask
    for name in ("model.safetensors", "config.json"):
        assert _mode(out / name) == 0o666 & ~mask, name


def test_mergekit_config_and_figure_get_the_umask_modes(tmp_path, mask):
    config = tmp_path / "merge.yaml"
    write_mergekit_config(config, tmp_path / "a", tmp_path / "b")
    assert _mode(config) == 0o666 & ~mask
    figure = tmp_path / "figure.html"
    files._write(figure, b"<html></html>")
    assert _mode(figure) == 0o666 & ~mask


def test_transported_artifact_gets_the_umask_modes(tmp_path, mask):
    import torch

    from landscape.experiments.artifacts import Artifact
    from landscape.experiments.transport import save_artifact

    weights, sidecar = save_artifact(tmp_path / "probe", Artifact("probe", {"W": torch.ones(4, 3),
                                                                           "b": torch.zeros(3)}))
    assert _mode(weights) == _mode(sidecar) == 0o666 & ~mask
