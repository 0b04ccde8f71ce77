"""Artifact transport: exact B_d rules keep every artifact's effect, dropping the signs does not;
artifacts round-trip through plain files with clear errors."""

from __future__ import annotations

import json
import tempfile

import pytest
import torch

from landscape.errors import LandscapeError
from landscape.experiments.artifacts import (
    Artifact,
    probe_accuracy,
    steered,
    train_probe,
    with_lora,
)
from landscape.experiments.gauge.coordinates import readout_features
from landscape.experiments.transport import (
    check_artifact,
    load_artifact,
    save_artifact,
    transport,
    transport_rows,
)
from landscape.models import forward
from landscape.optim import adamw_steps
from landscape.store.scratch import kept_on_disk
from landscape.symmetry import Transform, apply, random_transform, spec_for
from tests.experiments.test_gauge import synthetic_task


def random_artifacts(cfg, gen) -> dict[str, Artifact]:
    d, f = cfg.d_model, cfg.d_mlp

    def r(*shape):
        return torch.randn(*shape, generator=gen)

    lora = {}
    for name, (rows, cols) in (("blocks.0.mlp.W_in", (d, f)), ("blocks.1.mlp.W_out", (f, d)),
                               ("unembed.W_U", (d, cfg.n_out))):  # fmt: skip
        lora[f"{name}.A"], lora[f"{name}.B"] = r(rows, 2), r(2, cols)
    return {
        "steering": Artifact("steering", {"vector": r(d)}, {"layer": 1, "cls": 0}),
        "probe": Artifact("probe", {"W": r(d, 3), "b": r(3)}),
        "sae": Artifact(
            "sae", {"W_enc": r(d, 20), "b_enc": r(20), "W_dec": r(20, d), "b_dec": r(d)}
        ),  # fmt: skip
        "lora": Artifact("lora", lora),
    }


@pytest.mark.parametrize("arch", ["mlp", "vit", "gpt"])
def test_exact_transport_commutes_with_the_gauge(arch, gen):
    task = synthetic_task(arch)
    cfg, pa = task.cfg, {k: v.double() for k, v in task.params.items()}
    spec = spec_for(cfg)
    g = random_transform(spec, "signed-perm", 1)
    pb = apply(spec, g, pa)
    arts = {k: Artifact(a.kind, {n: t.double() for n, t in a.tensors.items()}, a.meta)
            for k, a in random_artifacts(cfg, gen).items()}  # fmt: skip
    moved = {k: transport(cfg, a, g) for k, a in arts.items()}
    x = task.test.inputs.double() if arch != "gpt" else task.test.inputs
    # steering: B steered by the moved vector is g(A steered)
    v, vb = arts["steering"].tensors["vector"], moved["steering"].tensors["vector"]
    want = forward(cfg, steered(cfg, pa, v, 1), x)
    assert torch.allclose(forward(cfg, steered(cfg, pb, vb, 1), x), want, atol=1e-9)
    fa, fb = readout_features(cfg, pa, x, 1), readout_features(cfg, pb, x, 1)
    w, wb = arts["probe"].tensors, moved["probe"].tensors
    assert torch.allclose(fb @ wb["W"], fa @ w["W"], atol=1e-9)
    from landscape.experiments.artifacts import sae_reconstruct

    rec_a = sae_reconstruct(arts["sae"], fa)
    rec_b = sae_reconstruct(moved["sae"], fb)
    big_g = g.matrix("resid").to(rec_b.dtype)  # B's stream is A's times G
    assert torch.allclose(rec_b, rec_a @ big_g, atol=1e-9)
    want = forward(cfg, with_lora(pa, arts["lora"]), x)
    assert torch.allclose(forward(cfg, with_lora(pb, moved["lora"]), x), want, atol=1e-9)


