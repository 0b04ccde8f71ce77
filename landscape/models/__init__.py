"""Functional models over flat parameter dicts in canonical names.

Three architectures share one vocabulary of parameter names and one pre-norm block:

- ``mlp``: residual MLP. ``x0 = x·W_E + b_E``; each block
  ``x + W_out·act(W_in·N(x) + b_in) + b_out``; final norm, linear readout ``W_U``.
- ``vit``: pre-norm ViT. Patches are embedded by ``W_E`` (+ ``b_E``), a class token ``cls`` is
  prepended, learned positions ``W_pos`` added; attention + MLP blocks; the class token is read.
- ``gpt``: pre-norm causal language model with token embeddings (learned positions by default).

Optional extensions, all off by default (imported checkpoints, DESIGN §3;
``landscape.models.importers``):

- ``pos``: ``"learned"`` (``W_pos``), ``"rotary"`` (RoPE on q and k, no ``W_pos``; the
  half-split pairing of dimension i with i + r/2 over the first ``rotary_dim`` = r dimensions of
  each head, base ``rotary_base``) or ``"none"``.
- ``n_kv_heads`` < ``n_heads``: grouped-query attention. ``W_K``/``W_V`` (and ``b_K``/``b_V``) are
  [n_kv_heads, d_model, d_head]; query head h reads key/value head h // (n_heads / n_kv_heads),
  so consecutive query heads share a group. ``W_Q``/``W_O`` keep n_heads.
- ``mlp="gated"``: SwiGLU-style FFN, ``(act(x·W_gate + b_gate) ⊙ (x·W_in + b_in))·W_out + b_out``
  with ``W_gate`` [d_model, d_mlp] beside ``W_in``.
- ``bias=False``: no attention, FFN or unembedding biases (embedding/patch and norm parameters
  are unaffected); ``attn_scale`` > 0 replaces 1/√d_head; ``act="gelu_tanh"`` is the tanh
  approximation of GELU.
- ``channels`` > 0 (vit): images are [batch, channels, H, W] and a patch is flattened
  channel-major (channels × patch × patch, the order of a conv patch embedding's weight);
  ``channels=0`` keeps grey [batch, H, W] images.

All matrices multiply on the right (``x @ W``). Canonical shapes:
``W_Q/W_K/W_V`` [n_heads, d_model, d_head], ``W_O`` [n_heads, d_head, d_model],
``W_in`` [d_model, d_mlp], ``W_out`` [d_mlp, d_model], ``W_U`` [d_model, n_out].

Norm parameters are optional: a missing gain means 1, a missing bias 0. That is how folded
parameter sets (gains and biases moved into the readers) run through the same forward.
RMSNorm is written as ``x·√d_norm / √(Σx² + d_norm·ε)`` so that a stream embedded into a wider
space (``d_norm`` < ``d_model``) keeps the original normalisation exactly.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]

ARCHS = ("mlp", "vit", "gpt")
NORMS = ("rms", "ln")
ACTS = ("gelu", "relu", "silu", "gelu_tanh")
POS = ("learned", "rotary", "none")
MLPS = ("plain", "gated")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of one model; frozen so it doubles as a cache key."""

    arch: str
    d_model: int
    d_mlp: int
    n_layers: int
    n_out: int  # classes, or vocabulary size for gpt
    n_heads: int = 0
    d_head: int = 0
    d_in: int = 0  # mlp: input features; vit: pixels per patch
    n_ctx: int = 0  # vit: patches + class token; gpt: context length
    d_vocab: int = 0  # gpt: input vocabulary
    image_size: int = 0  # vit: side of the square image
    patch_size: int = 0  # vit: side of the square patch
    norm: str = "rms"
    act: str = "gelu"
    eps: float = 1e-5
    d_norm: int = 0  # width RMSNorm divides by; 0 means d_model
    # Extensions (module docstring); their defaults are the original behaviour and are left out
    # of to_dict, so configs that do not use them keep their dicts and cache keys.
    pos: str = "learned"
    rotary_base: float = 10000.0
    rotary_dim: int = 0  # 0 means d_head
    n_kv_heads: int = 0  # 0 means n_heads
    mlp: str = "plain"
    bias: bool = True
    attn_scale: float = 0.0  # 0 means 1/√d_head
    channels: int = 0  # vit: 0 means grey [batch, H, W] images

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown architecture {self.arch!r}; expected one of {ARCHS}")
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; expected one of {NORMS}")
        if self.act not in ACTS:
            raise ValueError(f"unknown activation {self.act!r}; expected one of {ACTS}")
        if self.pos not in POS:
            raise ValueError(f"unknown positions {self.pos!r}; expected one of {POS}")
        if self.mlp not in MLPS:
            raise ValueError(f"unknown mlp {self.mlp!r}; expected one of {MLPS}")
        if min(self.d_model, self.d_mlp, self.n_layers, self.n_out) <= 0:
            raise ValueError("d_model, d_mlp, n_layers and n_out must be positive")
        if self.arch == "mlp" and self.d_in <= 0:
            raise ValueError("mlp needs d_in > 0")
        if self.arch in ("vit", "gpt") and (self.n_heads <= 0 or self.d_head <= 0):
            raise ValueError(f"{self.arch} needs n_heads > 0 and d_head > 0")
        if self.n_kv_heads < 0 or (self.n_kv_heads and self.n_heads % self.n_kv_heads):
            raise ValueError("n_kv_heads must divide n_heads")
        if self.rotary_dim < 0 or self.rotary_dim % 2 or self.rotary_dim > max(self.d_head, 0):
            raise ValueError("rotary_dim must be even and at most d_head")
        if self.channels < 0:
            raise ValueError("channels must be >= 0")
        if self.arch == "vit":
            if self.image_size % max(self.patch_size, 1) or self.patch_size <= 0:
                raise ValueError("vit needs image_size divisible by patch_size > 0")
            n_patches = (self.image_size // self.patch_size) ** 2
            object.__setattr__(self, "n_ctx", n_patches + 1)
            object.__setattr__(self, "d_in", self.patch_size**2 * max(self.channels, 1))
        if self.arch == "gpt" and (self.d_vocab <= 0 or self.n_ctx <= 0):
            raise ValueError("gpt needs d_vocab > 0 and n_ctx > 0")
        if self.d_norm == 0:
            object.__setattr__(self, "d_norm", self.d_model)

    @property
    def has_attn(self) -> bool:
        return self.arch in ("vit", "gpt")

    @property
    def kv_heads(self) -> int:
        """Key/value heads (grouped-query attention when fewer than ``n_heads``)."""
        return self.n_kv_heads or self.n_heads

    @property
    def rot_dim(self) -> int:
        """Dimensions of each head that RoPE rotates (0 without rotary positions)."""
        return (self.rotary_dim or self.d_head) if self.pos == "rotary" else 0

    @property
    def gated(self) -> bool:
        return self.mlp == "gated"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for name, default in _EXTENSION_DEFAULTS.items():
            if d[name] == default:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        return cls(**d)

    def replace(self, **changes: Any) -> ModelConfig:
        return replace(self, **changes)


_EXTENSION_DEFAULTS: dict[str, Any] = {
    "pos": "learned",
    "rotary_base": 10000.0,
    "rotary_dim": 0,
    "n_kv_heads": 0,
    "mlp": "plain",
    "bias": True,
    "attn_scale": 0.0,
    "channels": 0,
}


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter of a freshly initialised model and its shape (norm gains/biases included)."""
    d, f, h, e = cfg.d_model, cfg.d_mlp, cfg.n_heads, cfg.d_head
    shapes: dict[str, tuple[int, ...]] = {}
    if cfg.arch == "gpt":
        shapes["embed.W_E"] = (cfg.d_vocab, d)
    else:
        shapes["embed.W_E"] = (cfg.d_in, d)
        shapes["embed.b_E"] = (d,)
    if cfg.arch == "vit":
        shapes["embed.cls"] = (d,)
    if cfg.has_attn and cfg.pos == "learned":
        shapes["pos_embed.W_pos"] = (cfg.n_ctx, d)

    def norm(prefix: str) -> None:
        shapes[f"{prefix}.w"] = (d,)
        if cfg.norm == "ln":
            shapes[f"{prefix}.b"] = (d,)

    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        if cfg.has_attn:
            norm(f"{b}.ln1")
            for m in "QKV":
                hm = h if m == "Q" else cfg.kv_heads
                shapes[f"{b}.attn.W_{m}"] = (hm, d, e)
                shapes[f"{b}.attn.b_{m}"] = (hm, e)
            shapes[f"{b}.attn.W_O"] = (h, e, d)
            shapes[f"{b}.attn.b_O"] = (d,)
        norm(f"{b}.ln2")
        shapes[f"{b}.mlp.W_in"] = (d, f)
        shapes[f"{b}.mlp.b_in"] = (f,)
        if cfg.gated:
            shapes[f"{b}.mlp.W_gate"] = (d, f)
            shapes[f"{b}.mlp.b_gate"] = (f,)
        shapes[f"{b}.mlp.W_out"] = (f, d)
        shapes[f"{b}.mlp.b_out"] = (d,)
    norm("ln_final")
    shapes["unembed.W_U"] = (d, cfg.n_out)
    shapes["unembed.b_U"] = (cfg.n_out,)
    if not cfg.bias:
        shapes = {k: v for k, v in shapes.items() if not _is_dropped_bias(k)}
    return shapes


def _is_dropped_bias(name: str) -> bool:
    """The biases a ``bias=False`` model lacks: attention, FFN and unembedding."""
    parts = name.split(".")
    return parts[-1].startswith("b_") and parts[-2] in ("attn", "mlp", "unembed")


def init_params(cfg: ModelConfig, seed: int, dtype: torch.dtype = torch.float32) -> Params:
    """Seeded initialisation: N(0, 1/fan_in) matrices, zero biases, unit gains, small embeddings."""
    gen = torch.Generator().manual_seed(seed)
    params: Params = {}
    for name, shape in param_shapes(cfg).items():
        leaf = name.rsplit(".", 1)[1]
        if leaf == "w":
            t = torch.ones(shape)
        elif leaf.startswith("b_") or leaf == "b":
            t = torch.zeros(shape)
        elif leaf in ("W_pos", "cls") or (leaf == "W_E" and cfg.arch == "gpt"):
            t = 0.02 * torch.randn(shape, generator=gen)
        else:
            fan_in = shape[-2] if leaf != "W_O" else shape[0] * shape[1]
            if leaf in ("W_Q", "W_K", "W_V"):
                fan_in = shape[1]
            t = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
            if leaf in ("W_out", "W_O"):
                t = t / math.sqrt(2 * cfg.n_layers)  # keep the residual stream's scale bounded
        params[name] = t.to(dtype)
    return params


def count_params(cfg: ModelConfig) -> int:
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def _norm(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    if cfg.norm == "ln":
        x = x - x.mean(-1, keepdim=True)
        x = x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.eps)
    else:
        dn = cfg.d_norm
        x = x * math.sqrt(dn) / torch.sqrt((x * x).sum(-1, keepdim=True) + dn * cfg.eps)
    w = params.get(f"{prefix}.w")
    if w is not None:
        x = x * w
    b = params.get(f"{prefix}.b")
    if b is not None:
        x = x + b
    return x


def _fused_norm(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    """``_norm`` through one fused kernel (F.layer_norm, F.rms_norm) where one exists."""
    w, b = params.get(f"{prefix}.w"), params.get(f"{prefix}.b")
    d = x.shape[-1]
    if cfg.norm == "ln":
        return F.layer_norm(x, (d,), w, b, cfg.eps)
    if cfg.d_norm != d:
        return _norm(cfg, params, prefix, x)
    x = F.rms_norm(x, (d,), w, cfg.eps)
    return x if b is None else x + b


def _act(cfg: ModelConfig, x: torch.Tensor) -> torch.Tensor:
    if cfg.act == "gelu":
        return F.gelu(x)
    if cfg.act == "relu":
        return F.relu(x)
    if cfg.act == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return F.silu(x)


def _bias(cfg: ModelConfig, params: Params, name: str) -> torch.Tensor | float:
    """A bias; a ``bias=False`` model may lack it, which means 0."""
    return params[name] if cfg.bias else params.get(name, 0.0)


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


def embed(cfg: ModelConfig, params: Params, inputs: torch.Tensor) -> torch.Tensor:
    """Residual stream before the first block."""
    if cfg.arch == "mlp":
        return inputs @ params["embed.W_E"] + params["embed.b_E"]  # (batch, d_model)
    if cfg.arch == "vit":
        x = patchify(cfg, inputs) @ params["embed.W_E"] + params["embed.b_E"]
        cls = params["embed.cls"].expand(x.shape[0], 1, cfg.d_model)
        x = torch.cat([cls, x], dim=1)  # (batch, pos, d_model)
        return x + params["pos_embed.W_pos"] if cfg.pos == "learned" else x
    t = inputs.shape[-1]
    x = params["embed.W_E"][inputs]  # (batch, pos, d_model)
    return x + params["pos_embed.W_pos"][:t] if cfg.pos == "learned" else x


def rotary(cfg: ModelConfig, x: torch.Tensor) -> torch.Tensor:
    """RoPE on [batch, pos, heads, d_head] (Su et al. 2021, eq. 34, half-split pairing).

    Dimension i < r/2 pairs with i + r/2 (r = ``rot_dim``) and the pair at position t is rotated
    by the angle t·base^(−2i/r); dimensions from r on pass unchanged.
    """
    r = cfg.rot_dim
    t = torch.arange(x.shape[1], device=x.device, dtype=torch.float64)
    inv_freq = cfg.rotary_base ** (-torch.arange(0, r, 2, device=x.device, dtype=torch.float64) / r)
    angles = torch.outer(t, inv_freq)  # (pos, r/2)
    cos = angles.cos().to(x.dtype)[None, :, None, :]
    sin = angles.sin().to(x.dtype)[None, :, None, :]
    x1, x2, rest = x[..., : r // 2], x[..., r // 2 : r], x[..., r:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """``x @ w + b`` over the last axis of ``x``; the bias rides in the matrix product (addmm)."""
    if not isinstance(b, torch.Tensor):
        return x @ w if b == 0.0 else x @ w + b
    if x.ndim == 2:
        return torch.addmm(b, x, w)
    return torch.addmm(b, x.flatten(0, -2), w).unflatten(0, x.shape[:-1])


def _qkv_weights(
    cfg: ModelConfig, params: Params, prefix: str
) -> tuple[torch.Tensor, torch.Tensor | float]:
    """``W_Q | W_K | W_V`` side by side, [d_model, (n_heads + 2·kv_heads)·d_head], and their
    biases in the same order (0.0 for a bias-free model): one matrix product for all three."""
    mats = [params[f"{prefix}.W_{m}"] for m in "QKV"]
    w = torch.cat(mats).transpose(0, 1).flatten(1)
    biases = [_bias(cfg, params, f"{prefix}.b_{m}") for m in "QKV"]
    if not any(isinstance(b, torch.Tensor) for b in biases):
        return w, 0.0
    parts = [
        b.flatten(-2) if isinstance(b, torch.Tensor) else w.new_zeros(m.shape[0] * m.shape[2])
        for b, m in zip(biases, mats, strict=True)
    ]
    return w, torch.cat(parts)


# Contexts up to this length, without a causal mask, use the hand-written attention below;
# longer or causal ones the fused kernel (F.scaled_dot_product_attention). Measured on the CPU,
# one thread: the attention of vit-digits (17 positions, d_head 8) runs about 2× faster by hand;
# a gpt-shakespeare forward (64 positions, causal) 20–25% faster with the fused kernel, which
# also won at 65 and 197 positions without a mask.
SHORT_CONTEXT = 32


def _fused_attention_ok(q: torch.Tensor, causal: bool, n_keys: int) -> bool:
    """Whether the fused kernel is the faster choice here. Not under ``torch.func.vmap``: the
    CPU kernel has no batching rule there and would run one slice at a time."""
    return (causal or n_keys > SHORT_CONTEXT) and not torch._C._functorch.is_batchedtensor(q)


def _attend(
    cfg: ModelConfig,
    params: Params,
    prefix: str,
    x: torch.Tensor,
    n_query: int = 0,
) -> torch.Tensor:
    """``attention`` for inference, on ``x`` [batch, pos, d_model]; the queries of the first
    ``n_query`` positions only when ``n_query`` > 0 (keys and values cover every position).

    One matrix product gives queries, keys and values (keys and values alone, and a small one for
    the few queries, when ``n_query`` > 0). Causal or long contexts then go to the fused kernel,
    short ones to ``_hand_attention``.
    """
    h, g, e = cfg.n_heads, cfg.kv_heads, cfg.d_head
    w, b = _qkv_weights(cfg, params, prefix)
    if n_query and cfg.pos != "rotary":
        q = _linear(x[:, :n_query], w[:, : h * e], _part(b, 0, h * e)).unflatten(-1, (h, e))
        kv = _linear(x, w[:, h * e :], _part(b, h * e, None)).unflatten(-1, (2 * g, e))
        kv = kv.permute(2, 0, 1, 3).contiguous()  # (2·kv_heads, batch, pos, d_head)
        z = _hand_attention(cfg, q.permute(2, 0, 1, 3), kv)
    else:
        qkv = _linear(x, w, b).unflatten(-1, (h + 2 * g, e))  # (batch, pos, heads, d_head)
        if cfg.pos == "rotary":  # the same rotation for queries and keys
            qkv = torch.cat([rotary(cfg, qkv[:, :, : h + g]), qkv[:, :, h + g :]], dim=2)
        causal = cfg.arch == "gpt"
        if not n_query and _fused_attention_ok(qkv, causal, x.shape[1]):
            qkv = qkv.transpose(1, 2)  # (batch, heads, pos, d_head)
            q, k, v = qkv[:, :h], qkv[:, h : h + g], qkv[:, h + g :]
            z = F.scaled_dot_product_attention(
                q, k, v, is_causal=causal, scale=cfg.attn_scale or None, enable_gqa=g != h
            ).transpose(1, 2)  # (batch, pos, n_heads, d_head)
        else:
            qkv = qkv.permute(2, 0, 1, 3).contiguous()  # (heads, batch, pos, d_head)
            z = _hand_attention(cfg, qkv[:h, :, : n_query or None], qkv[h:])
    w_o, b_o = params[f"{prefix}.W_O"].flatten(0, 1), _bias(cfg, params, f"{prefix}.b_O")
    return _linear(z.flatten(2), w_o, b_o)


def _part(b: torch.Tensor | float, start: int, stop: int | None) -> torch.Tensor | float:
    """Entries ``start:stop`` of a bias; 0.0 (no bias) stays 0.0."""
    return b[start:stop] if isinstance(b, torch.Tensor) else b


def _hand_attention(cfg: ModelConfig, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """Softmax attention on head-major blocks: queries ``q`` [n_heads, batch, queries, d_head]
    (the first positions), keys then values ``kv`` [2·kv_heads, batch, keys, d_head]. Returns
    the per-head outputs [batch, queries, n_heads, d_head].

    The scores are built transposed, [keys, queries]: the softmax over keys then runs along a
    strided axis, vectorised across queries, and the small products come out [d_head, queries],
    each about twice as fast as in the textbook layout for the short contexts here. The h/g query
    heads of one group (grouped-query attention) read their key/value head without copies.
    """
    h, g, e = cfg.n_heads, cfg.kv_heads, cfg.d_head
    k, v = kv[:g, None], kv[g:, None]  # (kv_heads, 1, batch, keys, d_head)
    q = q.unflatten(0, (g, h // g))  # (kv_heads, h/g, batch, queries, d_head)
    scores_t = k @ q.transpose(-1, -2)  # (kv_heads, h/g, batch, keys, queries)
    scores_t = scores_t * cfg.attn_scale if cfg.attn_scale else scores_t / math.sqrt(e)
    if cfg.arch == "gpt":  # causal: key t is hidden from the queries before it
        tk, tq = scores_t.shape[-2:]
        future = torch.ones(tk, tq, dtype=torch.bool, device=q.device).tril(-1)
        scores_t = scores_t.masked_fill(future, float("-inf"))
    z_t = v.transpose(-1, -2) @ scores_t.softmax(-2)  # (kv_heads, h/g, batch, d_head, queries)
    return z_t.flatten(0, 1).permute(1, 3, 0, 2)


def attention(
    cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor, cache: dict | None = None
) -> torch.Tensor:
    q, k, v = (
        torch.einsum("bpd,hde->bphe", x, params[f"{prefix}.W_{m}"])
        + _bias(cfg, params, f"{prefix}.b_{m}")
        for m in "QKV"
    )  # (batch, pos, heads, d_head); k and v have kv_heads
    if cfg.pos == "rotary":
        q, k = rotary(cfg, q), rotary(cfg, k)
    if cfg.kv_heads != cfg.n_heads:  # grouped-query: each key/value head serves a run of queries
        k = k.repeat_interleave(cfg.n_heads // cfg.kv_heads, dim=2)
        v = v.repeat_interleave(cfg.n_heads // cfg.kv_heads, dim=2)
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k)
    # dividing by √d_head (not multiplying by its inverse) keeps the original rounding
    scores = scores * cfg.attn_scale if cfg.attn_scale else scores / math.sqrt(cfg.d_head)
    if cfg.arch == "gpt":
        t = x.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    pattern = scores.softmax(-1)
    z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)  # (batch, pos, n_heads, d_head)
    if cache is not None:
        cache[f"{prefix}.z"] = z
    out = torch.einsum("bqhe,hed->bqd", z, params[f"{prefix}.W_O"])
    return out + _bias(cfg, params, f"{prefix}.b_O")


def forward(
    cfg: ModelConfig, params: Params, inputs: torch.Tensor, cache: dict | None = None
) -> torch.Tensor:
    """Logits: mlp/vit [batch, n_out]; gpt [batch, pos, n_out].

    If ``cache`` is a dict, it is filled with ``resid.{l}`` (the residual stream entering block l;
    ``resid.{n_layers}`` enters the final norm), ``blocks.{l}.mlp.hidden`` (post-activation) and
    ``blocks.{l}.attn.z`` (per-head outputs before W_O).
    """
    return forward_resid(cfg, params, embed(cfg, params, inputs), cache)


def forward_resid(
    cfg: ModelConfig, params: Params, x: torch.Tensor, cache: dict | None = None
) -> torch.Tensor:
    """``forward`` from the residual stream ``x`` that ``embed`` returns: the blocks, the final
    norm and the readout. ``embed`` is linear in the parameters, so a mixture of models can start
    from the same mixture of their embeddings (``barrier.evaluate_mixtures``).

    Two implementations of one function. With a ``cache``, or when autograd records (training,
    learned matching), the reference below: the shipped checkpoints were trained with its rounding,
    and retraining reproduces them bit for bit. Otherwise (evaluation: curves, metrics) the same
    function up to float32 rounding, faster: ``_inference_forward``.
    """
    if cache is None and not _records_grad(params, x):
        return _inference_forward(cfg, params, x)
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        if cache is not None:
            cache[f"resid.{layer}"] = x
        if cfg.has_attn:
            x = x + attention(cfg, params, f"{b}.attn", _norm(cfg, params, f"{b}.ln1", x), cache)
        xn = _norm(cfg, params, f"{b}.ln2", x)
        h = xn @ params[f"{b}.mlp.W_in"] + _bias(cfg, params, f"{b}.mlp.b_in")
        if cfg.gated:
            gate = xn @ params[f"{b}.mlp.W_gate"] + _bias(cfg, params, f"{b}.mlp.b_gate")
            h = _act(cfg, gate) * h
        else:
            h = _act(cfg, h)
        if cache is not None:
            cache[f"{b}.mlp.hidden"] = h
        x = x + h @ params[f"{b}.mlp.W_out"] + _bias(cfg, params, f"{b}.mlp.b_out")
    if cache is not None:
        cache[f"resid.{cfg.n_layers}"] = x
    if cfg.arch == "vit":
        x = x[:, 0]
    x = _norm(cfg, params, "ln_final", x)
    return x @ params["unembed.W_U"] + _bias(cfg, params, "unembed.b_U")


def _records_grad(params: Params, x: torch.Tensor) -> bool:
    """Whether autograd records a forward of these parameters on ``x``."""
    if not torch.is_grad_enabled():
        return False
    return x.requires_grad or any(p.requires_grad for p in params.values())


def _inference_forward(cfg: ModelConfig, params: Params, x: torch.Tensor) -> torch.Tensor:
    """``forward_resid`` for logits alone, without autograd: fused norms, biases inside the
    matrix products, ``_attend`` for attention. A ViT reads only the class token, so its last
    block computes keys and values of every position but the rest for the class token alone."""
    for layer in range(cfg.n_layers):
        b = f"blocks.{layer}"
        if cfg.has_attn:
            n_query = 1 if cfg.arch == "vit" and layer == cfg.n_layers - 1 else 0
            out = _attend(
                cfg, params, f"{b}.attn", _fused_norm(cfg, params, f"{b}.ln1", x), n_query
            )
            x = (x[:, :n_query] if n_query else x) + out
        xn = _fused_norm(cfg, params, f"{b}.ln2", x)
        h = _linear(xn, params[f"{b}.mlp.W_in"], _bias(cfg, params, f"{b}.mlp.b_in"))
        if cfg.gated:
            gate = _linear(xn, params[f"{b}.mlp.W_gate"], _bias(cfg, params, f"{b}.mlp.b_gate"))
            h = _act(cfg, gate) * h
        else:
            h = _act(cfg, h)
        x = x + _linear(h, params[f"{b}.mlp.W_out"], _bias(cfg, params, f"{b}.mlp.b_out"))
    if cfg.arch == "vit":
        x = x[:, 0]
    x = _fused_norm(cfg, params, "ln_final", x)
    return _linear(x, params["unembed.W_U"], _bias(cfg, params, "unembed.b_U"))


def loss_and_accuracy(
    cfg: ModelConfig, logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy (nats) and accuracy over every prediction in the batch."""
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    loss = F.cross_entropy(logits, targets)
    acc = (logits.argmax(-1) == targets).float().mean()
    return loss, acc
