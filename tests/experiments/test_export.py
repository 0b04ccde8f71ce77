"""Aligned checkpoints out: written in the source's own format, loadable by transformers."""

import json

import pytest
import torch

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments.merging.export import AlignedOptions, aligned_archive, write_aligned
from landscape.models import forward
from landscape.models.importers import import_checkpoint
from landscape.sources import DataSpec, add_family
from tests.conftest import perturbed, tiny_llama

transformers = pytest.importorskip("transformers")

TEXT = "To be, or not to be, that is the question. Whether tis nobler in the mind. " * 40


def _gpt2(seed: int):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=256, n_positions=16,
                                  attn_implementation="eager")  # fmt: skip
    return perturbed(transformers.GPT2LMHeadModel(cfg))


def _neox(seed: int):
    torch.manual_seed(seed)
    cfg = transformers.GPTNeoXConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                     intermediate_size=24, vocab_size=256,
                                     max_position_embeddings=32,
                                     attn_implementation="eager")  # fmt: skip
    return perturbed(transformers.GPTNeoXForCausalLM(cfg))


def _qwen2(seed: int):
    torch.manual_seed(seed)
    cfg = transformers.Qwen2Config(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=24, vocab_size=256, max_position_embeddings=32, tie_word_embeddings=True,
    )  # fmt: skip
    return perturbed(transformers.Qwen2ForCausalLM(cfg))


def _family(tmp_path, build, name):
    paths = []
    for seed in (0, 1):
        paths.append(tmp_path / f"{name}{seed}")
        build(seed).save_pretrained(paths[-1], safe_serialization=True)
    (tmp_path / "text.txt").write_text(TEXT)
    add_family(name, paths, DataSpec(text=tmp_path / "text.txt", n_ctx=16, max_windows=8))
    return paths


def _logits(path, x):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    with torch.no_grad():
        return model.eval()(x).logits


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize(("build", "group"), [(_gpt2, "perm"), (tiny_llama, "perm"),
                                              (tiny_llama, "orth"), (_qwen2, "orth"),
                                              (_gpt2, "orth-mean"), (_neox, "orth-mean"),
                                              (tiny_llama, "orth-mean")])  # fmt: skip
def test_aligned_b_loads_in_transformers_with_b_s_logits(tmp_path, cache_env, build, group):
    name = f"{build.__name__.strip('_')}-pair"
    paths = _family(tmp_path, build, name)
    out = tmp_path / "aligned"
    r = write_aligned(name, [0, 1], out, "weight", group)
    assert r["format"] == "safetensors" and r["function_ok"], r
    x = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    ref, got = _logits(paths[1], x), _logits(out, x)
    assert (ref - got).abs().max() < 1e-4
    # and it is really moved: its weights are not B's
    a_sd = transformers.AutoModelForCausalLM.from_pretrained(paths[1]).state_dict()
    b_sd = transformers.AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert any(not torch.equal(a_sd[k], b_sd[k]) for k in a_sd if k in b_sd)


@pytest.mark.parametrize(("build", "group"), [(tiny_llama, "orth"), (_gpt2, "orth-mean")])
def test_the_merge_is_the_curve_at_lambda(tmp_path, cache_env, capsys, build, group):
    # GPT-2: the merge's unembedding bias (the final norm's, folded) has no place in the format
    # but W_U's mean direction, which a least-squares final bias could not hold for a merge
    paths = _family(tmp_path, build, "pair-merge")
    out = tmp_path / "merged"
    argv = ["align", "pair-merge", "--seeds", "0", "1", "--group", group, "--merge", "0.3",
            "--out", str(out), "--json"]  # fmt: skip
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["function_ok"] and r["loss"] == pytest.approx(r["curve_loss"], abs=1e-5)
    # transformers computes what the landscape line computes at λ = 0.3
    merged = import_checkpoint(out)
    x = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    assert (_logits(out, x) - forward(merged.cfg, merged.params, x)).abs().max() < 1e-4
    assert paths  # both members were written


def test_gpt2_refuses_rotations_with_the_reason(tmp_path, cache_env):
    _family(tmp_path, _gpt2, "gpt2-rot")
    with pytest.raises(LandscapeError, match="LayerNorm only.*--group perm"):
        write_aligned("gpt2-rot", [0, 1], tmp_path / "out", "weight", "orth")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_nothing_is_overwritten(tmp_path, cache_env):
    (tmp_path / "taken").mkdir()
    with pytest.raises(LandscapeError, match="exists"):
        write_aligned("mlp-digits", [0, 1], tmp_path / "taken")


@pytest.mark.parametrize("options,key", [
    pytest.param(AlignedOptions(), {"seed": 0, "options": {}}, id="defaults"),
    pytest.param(AlignedOptions(merge=0.5, seed=3, settings={"max_rounds": 7}),
                 {"seed": 3, "options": {"max_rounds": 7}}, id="merge-seed-settings"),
])  # fmt: skip
def test_the_alignments_cache_key_is_the_one_it_always_had(tmp_path, monkeypatch, options, key):
    """The inputs of the matching's entry, as they were when ``write_aligned`` took its options
    as keywords (``seed``, ``options``): alignments cached before are still read back."""
    from landscape.sources import Source
    from landscape.store.cache import Cache, digest_tensors

    seen = []

    def spy(self, kind, inputs, compute):
        assert kind == "matching"
        seen.append(inputs)
        raise LookupError("recorded")

    monkeypatch.setattr(Cache, "get_or_compute", spy)
    with pytest.raises(LookupError, match="recorded"):
        write_aligned("mlp-digits", [0, 1], tmp_path / "out", "weight", "perm", options)
    (inputs,) = seen
    a, b = (Source("mlp-digits", s).load() for s in (0, 1))
    assert inputs.pop("a") == digest_tensors(a.params)
    assert inputs.pop("b") == digest_tensors(b.params)
    assert inputs.pop("cfg") == a.cfg.to_dict()
    assert inputs == {**key, "group": "perm", "method": "weight", "version": 5}


def test_an_archive_refuses_what_it_would_write_elsewhere(tmp_path):
    for options in (AlignedOptions(mergekit_config=tmp_path / "m.yaml"),
                    AlignedOptions(out_a=tmp_path / "a")):  # fmt: skip
        with pytest.raises(LandscapeError, match="holds the aligned model alone"):
            aligned_archive("mlp-digits", [0, 1], "weight", "perm", options)


def test_zoo_models_are_written_in_the_landscape_format(tmp_path, capsys, cache_env):
    out = tmp_path / "zoo-aligned"
    assert main(["align", "mlp-digits", "--seeds", "0", "1", "--group", "orth", "--out",
                 str(out), "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    assert r["format"] == "landscape" and r["function_ok"]
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