def test_transport_table_on_a_tiny_model():
    rows = transport_rows(synthetic_task("mlp", d_model=32), adamw_before=10, adamw_after=10)
    t = {(r["artifact"], r["mode"]): r for r in rows}
    assert t["steering", "exact"]["kept"] >= 95
    assert t["steering", "perm-only"]["kept"] < 80
    assert t["probe", "exact"]["value"] == t["probe", "exact"]["reference"]
    assert t["probe", "perm-only"]["value"] < t["probe", "exact"]["value"]
    sae = t["sae", "exact"]
    assert abs(sae["value"] - sae["reference"]) <= 0.01 * sae["reference"]
    assert t["sae", "perm-only"]["value"] > 2 * sae["reference"]
    assert t["lora", "exact"]["kept"] == pytest.approx(100, abs=1)
    assert t["lora", "perm-only"]["kept"] < 90
    assert t["adamw", "exact"]["value"] < 1e-3
    assert t["adamw", "perm-only"]["value"] > 1e-2
    assert t["adamw", "none"]["value"] > 1e-2


def test_adamw_state_transport_resumes_identically(gen):
    task = synthetic_task("vit")
    cfg, spec = task.cfg, spec_for(task.cfg)
    pa = {k: v.double() for k, v in task.params.items()}
    g = random_transform(spec, "signed-perm", 2)
    a_k, state = adamw_steps(cfg, (pa, None), task.batches(1), 4)
    st = transport(cfg, Artifact("adamw", state), g).tensors
    a_end, _ = adamw_steps(cfg, (a_k, state), task.batches(2), 4)
    b_end, _ = adamw_steps(cfg, (apply(spec, g, a_k), st), task.batches(2), 4)
    back = apply(spec, g.inverse(), b_end)
    assert max((back[k] - a_end[k]).abs().max().item() for k in a_end) < 1e-10


def test_no_exact_optimizer_transport_under_rotation():
    task = synthetic_task("mlp")
    spec = spec_for(task.cfg)
    g = random_transform(spec, {"resid": "orth"}, 0)
    state = {"step": torch.tensor(1.0)}
    state.update({f"{m}.{k}": torch.zeros_like(v) for k, v in task.params.items()
                  for m in ("exp_avg", "exp_avg_sq")})  # fmt: skip
    with pytest.raises(LandscapeError, match="rotation"):
        transport(task.cfg, Artifact("adamw", state), g)
    with pytest.raises(LandscapeError, match="monomial"):
        transport(task.cfg, Artifact("steering", {"vector": torch.zeros(16)}), g, "perm-only")


def test_none_and_identity(gen):
    task = synthetic_task("mlp")
    art = random_artifacts(task.cfg, gen)["sae"]
    same = transport(task.cfg, art, Transform({}))
    for k in art.tensors:
        assert torch.equal(same.tensors[k], art.tensors[k])
        assert torch.equal(transport(task.cfg, art, Transform({}), "none").tensors[k],
                           art.tensors[k])  # fmt: skip


