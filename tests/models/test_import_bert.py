"""BERT: a post-LayerNorm bidirectional encoder against transformers, its symmetries, matching,
export, and the refusals of what is not implemented.

Tiny random BERTs (2 layers, width 32) are built with transformers' own config classes, their
weights perturbed so that no gain is 1 and no bias 0 (``conftest.perturbed``), saved as
safetensors and imported.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from landscape.cli import main  # noqa: E402
from landscape.errors import LandscapeError  # noqa: E402
from landscape.experiments import barrier, family_members  # noqa: E402
from landscape.experiments.barriers.alignment import align  # noqa: E402
from landscape.experiments.context import RunContext  # noqa: E402
from landscape.matching import weight_matching  # noqa: E402
from landscape.models import forward  # noqa: E402
from landscape.models.exporters import export_hf  # noqa: E402
from landscape.models.importers import import_checkpoint  # noqa: E402
from landscape.sources import DataSpec, add_family  # noqa: E402
from landscape.store.cache import Cache  # noqa: E402
from landscape.symmetry import (  # noqa: E402
    GLOBAL_SIGN,
    INVERTIBLE,
    PERM,
    SIGNED_PERM,
    Element,
    Transform,
    apply,
    random_transform,
    spec_for,
    symmetry_table,
)
from landscape.symmetry.processing import (  # noqa: E402
    center_writers,
    fold_norm_biases,
    fold_norm_gains,
    prepare,
)
from tests.conftest import perturbed, refused_import  # noqa: E402

transformers.logging.set_verbosity_error()

VOCAB, CTX = 64, 40
CLASSES = {"mlm": "BertForMaskedLM", "mlm-untied": "BertForMaskedLM",
           "cls": "BertForSequenceClassification", "bare": "BertModel"}  # fmt: skip


def _build(kind: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=24, max_position_embeddings=CTX, num_labels=3,
        tie_word_embeddings=kind != "mlm-untied", attn_implementation="eager", **extra,
    )  # fmt: skip
    return perturbed(getattr(transformers, CLASSES[kind])(cfg)).eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """kind → (transformers model, directory it was saved in)."""
    out = {}
    for kind in CLASSES:
        d = tmp_path_factory.mktemp(kind)
        model = _build(kind)
        model.save_pretrained(d, safe_serialization=True)
        out[kind] = (model, d)
    return out


def _tokens(positions: int, batch: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randint(
        0, VOCAB, (batch, positions), generator=torch.Generator().manual_seed(seed)
    )


def _reference(model, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(x)
    return out.last_hidden_state if isinstance(model, transformers.BertModel) else out.logits


@pytest.mark.parametrize("positions", [12, CTX], ids=["short", "fused-attention"])
@pytest.mark.parametrize("kind", list(CLASSES))
def test_logits_equal_transformers_on_both_forward_paths(saved, kind: str, positions: int):
    model, path = saved[kind]
    ckpt = import_checkpoint(path)
    x = _tokens(positions)
    ref = _reference(model, x)
    fast = forward(ckpt.cfg, ckpt.params, x, fast=True)
    slow = forward(ckpt.cfg, ckpt.params, x, fast=False)
    assert fast.shape == ref.shape
    assert (fast - ref).abs().max() < 1e-4 and (slow - ref).abs().max() < 1e-4
    assert (fast - slow).abs().max() < 1e-5
    cfg, meta = ckpt.cfg, ckpt.meta
    assert cfg.block == "postln" and cfg.norm == "ln" and cfg.eps == 1e-12
    assert (cfg.arch, cfg.head) == {"mlm": ("bert", "mlm"), "mlm-untied": ("bert", "mlm"),
                                    "cls": ("bert-cls", "pooler"),
                                    "bare": ("bert", "linear")}[kind]  # fmt: skip
    assert "token type 0" in meta["notes"][0]
    ignored = {"mlm": [], "mlm-untied": ["cls.predictions.bias"], "cls": [],
               "bare": ["pooler.dense.bias", "pooler.dense.weight"]}[kind]  # fmt: skip
    assert meta["ignored_tensors"] == ignored
    if kind.startswith("mlm"):
        assert meta["tied_embeddings"] == (kind == "mlm")


@pytest.mark.parametrize("kind", ["mlm", "cls"])
def test_symmetry_table_admits_what_post_ln_keeps_and_says_why_the_rest_is_refused(saved, kind):
    ckpt = import_checkpoint(saved[kind][1])
    rows = {r["group"]: r for r in symmetry_table(ckpt.cfg, ckpt.params)}
    after = {"signed-perm": "signed-perm after center_writers",
             "orth": "orth after fold_norm_gains + center_writers",
             "orth-mean": "orth-mean after fold_norm_gains + center_writers"}  # fmt: skip
    assert set(rows) == {"perm", "perm-global-sign", "qk", "ov", "scale", *after, *after.values()}
    valid = {g for g, r in rows.items() if r["valid"]}
    assert valid == {"perm", "perm-global-sign", "qk", "ov"}
    assert all(rows[g]["max_abs_dlogits"] < 1e-9 for g in valid)
    for group in (*after, *after.values()):  # the steps other models need do not help here
        r = rows[group]
        assert r["max_abs_dlogits"] > 1e-3 and r["needs"] == "not exact in any processing state"
        assert "post-LN" in r["note"] and "N(z)·γ + β" in r["note"] and "mean" in r["note"]
    assert rows["scale"]["max_abs_dlogits"] > 1e-3  # GELU


def test_centring_writers_keeps_a_post_ln_function_but_widens_nothing(saved):
    """The measurement behind refusing ``center_writers`` (``apply.resid_blocked``)."""
    ckpt = import_checkpoint(saved["mlm"][1], dtype=torch.float64)
    cfg, p = ckpt.cfg, ckpt.params
    spec = spec_for(cfg)
    x = _tokens(12)
    base = forward(cfg, p, x)
    cfg_c, centred = center_writers(cfg, p)  # W ← W·(I − 11ᵀ/d): every writer's sum is normalised
    assert cfg_c == cfg and not torch.equal(centred["embed.W_E"], p["embed.W_E"])
    assert (forward(cfg, centred, x) - base).abs().max() < 1e-9
    # ... but the stream N(z)·γ + β keeps its mean: LayerNorm is not RMSNorm on it
    assert (forward(cfg.replace(norm="rms"), centred, x) - base).abs().max() > 1e-3
    signed = random_transform(spec, {"resid": SIGNED_PERM}, 2)
    assert (forward(cfg, apply(spec, signed, centred, check=False), x) - base).abs().max() > 1e-3
    for step in (fold_norm_biases, fold_norm_gains):  # the norms stay: their output is the stream
        cfg_s, kept = step(cfg, p)
        assert cfg_s == cfg and set(kept) == set(p) and all(kept[k] is p[k] for k in p)
    for group in ("signed-perm", "orth"):
        with pytest.raises(ValueError, match="post-LN"):
            prepare(cfg, p, group)
        with pytest.raises(ValueError, match="post-LN"):
            apply(spec, random_transform(spec, group, 0), p)


def test_weight_matching_between_two_random_berts_keeps_the_function(saved, tmp_path):
    a = import_checkpoint(saved["mlm"][1])
    other = tmp_path / "other"
    _build("mlm", seed=1).save_pretrained(other, safe_serialization=True)
    b = import_checkpoint(other)
    r = weight_matching(a.cfg, a.params, b.params, "perm")
    assert r.function_check < 1e-4
    assert r.transform.elements["resid"].kind == PERM
    al = align(a, b, "weight", "perm", context=RunContext(cache=Cache(tmp_path / "cache")))
    assert al.info["function_check"] < 1e-4
    # a planted permutation of A is undone exactly
    spec = spec_for(a.cfg)
    moved = apply(spec, random_transform(spec, "perm", 5), a.params)
    r = weight_matching(a.cfg, a.params, moved, "perm")
    assert max(float((r.params_a[k] - r.params_b[k]).abs().max()) for k in r.params_a) < 1e-6
    with pytest.raises(ValueError, match="post-LN") as err:  # before any work, one line
        align(a, b, "weight", "orth", context=RunContext(cache=Cache(tmp_path / "cache")))
    assert "\n" not in str(err.value)


def _gauge(spec, seed: int) -> Transform:
    """A non-trivial admitted element: the stream permuted and flipped, FFN units and heads
    permuted, invertible maps inside every head."""
    kinds = {v: PERM for v in spec.variables if not v.startswith(("qk", "ov"))}
    kinds.update({v: INVERTIBLE for v in spec.variables if v.startswith(("qk", "ov"))})
    kinds["resid"] = GLOBAL_SIGN
    t = random_transform(spec, kinds, seed)
    e = t.elements["resid"]
    return Transform({**t.elements, "resid": Element(GLOBAL_SIGN, e.perm, -e.scale.abs())})


@pytest.mark.parametrize("kind", ["mlm", "cls"])
def test_export_after_a_gauge_and_a_merge_loads_in_transformers_with_our_logits(
    saved, kind, tmp_path
):
    model, path = saved[kind]
    ckpt = import_checkpoint(path)
    cls = getattr(transformers, CLASSES[kind])
    x = _tokens(12)

    def reloaded(params, name):
        info = export_hf(ckpt.cfg, params, path, tmp_path / name)
        back = cls.from_pretrained(tmp_path / name, attn_implementation="eager").eval()
        return info, (_reference(back, x) - forward(ckpt.cfg, params, x)).abs().max()

    info, d = reloaded(ckpt.params, "same")
    mlm = kind == "mlm"
    assert d < 1e-4 and (info["tied_embeddings"] or not mlm)
    spec = spec_for(ckpt.cfg)
    gauged = apply(spec, _gauge(spec, 3), ckpt.params)
    assert (forward(ckpt.cfg, gauged, x) - _reference(model, x)).abs().max() < 1e-4
    info, d = reloaded(gauged, "gauged")
    assert d < 1e-4
    assert not (mlm and info["tied_embeddings"])  # the decoder is in the head's space, W_E moved
    assert json.loads((tmp_path / "gauged" / "config.json").read_text())["type_vocab_size"] == 1
    other = tmp_path / "other"
    _build(kind, seed=1).save_pretrained(other, safe_serialization=True)
    r = weight_matching(ckpt.cfg, ckpt.params, import_checkpoint(other).params, "perm")
    merged = {k: 0.5 * r.params_a[k] + 0.5 * r.params_b[k] for k in r.params_a}
    assert reloaded(merged, "merged")[1] < 1e-4


def test_a_bert_model_without_head_is_not_written(saved, tmp_path):
    ckpt = import_checkpoint(saved["bare"][1])
    with pytest.raises(LandscapeError, match="BertModel") as err:
        export_hf(ckpt.cfg, ckpt.params, saved["bare"][1], tmp_path / "out")
    assert "\n" not in str(err.value)


def _edited(tmp_path, kind: str, **changes):
    """A saved tiny BERT whose config.json has ``changes`` (None deletes a key)."""
    d = tmp_path / kind
    _build(kind).save_pretrained(d, safe_serialization=True)
    config = json.loads((d / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            config.pop(k, None)
        else:
            config[k] = v
    (d / "config.json").write_text(json.dumps(config))
    return d


@pytest.mark.parametrize(
    ("kind", "changes", "fragments"),
    [
        (
            "mlm",
            {"position_embedding_type": "relative_key"},
            ["position_embedding_type", "relative_key"],
        ),
        ("mlm", {"is_decoder": True}, ["is_decoder"]),
        ("mlm", {"add_cross_attention": True}, ["add_cross_attention"]),
        ("mlm", {"architectures": ["BertForPreTraining"]}, ["BertForPreTraining"]),
        ("mlm", {"architectures": ["BertLMHeadModel"]}, ["BertLMHeadModel"]),
        ("cls", {"architectures": ["BertForTokenClassification"]}, ["BertForTokenClassification"]),
        (
            "mlm",
            {"type_vocab_size": 3},
            ["model.safetensors", "token_type_embeddings.weight has shape (2, 32)"],
        ),
        ("mlm", {"layer_norm_eps": "tiny"}, ["layer_norm_eps"]),
    ],
    ids=[
        "relative-positions",
        "decoder",
        "cross-attention",
        "pretraining",
        "causal-lm",
        "token-classifier",
        "type-count",
        "eps",
    ],
)
def test_what_is_not_implemented_is_refused_in_one_line(tmp_path, kind, changes, fragments):
    where = [] if "model.safetensors" in fragments[0] else ["config.json"]
    refused_import(_edited(tmp_path, kind, **changes), *where, *fragments)


def test_heads_are_told_by_tensors_when_the_config_names_no_class(tmp_path):
    d = _edited(tmp_path, "cls", architectures=None)
    assert import_checkpoint(d).cfg.head == "pooler"
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=24,
                                  max_position_embeddings=CTX)  # fmt: skip
    tok = tmp_path / "tok"
    transformers.BertForTokenClassification(cfg).save_pretrained(tok, safe_serialization=True)
    config = json.loads((tok / "config.json").read_text())
    del config["architectures"]
    (tok / "config.json").write_text(json.dumps(config))
    refused_import(tok, "classifier.weight", "BertForTokenClassification")


def test_a_tied_decoder_bias_that_differs_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    d = tmp_path / "mlm"
    _build("mlm").save_pretrained(d, safe_serialization=True)
    tensors = load_file(d / "model.safetensors")
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"] + 1.0
    save_file(tensors, d / "model.safetensors", metadata={"format": "pt"})
    refused_import(d, "cls.predictions.decoder.bias", "tied")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    return tmp_path


def test_a_bert_family_is_registered_and_a_barrier_refused_in_one_line(saved, home, capsys):
    other = home / "other"
    _build("mlm", seed=1).save_pretrained(other, safe_serialization=True)
    text = home / "text.txt"
    text.write_text("To be, or not to be, that is the question. " * 40)
    spec = DataSpec(text=text, n_ctx=16, max_windows=8)
    fam = add_family("berts", [saved["mlm"][1], other], spec)
    assert fam.arch == "bert" and "post-LN" in fam.architecture
    rows = family_members("berts")
    assert all("masking is not implemented" in r["note"] for r in rows)
    with pytest.raises(LandscapeError, match="masking is not implemented") as err:
        barrier("berts", [0, 1], "weight", "perm")
    assert "\n" not in str(err.value)
    assert main(["barrier", "berts", "--seeds", "0", "1", "--method", "weight"]) == 2
    assert "masking is not implemented" in capsys.readouterr().err
    assert main(["symmetries", "berts", "--seed", "0", "--json"]) == 0
    rows = {r["group"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["perm"]["valid"] and not rows["signed-perm"]["valid"]
    # weight matching needs no data: B aligned to A is written as a BERT and checked
    out = home / "aligned"
    assert main(["align", "berts", "--seeds", "0", "1", "--group", "perm", "--out", str(out),
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["function_ok"]
    back = transformers.BertForMaskedLM.from_pretrained(out, attn_implementation="eager").eval()
    x = _tokens(12)
    assert (_reference(back, x) - _reference(_build("mlm", seed=1), x)).abs().max() < 1e-4
    # a merge is evaluated on A's data: refused before anything is written
    merged = home / "merged"
    args = ["align", "berts", "--seeds", "0", "1", "--merge", "0.5", "--out", str(merged)]
    assert main(args) == 2
    assert "masking is not implemented" in capsys.readouterr().err and not merged.exists()


def test_inspect_audit_on_a_bert_directory(saved, capsys):
    assert main(["inspect", str(saved["cls"][1]), "--audit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["block"] == "postln" and out["readout"].startswith("classifier")
    rows = {r["group"]: r for r in out["audit"]}
    assert rows["perm-global-sign"]["valid"] and rows["perm-global-sign"]["max_abs_dlogits"] < 1e-9
    assert not rows["orth"]["valid"] and "post-LN" in rows["orth"]["note"]
    resid = {s["group"]: s for s in out["symmetries"] if s["variable"] == "resid"}
    assert resid["perm"]["exact"] and not resid["signed-perm"]["exact"]
    assert "post-LN" in resid["signed-perm"]["note"]
