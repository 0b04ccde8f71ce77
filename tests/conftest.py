"""Tiny seeded configs shared by the tests."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig
from landscape.models.importers import import_checkpoint
from landscape.models.registry import random_inputs

# The test models are tiny: one thread is fastest, and spinning OpenMP workers slow every test
# badly when another process holds a core. The command line reads the same count
# (``--threads`` defaults to $LANDSCAPE_THREADS), so its numbers are those of the library here.
torch.set_num_threads(1)
os.environ["LANDSCAPE_THREADS"] = "1"


def tiny_config(arch: str, norm: str = "rms", act: str = "gelu") -> ModelConfig:
    if arch == "mlp":
        return ModelConfig(
            "mlp", d_model=8, d_mlp=12, n_layers=2, n_out=5, d_in=6, norm=norm, act=act
        )
    if arch == "vit":
        return ModelConfig(
            "vit",
            d_model=8,
            d_mlp=12,
            n_layers=2,
            n_out=5,
            n_heads=2,
            d_head=4,
            image_size=4,
            patch_size=2,
            norm=norm,
            act=act,
        )
    if arch in ("bert", "bert-cls"):  # BERT's layout: norms after the sums, and a head
        head = {"bert": "mlm", "bert-cls": "pooler"}[arch]
        return ModelConfig(
            arch,
            d_model=8,
            d_mlp=12,
            n_layers=2,
            n_out=7,
            n_heads=2,
            d_head=4,
            d_vocab=7,
            n_ctx=6,
            norm=norm,
            act=act,
            block="postln",
            head=head,
        )
    return ModelConfig(
        "gpt",
        d_model=8,
        d_mlp=12,
        n_layers=2,
        n_out=7,
        n_heads=2,
        d_head=4,
        d_vocab=7,
        n_ctx=6,
        norm=norm,
        act=act,
    )


def tiny_moe(arch: str = "gpt", **changes) -> ModelConfig:
    """A tiny mixture of experts: 4 experts of 6 units, each position routed to 2."""
    extra = dict(n_heads=2, d_head=4, d_vocab=7, n_ctx=5) if arch == "gpt" else dict(d_in=6)
    base = dict(d_model=8, d_mlp=6, n_layers=2, n_out=7, n_experts=4, top_k=2, **extra)
    return ModelConfig(arch, **{**base, **changes})


def tiny_inputs(cfg: ModelConfig, batch: int = 4, seed: int = 0) -> torch.Tensor:
    return random_inputs(cfg, batch, torch.Generator().manual_seed(seed))


ARCH_NORMS = [
    pytest.param(("mlp", "rms"), id="mlp-rms"),
    pytest.param(("mlp", "ln"), id="mlp-ln"),
    pytest.param(("vit", "rms"), id="vit-rms"),
    pytest.param(("vit", "ln"), id="vit-ln"),
    pytest.param(("gpt", "rms"), id="gpt-rms"),
    pytest.param(("gpt", "ln"), id="gpt-ln"),
]


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def tiny_llama(seed: int, kv: int = 2):
    """A seeded random-weight Llama from the transformers library (GQA with ``kv`` key/value
    heads, RoPE, SwiGLU, untied embeddings; byte-sized vocabulary), weights perturbed so that
    no gain is exactly 1. Needs transformers: call it after ``pytest.importorskip``."""
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=kv,
        intermediate_size=24, vocab_size=256, max_position_embeddings=32,
        tie_word_embeddings=False,
    )  # fmt: skip
    return perturbed(transformers.LlamaForCausalLM(cfg))


def perturbed(model, scale: float = 0.1):
    """``model`` with every parameter moved by seeded-global noise of ``scale``: gains away
    from 1 and biases away from 0, so that no symmetry holds by accident."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    return model


def llama_checkpoints(root, planted_seed: int) -> dict:
    """Checkpoint paths under ``root`` for pair and family tests: two independent tiny Llamas
    ``a`` and ``b`` (GQA with 2 key/value heads), ``mha`` (4 key/value heads, another shape),
    ``planted`` (``a`` moved by the signed permutation drawn with ``planted_seed``, in the
    landscape format) and ``text`` (a short text file). Needs transformers."""
    from landscape.models.importers import import_checkpoint
    from landscape.models.zoo import Checkpoint, save_checkpoint_dir
    from landscape.symmetry import apply, random_transform, spec_for

    paths = {}
    for name, seed, kv in (("a", 0, 2), ("b", 1, 2), ("mha", 2, 4)):
        paths[name] = root / name
        tiny_llama(seed, kv).save_pretrained(paths[name], safe_serialization=True)
    a = import_checkpoint(paths["a"])
    spec = spec_for(a.cfg)
    moved = apply(spec, random_transform(spec, "signed-perm", planted_seed), a.params)
    paths["planted"] = save_checkpoint_dir(Checkpoint(a.cfg, moved, {}), root / "planted")
    paths["text"] = root / "text.txt"
    paths["text"].write_text("To be, or not to be, that is the question. " * 60)
    return paths


def refused_import(path, *fragments: str) -> str:
    """Importing ``path`` fails with one line holding every fragment; the line is returned."""
    with pytest.raises(LandscapeError) as err:
        import_checkpoint(path)
    msg = str(err.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    return msg


def copy_with_config(src: Path, dest: Path, **config) -> Path:
    """A copy of the checkpoint directory ``src`` at ``dest`` with ``config`` merged into its
    config.json; a value of None deletes the field."""
    shutil.copytree(src, dest)
    cfg = json.loads((dest / "config.json").read_text())
    for k, v in config.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def paths_barrier(path_a, path_b, method: str = "weight", group: str = "perm", *,
                  device="cpu", cache=None, progress=None, **given) -> dict:  # fmt: skip
    """``barrier_paths`` of two checkpoint paths, the data named by ``DataSpec``'s keywords
    (``text``, ``data``, ``data_dir``, ``n_ctx``, ``max_windows``) and the rest of the request
    by :func:`~landscape.experiments.barriers.pairs.paths_request`'s."""
    from landscape.experiments import RunContext
    from landscape.experiments.barriers.pairs import barrier_paths, paths_request
    from landscape.sources import DataSpec

    spec = {k: given.pop(k) for k in ("text", "data", "data_dir", "n_ctx", "max_windows")
            if k in given}  # fmt: skip
    if spec.get("text") is not None:
        spec["text"] = str(spec["text"])
    request = paths_request(path_a, path_b, method, group, data=DataSpec(**spec), **given)
    return barrier_paths(request, context=RunContext(device, cache, progress))