def test_save_load_round_trip_and_errors(tmp_path, gen):
    cfg = synthetic_task("mlp").cfg
    arts = random_artifacts(cfg, gen)
    for kind, art in arts.items():
        save_artifact(tmp_path / kind, art, cfg)
        back = load_artifact(tmp_path / f"{kind}.safetensors")
        assert back.kind == kind and back.meta == art.meta
        for k, v in art.tensors.items():
            assert torch.equal(back.tensors[k], v)
    with pytest.raises(LandscapeError, match="missing"):
        load_artifact(tmp_path / "nothing")
    (tmp_path / "probe.safetensors").unlink()
    with pytest.raises(LandscapeError, match="missing probe.safetensors"):
        load_artifact(tmp_path / "probe")
    (tmp_path / "sae.json").write_text("{not json")
    with pytest.raises(LandscapeError, match="JSON"):
        load_artifact(tmp_path / "sae")
    doc = json.loads((tmp_path / "steering.json").read_text())
    (tmp_path / "steering.json").write_text(json.dumps({**doc, "kind": "magic"}))
    with pytest.raises(LandscapeError, match="unknown artifact kind"):
        load_artifact(tmp_path / "steering")
    wrong = Artifact("probe", {"W": torch.zeros(cfg.d_model + 1, 3), "b": torch.zeros(3)})
    with pytest.raises(LandscapeError, match="axis 0 must have size"):
        check_artifact(cfg, wrong)
    save_artifact(tmp_path / "wrong", wrong)  # without a config nothing is checked on save
    with pytest.raises(LandscapeError, match="axis 0 must have size"):
        load_artifact(tmp_path / "wrong", cfg)
    with pytest.raises(LandscapeError, match="unexpected tensor"):
        check_artifact(cfg, Artifact("steering", {"vector": torch.zeros(16), "x": torch.zeros(1)}))
    with pytest.raises(LandscapeError, match="missing tensor"):
        check_artifact(cfg, Artifact("lora", {"unembed.W_U.A": torch.zeros(16, 2)}))
    bad_rank = Artifact("lora", {"unembed.W_U.A": torch.zeros(16, 2),
                                 "unembed.W_U.B": torch.zeros(3, cfg.n_out)})  # fmt: skip
    with pytest.raises(LandscapeError, match="do not fit"):
        check_artifact(cfg, bad_rank)


def test_probe_has_one_column_per_class_seen_and_reads_back_class_ids(gen):
    """A class absent from the training labels gets no column (a language model's probe would
    otherwise carry its whole vocabulary); predictions come back as the original class ids."""
    centres = 4.0 * torch.randn(3, 8, generator=gen)
    ids = torch.tensor([2, 5, 9])  # of 12 classes, three occur
    pick = torch.randint(0, 3, (300,), generator=gen)
    feats = centres[pick] + 0.1 * torch.randn(300, 8, generator=gen)
    probe = train_probe(feats, ids[pick], 12, steps=200)
    assert probe.tensors["W"].shape == (8, 3)
    assert torch.equal(probe.tensors["classes"], ids)
    assert probe_accuracy(probe, feats, ids[pick]) == 1.0
    # without the column map the same weights would name columns 0, 1, 2: all wrong
    bare = Artifact("probe", {k: probe.tensors[k] for k in ("W", "b")})
    assert probe_accuracy(bare, feats, ids[pick]) == 0.0
    with pytest.raises(LandscapeError, match="lie in 0"):
        train_probe(feats, ids[pick], 9)


def test_probe_classes_must_fit_and_be_integers():
    cfg = synthetic_task("mlp").cfg
    w, b = torch.zeros(cfg.d_model, 3), torch.zeros(3)
    check_artifact(cfg, Artifact("probe", {"W": w, "b": b, "classes": torch.tensor([0, 4, 7])}))
    with pytest.raises(LandscapeError, match="do not fit together"):
        check_artifact(cfg, Artifact("probe", {"W": w, "b": b, "classes": torch.arange(4)}))
    with pytest.raises(LandscapeError, match="integer class ids"):
        check_artifact(cfg, Artifact("probe", {"W": w, "b": b, "classes": torch.zeros(3)}))


def test_the_adamw_row_keeps_the_state_on_disk_and_says_so_when_it_cannot(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    state = {"exp_avg.w": torch.arange(6.0).reshape(2, 3), "step": torch.tensor(3.0)}
    with kept_on_disk(state, "the state") as kept:
        assert list(tmp_path.iterdir())  # the file is there for the block
        first, second = kept(), kept()
        assert first["exp_avg.w"] is not second["exp_avg.w"]  # a fresh copy each time
        assert all(torch.equal(first[k], state[k]) for k in state)
    assert not list(tmp_path.iterdir())  # and gone after it

    def full(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 64")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(LandscapeError, match="could not keep the AdamW state in a temporary"):
        transport_rows(synthetic_task("mlp", d_model=16), adamw_before=2, adamw_after=2)
    assert not list(tmp_path.iterdir())
