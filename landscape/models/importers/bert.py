"""BERT (``model_type`` ``bert``: BertForMaskedLM, BertForSequenceClassification, BertModel) into
the canonical form.

A bidirectional encoder with norms after the residual sums (``block="postln"``): word, learned
position and token-type embeddings summed and normalised (``ln_embed``), then per layer
``x = N1(x + attn(x))`` and ``x = N2(x + mlp(x))``, LayerNorm everywhere, biases everywhere.
The inputs are token ids only: every token has type 0, as in BertModel when no
``token_type_ids`` are passed, so the type-0 row is added to every position's row of ``W_pos``
and the other type rows are not part of the canonical form (``meta["notes"]``).

Heads, chosen by ``architectures`` (or, when the config names none, by the tensors):

- **BertForMaskedLM** (architecture ``bert``, head ``mlm``): per-token logits through the
  prediction transform (dense d→d, activation, LayerNorm: ``head.W_in``, ``head.b_in``,
  ``head.ln``) and the decoder ``W_U`` (tied to the word embeddings unless the config unties
  them) with its bias ``b_U``.
- **BertForSequenceClassification** (``bert-cls``, head ``pooler``): the first token through the
  pooler (dense + tanh: ``head.W_in``, ``head.b_in``) and the classifier ``W_U``, ``b_U``.
- **BertModel** (``bert``, head ``linear``): as a ViT without classifier, ``W_U`` is the identity
  and the model returns the last hidden state at every position; the pooler is not part of the
  canonical form and is left out (``ignored_tensors``).

Refused in one line: ``position_embedding_type`` other than ``absolute`` (relative position
scores), ``is_decoder`` (causal attention) and ``add_cross_attention``, other BERT heads
(pre-training, next-sentence, token classification, question answering, multiple choice, the
causal LM head), a head's tensors that contradict the configuration, and tied decoder tensors
that differ from what they are tied to.
"""

from __future__ import annotations

from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.models.config import ModelConfig
from landscape.models.importers.common import (
    _act,
    _embedding,
    _encoder_attention,
    _encoder_mlp,
    _flag,
    _heads,
    _int,
    _layers,
    _num,
    _prefix,
    _show,
    _Source,
)
from landscape.models.params import Params

MODEL_TYPE = "bert"
FAMILY = "BERT"

# The head of each supported class: (canonical architecture, head).
HEADS = {
    "BertForMaskedLM": ("bert", "mlm"),
    "BertForSequenceClassification": ("bert-cls", "pooler"),
    "BertModel": ("bert", "linear"),
}
_DECODER, _DECODER_BIAS, _MLM_BIAS = (
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
    "cls.predictions.bias",
)
# Tensors of the heads that are not implemented, and the class each belongs to.
_OTHER_HEADS = {
    "cls.seq_relationship.weight": "BertForPreTraining or BertForNextSentencePrediction",
    "qa_outputs.weight": "BertForQuestionAnswering",
    "classifier.weight": "BertForTokenClassification",
}


def _head_class(config: dict[str, Any], src: _Source, label: str) -> str:
    """The BERT class the checkpoint was saved from: ``architectures[0]``, else the tensors."""
    names = config.get("architectures")
    if names is not None and (
        not isinstance(names, list) or not all(isinstance(n, str) for n in names)
    ):
        raise LandscapeError(f"{label}: architectures must be a list of names, got {_show(names)}")
    if names:
        if names[0] not in HEADS:
            raise LandscapeError(
                f"{label}: architectures {_show(names[0])} is not supported; supported: "
                f"{', '.join(HEADS)}"
            )
        return names[0]
    if src.has("cls.predictions.transform.dense.weight"):
        return "BertForMaskedLM"
    if src.has("classifier.weight") and src.has("bert.pooler.dense.weight"):
        return "BertForSequenceClassification"
    for tensor, cls in _OTHER_HEADS.items():
        if src.has(tensor):
            raise LandscapeError(f"{src.label}: tensor {tensor} belongs to {cls}, which is not "
                                 f"supported; supported: {', '.join(HEADS)}")  # fmt: skip
    return "BertModel"


def _refuse_unimplemented(config: dict[str, Any], label: str) -> None:
    kind = config.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise LandscapeError(
            f"{label}: position_embedding_type {_show(kind)} is not supported (only absolute)"
        )
    if _flag(config, label, "is_decoder", False):
        raise LandscapeError(f"{label}: is_decoder is true (causal attention); only the "
                             "bidirectional encoder is supported")  # fmt: skip
    if _flag(config, label, "add_cross_attention", False):
        raise LandscapeError(f"{label}: add_cross_attention is not supported")


