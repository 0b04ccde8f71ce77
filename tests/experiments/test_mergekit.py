"""Round trip with mergekit: ``align --out B --mergekit-config PATH`` → mergekit's own CLI
(``mergekit-yaml``) → the merged model, loaded in transformers, has the loss of the landscape
line at λ on the same windows.

mergekit comes with the ``test`` extra (and ``landscape[merge]``); its CLI is found beside this
interpreter, on PATH, or at ``LANDSCAPE_MERGEKIT_YAML`` (another environment's). Where it is
missing the test fails, so CI cannot pass without running it; a machine without mergekit says
so with ``LANDSCAPE_NO_MERGEKIT=1``, which CI never sets, and the test is skipped there.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from landscape.cli import main
from landscape.experiments.barriers.endpoints import load
from landscape.experiments.merging.mergekit import MERGE_METHODS, mergekit_yaml
from landscape.sources import data_of
from tests.conftest import perturbed, tiny_llama
from tests.experiments.test_export import _family, _gpt2, _logits

transformers = pytest.importorskip("transformers")

LAMBDA = 0.3


def _mergekit_cli() -> str:
    found = (os.environ.get("LANDSCAPE_MERGEKIT_YAML")
             or next((str(p) for p in [Path(sys.executable).parent / "mergekit-yaml"]
                      if p.is_file()), None)
             or shutil.which("mergekit-yaml"))  # fmt: skip
    if found:
        return found
    if os.environ.get("LANDSCAPE_NO_MERGEKIT") == "1":
        pytest.skip("LANDSCAPE_NO_MERGEKIT=1: this machine has no mergekit")
    pytest.fail("mergekit-yaml not found: pip install -e '.[test]' installs it (or set "
                "LANDSCAPE_MERGEKIT_YAML to another environment's, or LANDSCAPE_NO_MERGEKIT=1 "
                "on a machine without mergekit)")  # fmt: skip


def _qwen3(seed: int):
    torch.manual_seed(seed)
    cfg = transformers.Qwen3Config(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=24, vocab_size=256, max_position_embeddings=32,
        tie_word_embeddings=True, attn_implementation="eager",
    )  # fmt: skip
    return perturbed(transformers.Qwen3ForCausalLM(cfg))


def _hf_loss(logits: torch.Tensor, targets: torch.Tensor) -> float:
    return float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


# one mergekit run each (about 20-35 s, mostly its imports): the three formats, A processed and
# written (--out-a) and A's own directory
PAIRS = [
    pytest.param(_gpt2, "orth-mean", id="gpt2-orth-mean"),  # a rotated LayerNorm format
    pytest.param(tiny_llama, "orth", id="llama-orth"),
    pytest.param(_qwen3, "perm", id="qwen3-perm"),  # A's own directory in the config
]


@pytest.mark.parametrize(("build", "group"), PAIRS)
def test_mergekit_linear_merge_is_the_curve_at_lambda(tmp_path, cache_env, capsys, build, group):
    cli = _mergekit_cli()
    name = f"mk-{build.__name__.strip('_')}"
    _family(tmp_path, build, name)
    config, b_dir, a_dir = tmp_path / "merge.yaml", tmp_path / "b", tmp_path / "a"
    argv = [
        "align",
        name,
        "--seeds",
        "0",
        "1",
        "--group",
        group,
        "--out",
        str(b_dir),
        "--mergekit-config",
        str(config),
        "--merge-weight",
        str(LAMBDA),
        "--json",
    ]
    if group != "perm":  # the group folds gains (and centres): A is written processed as B is
        argv += ["--out-a", str(a_dir)]
    capsys.readouterr()
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["function_ok"] and r["mergekit"]["path"] == str(config)
    assert a_dir.is_dir() == (group != "perm")
    merged = tmp_path / "merged"
    done = subprocess.run([cli, str(config), str(merged), "--quiet"], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # the landscape line at λ, on the windows the curve is evaluated on
    assert main(["align", name, "--seeds", "0", "1", "--group", group, "--merge", str(LAMBDA),
                 "--out", str(tmp_path / "line"), "--json"]) == 0  # fmt: skip
    line = json.loads(capsys.readouterr().out)
    ev = data_of(load(name, 0, torch.device("cpu"))).evaluation("test")
    logits = _logits(merged, ev.inputs).double()
    loss = _hf_loss(logits, ev.targets)
    print(
        f"{name} {group}: mergekit linear at λ={LAMBDA}: loss {loss:.8f}, "
        f"curve {line['curve_loss']:.8f}, |Δ| {abs(loss - line['curve_loss']):.2e}"
    )
    assert loss == pytest.approx(line["curve_loss"], abs=1e-4)
    # and the merge is neither endpoint: its logits are not B's, nor A's
    a_path = a_dir if group != "perm" else tmp_path / f"{name}0"
    for end in (b_dir, a_path):
        assert (logits - _logits(end, ev.inputs).double()).abs().max() > 1e-2


@pytest.mark.parametrize("method", MERGE_METHODS)
def test_the_config_names_both_models_and_lambda(tmp_path, method):
    text = mergekit_yaml(tmp_path / "a", tmp_path / "b", method, 0.25)
    assert f"merge_method: {method}" in text and str(tmp_path / "a") in text
    assert str(tmp_path / "b") in text and "0.25" in text and "dtype: float32" in text
    if method == "linear":
        assert "weight: 0.75" in text
