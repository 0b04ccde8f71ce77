"""The block layouts: one entry each, holding every fact about where a block's norms sit.

A :class:`BlockLayout` says where the norms of a block sit — at each sublayer's input (``ln1``
before attention, ``ln2`` before the FFN), on each sublayer's output before the residual add
(``ln1_post``, ``ln2_post``), or after each residual sum (``ln1``, ``ln2``, with ``ln_embed``
after the embedding and no final norm) — whether attention and the FFN read the same stream
(parallel) or one after the other, whether dropout is built, and whether a head may sit before
``W_U``. From these follow the norm parameters a model has, the norms whose gains no processing
can fold, and the one block loop of :mod:`landscape.models.functional`, which reads them.

Code asks the registry (``layout_of(cfg).parallel``), not ``cfg.block``: ``cfg.block`` stays the
config field (checkpoints store the name); beyond this module it is read only to name a layout
(in messages, and where an exporter checks that a model's layout is its format's).

Adding a block layout
---------------------
One :class:`BlockLayout` in ``LAYOUTS`` below (docs/architecture.md, "Adding a block layout").
Its norms use the shared names (``ln1``, ``ln2``, ``ln1_post``, ``ln2_post``, ``ln_embed``), so
parameters, the forward, symmetry specs and processing follow from its facts.

Worked example, the entry of OLMo 2's post-norm blocks ``x + N_1(attn(x))``, then
``x + N_2(mlp(x))``: no input norms, output norms, sequential::

    BlockLayout("post", "post-norm blocks", norm_in=False, norm_out=True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the config sits above this module
    from landscape.models.config import ModelConfig


@dataclass(frozen=True)
class BlockLayout:
    """Where a block's norms sit and how its sublayers meet the stream.

    - ``norm_in``: a norm at each sublayer's input, ``f(N(x))`` (gains ``ln1``, ``ln2``).
    - ``norm_out``: a norm on each sublayer's output before the residual add, ``x + N(f(·))``
      (gains ``ln1_post``, ``ln2_post``); their gains multiply a block's output, where no reader
      can absorb them (fixed gains), and with LayerNorm centring the writers would not centre
      the stream, so they need RMSNorm.
    - ``norm_sum``: a norm after each residual sum, ``x ← N(x + f(x))`` (gains ``ln1``,
      ``ln2``), ``ln_embed`` after the embedding and no final norm: the stream is a norm's
      output, so these gains are fixed too.
    - ``parallel``: attention and the FFN read the same stream entering the block,
      ``x + attn(N1(x)) + mlp(N2(x))``; else the FFN reads ``x + attn(N1(x))``.
    - ``dropout``: training's dropout is built for it.
    - ``heads``: layers may sit between the read positions and ``W_U`` (``cfg.head``).

    Two facts keep the reference forward's rounding as it was before the layouts shared one
    loop (equal up to rounding either way; dropping them is a deliberate re-record):

    - ``ffn_bias_last``: the FFN's output bias is added after its product has joined the
      stream, ``(x + h·W_out) + b_out``, the rounding the shipped pre-norm checkpoints carry;
      the other layouts add ``x + (h·W_out + b_out)``.
    - ``gate_first``: a gated FFN's gate product is computed before the up projection's: the
      same values, but autograd sums the gradient of their shared input in the other order.
    """

    name: str
    title: str  # how ``describe`` names it; "" for the default, which goes unsaid
    norm_in: bool = True
    norm_out: bool = False
    norm_sum: bool = False
    parallel: bool = False
    dropout: bool = True
    heads: bool = False
    ffn_bias_last: bool = False
    gate_first: bool = False

    def __post_init__(self) -> None:
        if self.norm_in and self.norm_sum:
            raise ValueError(f"layout {self.name!r}: input norms and norms after the sums would "
                             "both be ln1/ln2")  # fmt: skip
        if self.parallel and self.norm_sum:  # the spec's readers of ln1 assume the FFN reads it
            raise ValueError(f"layout {self.name!r}: parallel sublayers with norms after the "
                             "sums are not built")  # fmt: skip

    @property
    def plain_norms(self) -> bool:
        """Whether the block has ``ln1``/``ln2`` (at the sublayers' inputs or after the sums)."""
        return self.norm_in or self.norm_sum

    @property
    def final_norm(self) -> bool:
        """Whether ``ln_final`` normalises the stream before the readout."""
        return not self.norm_sum

    @property
    def embed_norm(self) -> bool:
        """Whether ``ln_embed`` normalises the embedding before the first block."""
        return self.norm_sum

    def fixed_gain_norms(self, attention: bool) -> tuple[str, ...]:
        """The norms of one block (names under ``blocks.{l}.``) whose gains no processing can
        fold: the output norms and the norms after the sums (``ln_embed`` too: :attr:`embed_norm`).
        ``attention``: whether the block has an attention sublayer (else only ``ln2*``)."""
        subs = ("ln1", "ln2") if attention else ("ln2",)
        return tuple(
            name
            for sub in subs
            for name, fixed in ((sub, self.norm_sum), (f"{sub}_post", self.norm_out))
            if fixed
        )


LAYOUTS: dict[str, BlockLayout] = {
    lay.name: lay
    for lay in [
        BlockLayout("pre", "", ffn_bias_last=True),
        # OLMo 2
        BlockLayout("post", "post-norm blocks", norm_in=False, norm_out=True),
        # GPT-NeoX / Pythia (use_parallel_residual)
        BlockLayout("parallel", "parallel attention and MLP", parallel=True),
        # Gemma 2 and 3: a norm at each sublayer's input and another at its output
        BlockLayout("sandwich", "norms before and after each sublayer", norm_out=True),
        # BERT: the norm after the residual sum
        BlockLayout("postln", "norms after the residual sums (post-LN)", norm_in=False,
                    norm_sum=True, dropout=False, heads=True, gate_first=True),
    ]
}  # fmt: skip


def block_layout(name: str) -> BlockLayout:
    """The registry entry called ``name``; ``ValueError`` naming the known ones otherwise."""
    if not isinstance(name, str) or name not in LAYOUTS:  # a list from JSON is no key
        raise ValueError(f"unknown block {name!r}; expected one of {tuple(LAYOUTS)}")
    return LAYOUTS[name]


def layout_of(cfg: ModelConfig) -> BlockLayout:
    """The block layout of a config."""
    return LAYOUTS[cfg.block]
