"""The architectures: one entry each, holding every fact that other code branches on.

An :class:`Architecture` says what a model of its kind reads (``inputs``: feature vectors,
images or token ids), whether its blocks have attention and whether that attention is causal,
whether its inputs are sequences of positions, which positions the readout reads, which
embedding parameters exist, how inputs are embedded into the residual stream and which fields a
config of it needs. The rest is shared by every architecture: the blocks, whose norms sit where
their layout says (:mod:`landscape.models.layouts`), the final norm and the readout ``W_U``
(:mod:`landscape.models.functional`), the parameter names and their initialisation
(:mod:`landscape.models.params`).

Code asks the registry (``architecture_of(cfg).causal``), not ``cfg.arch``: inside
``landscape.models`` this module is the only reader of ``cfg.arch``.

Adding an architecture
----------------------
1. One :class:`Architecture` in ``ARCHITECTURES`` below: its facts, ``embedding`` (the shapes of
   its embedding parameters), ``embed`` (inputs → residual stream) and ``check`` / ``derive``
   (the fields it needs, the fields that follow from others). Its embedding parameters use the
   shared names (``embed.W_E``, ``embed.b_E``, ``embed.cls``, ``pos_embed.W_pos``), so symmetry
   specs, processing, matching and experiments work on it unchanged. ``inputs`` is one of the
   three kinds the data loaders know.
2. If its checkpoints come from another library, one importer file in
   ``landscape/models/importers/`` (``MODEL_TYPE``, ``FAMILY``, ``convert``), listed in
   ``importers/__init__.py``.

Worked example, the smallest entry: ``mlp`` reads feature vectors [batch, d_in], has no attention
and no positions, reads out its single stream vector, embeds by ``x·W_E + b_E`` (parameters
``embed.W_E`` [d_in, d_model] and ``embed.b_E`` [d_model]) and needs ``d_in > 0``::

    Architecture("mlp", "residual MLP", inputs="features", attention=False, causal=False,
                 positions=False, readout="vector", check=_needs_features,
                 embedding=_affine_embedding, embed=_embed_features)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

from landscape.models.layouts import layout_of

if TYPE_CHECKING:  # annotations only: the config and the parameter dicts sit above this module
    from landscape.models.config import ModelConfig
    from landscape.models.params import Params

Inputs = Literal["features", "images", "tokens"]
# What the readout reads: the one stream vector (no positions), the class token at position 0, or
# every position (each predicts the next token; in an encoder, its own token).
Readout = Literal["vector", "class token", "every position"]


def _no_fields(cfg: ModelConfig) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Architecture:
    """One kind of model: the facts code branches on and the parts that differ per kind.

    ``check(cfg)`` raises ``ValueError`` when a field the architecture needs is missing; it runs
    before the checks shared by every architecture. ``derive(cfg)`` returns the fields that follow
    from the others (and refuses what they need); it runs after them.
    """

    name: str
    title: str  # the head of its one-line description
    inputs: Inputs
    attention: bool
    causal: bool
    positions: bool  # inputs are sequences of positions, so ``cfg.pos`` applies
    readout: Readout
    check: Callable[[ModelConfig], None]
    embedding: Callable[[ModelConfig], dict[str, tuple[int, ...]]]
    embed: Callable[[ModelConfig, Params, torch.Tensor], torch.Tensor]
    derive: Callable[[ModelConfig], dict[str, Any]] = _no_fields


# ----------------------------------------------------------------------------- checks


def _needs_features(cfg: ModelConfig) -> None:
    if cfg.d_in <= 0:
        raise ValueError(f"{cfg.arch} needs d_in > 0")


def _needs_heads(cfg: ModelConfig) -> None:
    if cfg.n_heads <= 0 or cfg.d_head <= 0:
        raise ValueError(f"{cfg.arch} needs n_heads > 0 and d_head > 0")


def _patch_fields(cfg: ModelConfig) -> dict[str, Any]:
    """Context (patches + class token) and pixels per patch of a ViT."""
    if cfg.image_size % max(cfg.patch_size, 1) or cfg.patch_size <= 0:
        raise ValueError(f"{cfg.arch} needs image_size divisible by patch_size > 0")
    n_patches = (cfg.image_size // cfg.patch_size) ** 2
    return {"n_ctx": n_patches + 1, "d_in": cfg.patch_size**2 * max(cfg.channels, 1)}


def _token_fields(cfg: ModelConfig) -> dict[str, Any]:
    if cfg.d_vocab <= 0 or cfg.n_ctx <= 0:
        raise ValueError(f"{cfg.arch} needs d_vocab > 0 and n_ctx > 0")
    return {}


# ----------------------------------------------------------------------------- embeddings


def _affine_embedding(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    return {"embed.W_E": (cfg.d_in, cfg.d_model), "embed.b_E": (cfg.d_model,)}


def _patch_embedding(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    return {**_affine_embedding(cfg), "embed.cls": (cfg.d_model,)}


def _token_embedding(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    return {"embed.W_E": (cfg.d_vocab, cfg.d_model)}


def patchify(cfg: ModelConfig, images: torch.Tensor) -> torch.Tensor:
    """[batch, H, W] → [batch, n_patches, patch²], patches in row-major order.

    With ``channels`` > 0: [batch, C, H, W] → [batch, n_patches, C·patch²] (channel-major).
    """
    p = cfg.patch_size
    n = cfg.image_size // p
    if cfg.channels:
        x = images.reshape(images.shape[0], cfg.channels, n, p, n, p)
        return x.permute(0, 2, 4, 1, 3, 5).reshape(images.shape[0], n * n, cfg.d_in)
    x = images.reshape(images.shape[0], n, p, n, p)
    return x.permute(0, 1, 3, 2, 4).reshape(images.shape[0], n * n, p * p)


def _embed_features(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    return inputs @ params["embed.W_E"] + params["embed.b_E"]  # (batch, d_model)


def _embed_patches(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    x = patchify(cfg, inputs) @ params["embed.W_E"] + params["embed.b_E"]
    cls = params["embed.cls"].expand(x.shape[0], 1, cfg.d_model)
    x = torch.cat([cls, x], dim=1)  # (batch, pos, d_model)
    return x + params["pos_embed.W_pos"] if cfg.pos == "learned" else x


def _embed_tokens(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    t = inputs.shape[-1]
    x = params["embed.W_E"][inputs]  # (batch, pos, d_model)
    return x + params["pos_embed.W_pos"][:t] if cfg.pos == "learned" else x


# ----------------------------------------------------------------------------- the registry


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in [
        Architecture("mlp", "residual MLP", inputs="features", attention=False, causal=False,
                     positions=False, readout="vector", check=_needs_features,
                     embedding=_affine_embedding, embed=_embed_features),
        Architecture("vit", "pre-norm ViT", inputs="images", attention=True, causal=False,
                     positions=True, readout="class token", check=_needs_heads,
                     embedding=_patch_embedding, embed=_embed_patches, derive=_patch_fields),
        Architecture("gpt", "pre-norm causal GPT", inputs="tokens", attention=True, causal=True,
                     positions=True, readout="every position", check=_needs_heads,
                     embedding=_token_embedding, embed=_embed_tokens, derive=_token_fields),
        # BERT-style encoders (block="postln"): every position (masked LM, or the bare encoder's
        # hidden states), or the first token for a sequence classifier's pooler
        Architecture("bert", "bidirectional encoder", inputs="tokens", attention=True,
                     causal=False, positions=True, readout="every position", check=_needs_heads,
                     embedding=_token_embedding, embed=_embed_tokens, derive=_token_fields),
        Architecture("bert-cls", "bidirectional encoder classifier", inputs="tokens",
                     attention=True, causal=False, positions=True, readout="class token",
                     check=_needs_heads, embedding=_token_embedding, embed=_embed_tokens,
                     derive=_token_fields),
    ]
}  # fmt: skip


def architecture(name: str) -> Architecture:
    """The registry entry called ``name``; ``ValueError`` naming the known ones otherwise."""
    if not isinstance(name, str) or name not in ARCHITECTURES:  # a list from JSON is no key
        raise ValueError(f"unknown architecture {name!r}; expected one of {tuple(ARCHITECTURES)}")
    return ARCHITECTURES[name]


def architecture_of(cfg: ModelConfig) -> Architecture:
    """The registry entry of a config."""
    return ARCHITECTURES[cfg.arch]


# ----------------------------------------------------------------------------- derived facts

_ACT_NAMES = {"gelu": "GELU", "relu": "ReLU", "silu": "SiLU", "gelu_tanh": "GELU (tanh)"}


def describe(cfg: ModelConfig, title: str | None = None) -> str:
    """One line describing the architecture, read from the whole config.

    The defaults (GELU, learned positions, biases, every head its own keys and values, pre-norm
    blocks) are left unsaid; every other choice is named (a block layout by its ``title``).
    ``title`` replaces the architecture's own name (an importer names the source family, e.g.
    "Llama-family causal LM").
    """
    arch = architecture_of(cfg)
    name = arch.title if title is None else title
    norm = "RMSNorm" if cfg.norm == "rms" else "LayerNorm"
    units = ("gated " if cfg.gated else "") + _ACT_NAMES[cfg.act]
    extras = [] if cfg.bias else ["no biases"]
    if cfg.moe:  # the FFN's width is then each expert's
        top = f"top {cfg.top_k}" + ("" if cfg.norm_top_k else " of a softmax over all")
        extras.insert(0, f"mixture of {cfg.n_experts} experts ({top}) per FFN")
    if not arch.attention:
        head = f"{name}, d={cfg.d_model}, {cfg.n_layers} blocks × {cfg.d_mlp} {units} units"
        return ", ".join([head, norm, *extras])
    mlp = "MLP" if units == "GELU" else f"{units} MLP"
    parts = [
        f"{name}, d={cfg.d_model}, {cfg.n_layers} layers × {cfg.n_heads} heads of {cfg.d_head}",
        f"{mlp} {cfg.d_mlp}",
        norm,
    ]
    if cfg.kv_heads != cfg.n_heads:
        parts.append(f"grouped-query attention ({cfg.kv_heads} key/value heads)")
    if cfg.pos != "learned":
        parts.append({"rotary": "rotary positions", "none": "no positions"}[cfg.pos])
    if cfg.pos == "rotary" and cfg.rot_dim < cfg.d_head:
        parts[-1] += f" on {cfg.rot_dim} of {cfg.d_head} head dimensions"
    if cfg.qk_norm != "none":
        parts.append({"head": "per-head q/k norm", "full": "q/k norm over all heads"}[cfg.qk_norm])
    if layout_of(cfg).title:
        parts.append(layout_of(cfg).title)
    if cfg.head != "linear":
        parts.append({"mlm": "masked-LM head", "pooler": "pooler (dense + tanh) head"}[cfg.head])
    return ", ".join(parts + _gemma_extras(cfg) + extras)


def _gemma_extras(cfg: ModelConfig) -> list[str]:
    """Per-layer rotary bases, softcaps and sliding windows (Gemma), named for ``describe``."""
    out = []
    if cfg.rotary_bases:
        out.append("rotary bases " + "/".join(f"{b:g}" for b in sorted(set(cfg.rotary_bases))))
    caps = [f"{what} {c:g}" for what, c in (("attention", cfg.attn_softcap),
                                            ("logits", cfg.logit_softcap)) if c]  # fmt: skip
    if caps:
        out.append(f"softcaps ({', '.join(caps)})")
    sliding = [w for w in cfg.windows if w]
    if sliding:
        sizes = "/".join(str(w) for w in sorted(set(sliding)))
        out.append(f"sliding windows of {sizes} on {len(sliding)} of {cfg.n_layers} layers")
    return out


def random_inputs(
    cfg: ModelConfig,
    batch: int,
    generator: torch.Generator,
    *,
    dtype: torch.dtype | None = None,
    positions: int = 0,
) -> torch.Tensor:
    """A seeded batch of inputs the model reads: Gaussian features [batch, d_in] or images
    [batch, (channels,) H, W] in ``dtype``, or uniform token ids [batch, positions] (``positions``
    0: the whole context)."""
    kind = architecture_of(cfg).inputs
    if kind == "features":
        return torch.randn(batch, cfg.d_in, generator=generator, dtype=dtype)
    if kind == "images":
        channels = (cfg.channels,) if cfg.channels else ()
        shape = (batch, *channels, cfg.image_size, cfg.image_size)
        return torch.randn(*shape, generator=generator, dtype=dtype)
    return torch.randint(0, cfg.d_vocab, (batch, positions or cfg.n_ctx), generator=generator)