def convert(config: dict[str, Any], src: _Source, label: str) -> tuple[ModelConfig, Params, dict]:
    _refuse_unimplemented(config, label)
    head_class = _head_class(config, src, label)
    arch, head = HEADS[head_class]
    d = _int(config, label, "hidden_size")
    h = _heads(config, label, d, ("num_attention_heads",))
    f = _int(config, label, "intermediate_size")
    n_layers = _int(config, label, "num_hidden_layers")
    vocab = _int(config, label, "vocab_size")
    n_ctx = _int(config, label, "max_position_embeddings", default=512)
    n_types = _int(config, label, "type_vocab_size", default=2)
    pre = "bert."
    if head == "linear":  # a BertModel of its own, or the encoder inside another head's file
        pre = _prefix(src, ("embeddings.word_embeddings.weight",), ("", "bert."))
    if head == "mlm":
        n_out = vocab
    elif head == "pooler":
        if not src.has("classifier.weight"):
            raise LandscapeError(f"{label}: missing tensor classifier.weight")
        n_out = src.shape("classifier.weight")[0]
    else:
        n_out = d
    cfg = ModelConfig(
        arch,
        d_model=d,
        d_mlp=f,
        n_layers=n_layers,
        n_out=n_out,
        n_heads=h,
        d_head=d // h,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="ln",
        act=_act(config, label, "hidden_act", "gelu"),
        eps=_num(config, label, "layer_norm_eps", 1e-12),
        block="postln",
        head=head,
    )
    t = src.take
    _layers(src, label, f"{pre}encoder.layer.", n_layers, "num_hidden_layers")
    emb = f"{pre}embeddings."
    types = t(f"{emb}token_type_embeddings.weight", (n_types, d))
    p: Params = {}
    note = (f"token type 0 (of {n_types}) folded into the position embeddings: inputs carry "
            "no token types")  # fmt: skip
    meta: dict[str, Any] = {"notes": [note]}
    if head == "mlm":
        # BertForMaskedLM ties its decoder to the word embeddings by default
        tied, w_e = _embedding(config, src, label, f"{emb}word_embeddings.weight", (vocab, d),
                               True, head=_DECODER)  # fmt: skip
        meta["tied_embeddings"] = tied
    else:
        w_e = t(f"{emb}word_embeddings.weight", (vocab, d))
    p["embed.W_E"] = w_e
    p["pos_embed.W_pos"] = t(f"{emb}position_embeddings.weight", (n_ctx, d)) + types[0]
    p["ln_embed.w"] = t(f"{emb}LayerNorm.weight", (d,))
    p["ln_embed.b"] = t(f"{emb}LayerNorm.bias", (d,))
    for layer in range(n_layers):
        s, b = f"{pre}encoder.layer.{layer}.", f"blocks.{layer}."
        p.update(_encoder_attention(src, s, b, "attention.self", d, h))
        for ours, theirs in (("ln1", "attention.output.LayerNorm"), ("ln2", "output.LayerNorm")):
            p[f"{b}{ours}.w"] = t(f"{s}{theirs}.weight", (d,))
            p[f"{b}{ours}.b"] = t(f"{s}{theirs}.bias", (d,))
        p.update(_encoder_mlp(src, s, b, d, f))
    if head == "mlm":
        tr = "cls.predictions.transform."
        p["head.W_in"] = t(f"{tr}dense.weight", (d, d)).T.contiguous()
        p["head.b_in"] = t(f"{tr}dense.bias", (d,))
        p["head.ln.w"] = t(f"{tr}LayerNorm.weight", (d,))
        p["head.ln.b"] = t(f"{tr}LayerNorm.bias", (d,))
        p["unembed.W_U"] = (w_e if tied else t(_DECODER, (vocab, d))).T.contiguous()
        p["unembed.b_U"] = _decoder_bias(src, label, vocab, tied)
        readout = "masked-LM logits at every position"
    elif head == "pooler":
        p["head.W_in"] = t(f"{pre}pooler.dense.weight", (d, d)).T.contiguous()
        p["head.b_in"] = t(f"{pre}pooler.dense.bias", (d,))
        p["unembed.W_U"] = t("classifier.weight", (n_out, d)).T.contiguous()
        p["unembed.b_U"] = t("classifier.bias", (n_out,))
        readout = "classifier logits of the first token's pooled state"
    else:
        p["unembed.W_U"] = torch.eye(d, dtype=src.dtype)
        p["unembed.b_U"] = torch.zeros(d, dtype=src.dtype)
        readout = "last hidden state at every position (identity readout; pooler left out)"
    return cfg, p, {**meta, "readout": readout, "head_class": head_class}


def _decoder_bias(src: _Source, label: str, vocab: int, tied: bool) -> torch.Tensor:
    """The masked-LM decoder's bias. Tied, the decoder's bias is ``cls.predictions.bias`` (a
    differing stored ``decoder.bias`` is refused: readers disagree on which wins); untied,
    BertForMaskedLM adds ``cls.predictions.decoder.bias`` and never reads the other."""
    if not tied:
        return src.take(_DECODER_BIAS, (vocab,))
    bias = src.take(_MLM_BIAS, (vocab,))
    if src.has(_DECODER_BIAS) and not torch.equal(src.take(_DECODER_BIAS, (vocab,)), bias):
        raise LandscapeError(f"{label}: {_DECODER_BIAS} differs from {_MLM_BIAS} though the "
                             "decoder is tied; set tie_word_embeddings to false if it is "
                             "separate")  # fmt: skip
    return bias
