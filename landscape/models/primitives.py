"""The forward's primitives, shared by the attention, the FFN and the block loop
(``landscape.models.functional``): norms (the reference's, the fused ones, the q/k norm),
activations, optional biases, RoPE, linear maps with and without the bias inside the product,
softcaps, sliding-window masks and training-time dropout.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from landscape.models.config import ModelConfig
from landscape.models.params import Params


def reference_norm(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
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


def rms(x: torch.Tensor, dims: tuple[int, ...], w: torch.Tensor | None, eps: float
         ) -> torch.Tensor:  # fmt: skip
    """RMSNorm of ``x`` over its last ``dims`` (their sizes), gain ``w`` (None: 1): what
    F.rms_norm computes, in three passes over ``x``. The CPU's F.rms_norm runs as six separate
    operations; on one thread, 2,176 rows of 64: 0.158 ms against 0.144 here, 1,088 of 256: 0.49
    against 0.21, 512 of 576: 2.0 against 0.21 (the same values, bit for bit, in all three on that
    machine)."""
    axes = tuple(range(-len(dims), 0))
    n = math.prod(dims)
    scale = x.square().sum(axes, keepdim=True).div_(n).add_(eps).rsqrt_()
    return x * scale if w is None else x * scale * w


def fused_norm(cfg: ModelConfig, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    """``reference_norm`` for inference: F.layer_norm's fused kernel, or ``rms``."""
    w, b = params.get(f"{prefix}.w"), params.get(f"{prefix}.b")
    d = x.shape[-1]
    if cfg.norm == "ln":
        return F.layer_norm(x, (d,), w, b, cfg.eps)
    if cfg.d_norm != d:
        return reference_norm(cfg, params, prefix, x)
    x = rms(x, (d,), w, cfg.eps)
    return x if b is None else x + b


def qk_norm(
    cfg: ModelConfig, params: Params, prefix: str, which: str, x: torch.Tensor, fused: bool = False
) -> torch.Tensor:
    """The q/k norm (``cfg.qk_norm``) of queries (``which="q"``) or keys (``"k"``) ``x``
    [..., heads, d_head], with the gain ``{prefix}.{which}_norm.w`` (missing: 1).

    RMSNorm ``x·√n / √(Σx² + n·ε)`` over the n = d_head entries of each head (``"head"``) or the
    n = heads·d_head entries of each position (``"full"``), ε = ``cfg.eps``, whatever ``cfg.norm``
    is: Qwen3 and OLMo 2 normalise q and k by RMS alone. ``fused`` computes it by ``rms``.
    """
    dims = x.shape[-1:] if cfg.qk_norm == "head" else x.shape[-2:]
    w = params.get(f"{prefix}.{which}_norm.w")
    if fused:
        return rms(x, tuple(dims), w, cfg.eps)
    n, axes = math.prod(dims), tuple(range(-len(dims), 0))
    y = x * math.sqrt(n) / torch.sqrt((x * x).sum(axes, keepdim=True) + n * cfg.eps)
    return y if w is None else y * w


def softcap(x: torch.Tensor, c: float) -> torch.Tensor:
    """``c·tanh(x / c)`` (in this order, as Gemma 2 computes it); c = 0 leaves x as it is."""
    return torch.tanh(x / c) * c if c else x


def window_mask(n_query: int, n_key: int, window: int, device: torch.device) -> torch.Tensor:
    """[queries, keys] True where key k is visible to query q: k ≤ q, and k > q − window when
    ``window`` > 0 (a sliding window on the causal mask)."""
    mask = torch.ones(n_query, n_key, dtype=torch.bool, device=device).tril()
    return mask.triu(1 - window) if window else mask


def activation(cfg: ModelConfig, x: torch.Tensor) -> torch.Tensor:
    if cfg.act == "gelu":
        return F.gelu(x)
    if cfg.act == "relu":
        return F.relu(x)
    if cfg.act == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return F.silu(x)


def bias_of(cfg: ModelConfig, params: Params, name: str) -> torch.Tensor | float:
    """A bias; a ``bias=False`` model may lack it, which means 0."""
    return params[name] if cfg.bias else params.get(name, 0.0)


def rotary(cfg: ModelConfig, x: torch.Tensor, base: float = 0.0) -> torch.Tensor:
    """RoPE on [batch, pos, heads, d_head] (Su et al. 2021, eq. 34, half-split pairing).

    Dimension i < r/2 pairs with i + r/2 (r = ``rot_dim``) and the pair at position t is rotated
    by the angle t·base^(−2i/r); dimensions from r on pass unchanged. ``base`` 0 means
    ``cfg.rotary_base`` (a layer's own is ``cfg.rotary_base_of(layer)``). With
    ``rotary_chunks`` n > 1 each of a head's n equal chunks is rotated so, as a head of its own
    (the circuits space's joint form of a rotary model, landscape/models/circuits.py).
    """
    n = cfg.rotary_chunks
    if n > 1:  # each chunk of a head rotated as a head of its own
        heads = x.shape[-2]
        x = x.unflatten(-1, (n, -1)).flatten(-3, -2)  # (batch, pos, heads·n, d_head / n)
    r = cfg.rot_dim
    t = torch.arange(x.shape[1], device=x.device, dtype=torch.float64)
    base = base or cfg.rotary_base
    inv_freq = base ** (-torch.arange(0, r, 2, device=x.device, dtype=torch.float64) / r)
    angles = torch.outer(t, inv_freq)  # (pos, r/2)
    cos = angles.cos().to(x.dtype)[None, :, None, :]
    sin = angles.sin().to(x.dtype)[None, :, None, :]
    x1, x2, rest = x[..., : r // 2], x[..., r // 2 : r], x[..., r:]
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)
    return out.unflatten(-2, (heads, n)).flatten(-2) if n > 1 else out


def fused_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """``x @ w + b`` over the last axis of ``x``; the bias rides in the matrix product (addmm)."""
    if not isinstance(b, torch.Tensor):
        return x @ w if b == 0.0 else x @ w + b
    if x.ndim == 2:
        return torch.addmm(b, x, w)
    return torch.addmm(b, x.flatten(0, -2), w).unflatten(0, x.shape[:-1])


def reference_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    return x @ w + b


class Dropout:
    """Training-time dropout drawn from its own seeded generator, so that a seed's training is
    reproducible whatever else draws random numbers: each entry is zeroed with probability ``p``
    and the rest scaled by 1 / (1 − ``p``)."""

    def __init__(self, p: float, seed: int, device: torch.device | str = "cpu") -> None:
        if not 0.0 < p < 1.0:
            raise ValueError(f"dropout probability must be in (0, 1), got {p}")
        self.p = p
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x, self.uniform(x.shape, x.device, x.dtype))

    def uniform(self, shape: torch.Size, device: torch.device, dtype: torch.dtype
                ) -> torch.Tensor:  # fmt: skip
        """The generator's next draws, one uniform in [0, 1) per entry of ``shape``."""
        return torch.rand(shape, generator=self.generator, device=device, dtype=dtype)

    def drop(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``x`` with the entries whose draw ``u`` < p zeroed and the rest scaled by 1/(1 − p).
        Apart from ``__call__`` (the solo case), batched training (one seed per slice of a
        ``torch.vmap``, ``landscape.models.batched``) draws each seed's ``u`` from its own
        generator and drops through this."""
        return x * (u >= self.p).to(x.dtype) / (1.0 - self.p)
