"""Training-time dropout: off by default with every cache key unchanged, reproducible by seed."""

import dataclasses

import pytest
import torch

from landscape.models.config import ModelConfig
from landscape.models.functional import forward
from landscape.models.params import init_params
from landscape.models.primitives import Dropout
from landscape.models.runs import train_model
from landscape.models.zoo import ZOO, TrainConfig

GPT = ModelConfig("gpt", d_model=16, d_mlp=32, n_layers=2, n_out=11, n_heads=2, d_head=8,
                  d_vocab=11, n_ctx=8)  # fmt: skip


def test_a_recipe_without_dropout_keeps_its_dictionary():
    tc = TrainConfig(steps=10, batch_size=4, lr=1e-3)
    assert "dropout" not in tc.to_dict()  # so every existing checkpoint keeps its cache key
    assert dataclasses.replace(tc, dropout=0.1).to_dict()["dropout"] == 0.1
    plain = [m for m in ZOO.values() if not m.train.dropout]
    # the entries trained with dropout say so in their names: the dropout GPT and the Llama
    # ablation's entries, forward and reverse, every one of them at the dropout GPT's 0.3
    dropped = {n for n, m in ZOO.items() if m.train.dropout}
    assert dropped == {n for n in ZOO if "drop0.3" in n} and len(dropped) == 12
    assert len(plain) == len(ZOO) - len(dropped)
    assert all("dropout" not in m.train.to_dict() for m in plain)
    assert ZOO["gpt-shakespeare-d128-drop0.3"].train.to_dict()["dropout"] == 0.3
    with pytest.raises(ValueError, match="dropout"):
        TrainConfig(steps=10, batch_size=4, lr=1e-3, dropout=1.0)


def test_dropout_zeroes_and_rescales_from_its_own_seed():
    x = torch.ones(200_000)
    y = Dropout(0.25, 7)(x)
    assert torch.equal(y.unique(), torch.tensor([0.0, 4 / 3]))
    assert abs((y == 0).float().mean().item() - 0.25) < 0.01
    assert torch.equal(y, Dropout(0.25, 7)(x))
    assert not torch.equal(y, Dropout(0.25, 8)(x))
    with pytest.raises(ValueError):
        Dropout(0.0, 1)


def test_forward_with_dropout_is_the_reference_with_entries_dropped():
    params = init_params(GPT, 0)
    x = torch.randint(0, 11, (3, 8))
    plain = forward(GPT, params, x, fast=False)
    dropped = forward(GPT, params, x, dropout=Dropout(0.2, 1))
    assert torch.equal(dropped, forward(GPT, params, x, dropout=Dropout(0.2, 1)))
    assert (dropped - plain).abs().max() > 1e-3
    with pytest.raises(ValueError, match="reference"):
        forward(GPT, params, x, fast=True, dropout=Dropout(0.2, 1))
    post = GPT.replace(block="postln", norm="ln")
    with pytest.raises(ValueError, match="not built for .postln. blocks"):
        forward(post, init_params(post, 0), x, dropout=Dropout(0.2, 1))


def test_training_with_dropout_is_reproducible_and_differs(monkeypatch):
    tc = TrainConfig(steps=30, batch_size=64, lr=3e-3, warmup=10, eval_every=15)
    plain = dataclasses.replace(ZOO["vit-digits"], train=tc)
    drop = dataclasses.replace(plain, train=dataclasses.replace(tc, dropout=0.1))
    a, b = train_model(drop, 0), train_model(drop, 0)
    assert a.meta["digest"] == b.meta["digest"]
    assert a.meta["train"]["dropout"] == 0.1
    assert train_model(plain, 0).meta["digest"] != a.meta["digest"]
    assert a.meta["metrics"]["test_accuracy"] > 0.2  # it still learns (10 classes)
