"""``align`` refuses what its writer cannot write before any matching starts (a model type the
Hugging Face writer has no format for, a group whose processing the format cannot hold), and
``inspect`` describes a folder landscape itself wrote."""

from __future__ import annotations

import json
import os

import pytest
import torch

from landscape.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=24,
             attn_implementation="eager")  # fmt: skip


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    return tmp_path


@pytest.fixture
def no_matching(monkeypatch):
    """Fails the test if an alignment starts."""
    from landscape.experiments.merging import export

    def align(*args, **kwargs):
        raise AssertionError("the alignment started before the refusal")

    monkeypatch.setattr(export, "align", align)


def _neox_family(root, text) -> str:
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        cfg = transformers.GPTNeoXConfig(**SMALL, vocab_size=64, max_position_embeddings=32)
        path = root / f"neox{seed}"
        transformers.GPTNeoXForCausalLM(cfg).save_pretrained(path, safe_serialization=True)
        paths.append(str(path))
    assert main(["family", "add", "neox", *paths, "--text", str(text), "--n-ctx", "16",
                 "--max-windows", "8", "--json"]) == 0  # fmt: skip
    return "neox"


def _vit_family(root) -> str:
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        cfg = transformers.ViTConfig(**SMALL, image_size=8, patch_size=4, num_channels=1,
                                     num_labels=10)  # fmt: skip
        path = root / f"vit{seed}"
        transformers.ViTForImageClassification(cfg).save_pretrained(path, safe_serialization=True)
        paths.append(str(path))
    assert main(["family", "add", "vits", *paths, "--data", "digits", "--json"]) == 0
    return "vits"


def _refused(capsys, argv, *fragments) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    line = [e for e in err.splitlines() if e.startswith("landscape: error:")]
    assert len(line) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in line[0], (fragment, line[0])
    return line[0]


# a sign flip has no LayerNorm form (perm is named instead); a full rotation moves the mean
# direction LayerNorm removes (orth-mean is named instead)
@pytest.mark.parametrize(
    ("group", "fragments"),
    [("signed-perm", ("LayerNorm", "--group perm")),
     ("orth", ("LayerNorm", "moves the mean direction", "--group orth-mean"))],
)  # fmt: skip
def test_align_refuses_a_group_the_neox_format_cannot_hold_before_matching(
    home, tmp_path, capsys, no_matching, group, fragments
):
    text = tmp_path / "text.txt"
    text.write_text("To be, or not to be, that is the question. " * 60)
    fam = _neox_family(tmp_path, text)
    capsys.readouterr()
    out = tmp_path / "out"
    _refused(capsys, ["align", fam, "--seeds", "0", "1", "--group", group, "--out", str(out)],
             *fragments)  # fmt: skip
    assert not out.exists()


def test_align_refuses_a_model_type_it_cannot_write_before_matching(
    home, tmp_path, capsys, no_matching
):
    fam = _vit_family(tmp_path)
    capsys.readouterr()
    out = tmp_path / "out"
    _refused(capsys, ["align", fam, "--seeds", "0", "1", "--out", str(out)], "'vit'")
    assert not out.exists()


def test_inspect_describes_a_folder_landscape_wrote(home, tmp_path, capsys):
    from landscape.models import init_params
    from landscape.models.checkpoint import Checkpoint, save_checkpoint_dir
    from landscape.models.zoo import ZOO

    cfg = ZOO["mlp-digits"].config
    folder = save_checkpoint_dir(Checkpoint(cfg, init_params(cfg, 0), {"name": "mine"}),
                                 tmp_path / "mine")  # fmt: skip
    assert main(["inspect", str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "landscape" and out["config"] == cfg.to_dict()
    assert out["parameters"] == sum(v.numel() for v in init_params(cfg, 0).values())
    assert "residual MLP" in out["architecture"] and out["symmetries"]
    assert main(["inspect", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert "landscape" in shown and "null" not in shown



def test_mergekit_requests_are_checked_before_matching(home, tmp_path, capsys, no_matching):
    text = tmp_path / "text.txt"
    text.write_text("To be, or not to be, that is the question. " * 60)
    fam = _neox_family(tmp_path, text)
    capsys.readouterr()
    out, cfg, a = tmp_path / "out", tmp_path / "merge.yaml", tmp_path / "a"
    base = ["align", fam, "--seeds", "0", "1", "--out", str(out)]
    _refused(capsys, [*base, "--group", "orth-mean", "--mergekit-config", str(cfg)], "--out-a")
    _refused(capsys, [*base, "--mergekit-config", str(cfg), "--merge", "0.5"], "--merge-weight")
    _refused(capsys, [*base, "--out-a", str(a)], "--mergekit-config")
    # A's own directory, as transformers 5 saved it, lacks a buffer mergekit's NeoX definition
    # requires: A must be written (with it)
    _refused(capsys, [*base, "--mergekit-config", str(cfg)], "attention.bias", "--out-a")
    cfg.write_text("mine")
    _refused(capsys, [*base, "--mergekit-config", str(cfg)], "exists")
    assert cfg.read_text() == "mine" and not out.exists() and not a.exists()
    assert main([*base, "--mergekit-config", str(tmp_path / "m2.yaml"), "--merge-method",
                 "nonsense"]) == 2  # fmt: skip


def test_mergekit_needs_hugging_face_directories(home, tmp_path, capsys, no_matching):
    out = tmp_path / "out"
    _refused(capsys, ["align", "mlp-digits", "--seeds", "0", "1", "--out", str(out),
                      "--mergekit-config", str(tmp_path / "m.yaml")], "Hugging Face")  # fmt: skip
    assert not out.exists()


def test_outputs_sharing_one_path_are_refused_before_matching(home, tmp_path, capsys,
                                                              no_matching):  # fmt: skip
    from tests.conftest import tiny_llama

    text = tmp_path / "text.txt"
    text.write_text("To be, or not to be, that is the question. " * 60)
    paths = []
    for seed in (0, 1):
        paths.append(str(tmp_path / f"llama{seed}"))
        tiny_llama(seed).save_pretrained(paths[-1], safe_serialization=True)
    assert main(["family", "add", "llamas", *paths, "--text", str(text), "--n-ctx", "16",
                 "--max-windows", "8", "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    out, cfg = tmp_path / "out", tmp_path / "merge.yaml"
    base = ["align", "llamas", "--seeds", "0", "1", "--group", "orth"]
    # A processed (orth folds the gains) goes to --out-a: the same folder as B
    _refused(capsys, [*base, "--out", str(out), "--out-a", f"{tmp_path}/./out/",
                      "--mergekit-config", str(cfg)], "--out-a", "--out", "own path")  # fmt: skip
    # the config written where a folder goes
    _refused(capsys, [*base, "--out", str(out), "--out-a", str(tmp_path / "a"),
                      "--mergekit-config", str(out)], "--mergekit-config")  # fmt: skip
    _refused(capsys, [*base, "--out", str(out), "--out-a", str(cfg),
                      "--mergekit-config", str(cfg)], "--mergekit-config")  # fmt: skip
    assert not out.exists() and not cfg.exists()
