"""The architecture of one model as a frozen dataclass (it doubles as a cache key).

The options and what they change in the function are described in
:mod:`landscape.models.functional`; what differs per architecture (``arch``) is read from
:mod:`landscape.models.registry`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from landscape.models.layouts import LAYOUTS, block_layout
from landscape.models.registry import ARCHITECTURES, architecture, architecture_of

ARCHS = tuple(ARCHITECTURES)
NORMS = ("rms", "ln")
ACTS = ("gelu", "relu", "silu", "gelu_tanh")
POS = ("learned", "rotary", "none")
MLPS = ("plain", "gated")
# RMSNorm on queries and keys after their projection (landscape.models.primitives.qk_norm)
QK_NORMS = ("none", "head", "full")
# What sits between the residual stream and W_U (landscape.models.functional's docstring).
HEADS = ("linear", "mlm", "pooler")


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
    # Extensions (landscape.models.functional's docstring); their defaults are the original
    # behaviour and are left out of to_dict, so configs that do not use them keep their dicts and
    # cache keys.
    pos: str = "learned"
    rotary_base: float = 10000.0
    rotary_dim: int = 0  # 0 means d_head (d_head / rotary_chunks)
    rotary_chunks: int = 1  # RoPE on each of this many equal chunks of a head, as on a head
    n_kv_heads: int = 0  # 0 means n_heads
    mlp: str = "plain"
    bias: bool = True
    attn_scale: float = 0.0  # 0 means 1/√d_head
    channels: int = 0  # vit: 0 means grey [batch, H, W] images
    block: str = "pre"  # norm placement in a block: a name in landscape.models.layouts
    qk_norm: str = "none"  # RMSNorm on queries and keys: per head or over all heads; QK_NORMS
    attn_softcap: float = 0.0  # c > 0: attention scores ← c·tanh(scores / c)
    logit_softcap: float = 0.0  # c > 0: logits ← c·tanh(logits / c)
    windows: tuple[int, ...] = ()  # sliding window per layer (0: full); () every layer full
    rotary_bases: tuple[float, ...] = ()  # RoPE base per layer; () rotary_base in every layer
    head: str = "linear"  # layers before W_U; HEADS
    n_experts: int = 0  # > 0: each FFN a sparse mixture of this many experts (0: one FFN)
    top_k: int = 0  # experts each position is routed to (1 ≤ top_k ≤ n_experts with experts)
    # the routed weights: a softmax over the top k logits (True), or over all logits, kept on
    # the top k and not renormalised (False; needs experts); landscape.models.ffn.routing
    norm_top_k: bool = True

    def __post_init__(self) -> None:
        arch = architecture(self.arch)
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; expected one of {NORMS}")
        if self.act not in ACTS:
            raise ValueError(f"unknown activation {self.act!r}; expected one of {ACTS}")
        if self.pos not in POS:
            raise ValueError(f"unknown positions {self.pos!r}; expected one of {POS}")
        if self.mlp not in MLPS:
            raise ValueError(f"unknown mlp {self.mlp!r}; expected one of {MLPS}")
        layout = block_layout(self.block)
        if layout.norm_out and self.norm != "rms":
            # a post norm's output is added to the stream as it is: centring the writers
            # (LayerNorm → RMSNorm, landscape.symmetry.processing) would not centre the stream
            raise ValueError(f"block {self.block!r} needs norm 'rms' (post-norm LayerNorm: not "
                             "implemented)")  # fmt: skip
        if self.qk_norm not in QK_NORMS:
            raise ValueError(f"unknown qk_norm {self.qk_norm!r}; expected one of {QK_NORMS}")
        if self.qk_norm != "none" and not arch.attention:
            raise ValueError(f"qk_norm {self.qk_norm!r} needs attention; {self.arch} has none")
        if self.head not in HEADS:
            raise ValueError(f"unknown head {self.head!r}; expected one of {HEADS}")
        if self.head != "linear" and not layout.heads:
            heads = tuple(n for n, lay in LAYOUTS.items() if lay.heads)
            raise ValueError(f"head {self.head!r} is implemented for block in {heads} only")
        if min(self.d_model, self.d_mlp, self.n_layers, self.n_out) <= 0:
            raise ValueError("d_model, d_mlp, n_layers and n_out must be positive")
        self._check_caps_and_layers(arch.causal)
        self._check_experts()
        arch.check(self)
        if self.n_kv_heads < 0 or (self.n_kv_heads and self.n_heads % self.n_kv_heads):
            raise ValueError("n_kv_heads must divide n_heads")
        chunks = self.rotary_chunks
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise ValueError(f"rotary_chunks must be a positive integer, got {chunks!r}")
        if chunks > 1 and (self.pos != "rotary" or self.d_head % chunks):
            raise ValueError("rotary_chunks needs rotary positions and must divide d_head")
        chunk = max(self.d_head, 0) // chunks
        if self.rotary_dim < 0 or self.rotary_dim % 2 or self.rotary_dim > chunk:
            raise ValueError("rotary_dim must be even and at most d_head (a chunk's width)")
        if self.channels < 0:
            raise ValueError("channels must be >= 0")
        for name, value in arch.derive(self).items():
            object.__setattr__(self, name, value)
        if self.d_norm == 0:
            object.__setattr__(self, "d_norm", self.d_model)

    def _check_caps_and_layers(self, causal: bool) -> None:
        """Softcaps, per-layer windows and rotary bases. Lists read from JSON become tuples, so
        the config stays hashable; windows or bases that change nothing become (), and caps
        floats, so configs without them keep their dicts and cache keys."""
        for name in ("attn_softcap", "logit_softcap"):
            c = getattr(self, name)
            if isinstance(c, bool) or not isinstance(c, int | float) or not 0 <= c < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0 (0: off), got {c!r}")
            object.__setattr__(self, name, float(c))
        for name in ("windows", "rotary_bases"):
            v = getattr(self, name)
            if not isinstance(v, tuple | list) or (v and len(v) != self.n_layers):
                raise ValueError(f"{name} needs one entry per layer ({self.n_layers}), got {v!r}")
        windows = tuple(self.windows)
        if any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in windows):
            raise ValueError(f"windows must be integers >= 0 (0: full attention), got {windows}")
        if any(windows) and not causal:
            raise ValueError("sliding windows need a causal architecture")
        object.__setattr__(self, "windows", windows if any(windows) else ())
        bases = tuple(self.rotary_bases)
        numbers = all(isinstance(b, int | float) and not isinstance(b, bool) for b in bases)
        if not numbers or not all(0 < b < math.inf for b in bases):
            raise ValueError(f"rotary_bases must be positive numbers, got {bases}")
        bases = tuple(float(b) for b in bases)
        object.__setattr__(self, "rotary_bases", () if set(bases) <= {self.rotary_base} else bases)

    def _check_experts(self) -> None:
        """A mixture of experts needs a routing width: 1 ≤ ``top_k`` ≤ ``n_experts``; without
        experts ``top_k`` stays 0 and ``norm_top_k`` True, so one config has one spelling (and
        one cache key). With ``top_k == n_experts`` both routings are one softmax over every
        logit, spelled ``norm_top_k=True``."""
        n, k = self.n_experts, self.top_k
        for name, v in (("n_experts", n), ("top_k", k)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if n and not 1 <= k <= n:
            raise ValueError(f"top_k must be between 1 and n_experts ({n}), got {k}")
        if not n and k:
            raise ValueError("top_k needs n_experts > 0 (a mixture of experts)")
        if not isinstance(self.norm_top_k, bool):
            raise ValueError(f"norm_top_k must be true or false, got {self.norm_top_k!r}")
        if not n and not self.norm_top_k:
            raise ValueError("norm_top_k=False needs n_experts > 0 (a mixture of experts)")
        if n and k == n:
            object.__setattr__(self, "norm_top_k", True)

    def window_of(self, layer: int) -> int:
        """The sliding window of ``layer``'s attention: each query sees itself and the
        ``window - 1`` positions before it; 0 is full causal attention."""
        return self.windows[layer] if self.windows else 0

    def rotary_base_of(self, layer: int) -> float:
        """The RoPE base of ``layer`` (Gemma 3: one base on sliding layers, another on full)."""
        return self.rotary_bases[layer] if self.rotary_bases else self.rotary_base

    @property
    def has_attn(self) -> bool:
        return architecture_of(self).attention

    @property
    def kv_heads(self) -> int:
        """Key/value heads (grouped-query attention when fewer than ``n_heads``)."""
        return self.n_kv_heads or self.n_heads

    @property
    def rot_dim(self) -> int:
        """Dimensions of each head that RoPE rotates (0 without rotary positions)."""
        return (self.rotary_dim or self.d_head // self.rotary_chunks) if self.pos == "rotary" else 0

    @property
    def gated(self) -> bool:
        return self.mlp == "gated"

    @property
    def moe(self) -> bool:
        """Whether each FFN is a sparse mixture of experts (``n_experts`` > 0)."""
        return self.n_experts > 0

    @property
    def ffn_width(self) -> int:
        """FFN units each position computes: ``d_mlp``, or ``n_experts·d_mlp`` in a mixture
        (every expert runs on every position, :mod:`landscape.models.functional`); what
        memory estimates count."""
        return self.d_mlp * max(1, self.n_experts)

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
    "rotary_chunks": 1,
    "n_kv_heads": 0,
    "mlp": "plain",
    "bias": True,
    "attn_scale": 0.0,
    "channels": 0,
    "block": "pre",
    "qk_norm": "none",
    "attn_softcap": 0.0,
    "logit_softcap": 0.0,
    "windows": (),
    "rotary_bases": (),
    "head": "linear",
    "n_experts": 0,
    "top_k": 0,
    "norm_top_k": True,
}
