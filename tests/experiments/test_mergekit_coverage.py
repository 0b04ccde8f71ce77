"""mergekit merges the tensors its architecture definition names, and only those: a pair whose
written checkpoint holds a tensor the definition lacks (attention or MLP biases of Llama, Qwen3,
OLMo 2 and the Gemmas, an untied Gemma's head) or lacks one the definition requires (a NeoX
without attention biases, a tied NeoX or Phi-3) is refused in one line before any matching or
merge, by ``align --mergekit-config`` and by ``merges``. GPT-NeoX, whose definition requires
buffers transformers 5 no longer writes, is written with them and merges."""

import json
import sys

import pytest
import torch

from landscape.cli import main
from landscape.experiments.merging import export, operators
from landscape.experiments.merging.operators import run_operator
from landscape.models.importers import import_checkpoint
from tests.conftest import perturbed, tiny_llama
from tests.experiments.test_export import _family

transformers = pytest.importorskip("transformers")
pytest.importorskip("mergekit")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=256, max_position_embeddings=32,
             pad_token_id=0)  # fmt: skip


def _builder(model_type: str, **config):
    def build(seed: int):
        torch.manual_seed(seed)
        extra = {} if model_type == "gpt_neox" else {"head_dim": 8}
        cfg = transformers.AutoConfig.for_model(model_type, **SMALL, **extra, **config)
        return perturbed(transformers.AutoModelForCausalLM.from_config(cfg))

    build.__name__ = model_type
    return build


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if an alignment, a line or a merge starts."""

    def started(*args, **kwargs):
        raise AssertionError("work started before the refusal")

    for module, name in ((export, "align"), (operators, "align"),
                         (operators, "measure_barrier"), (operators, "run_operator")):  # fmt: skip
        monkeypatch.setattr(module, name, started)


def _refused(capsys, argv, *fragments) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [e for e in err.splitlines() if e.startswith("landscape: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


UNCOVERED = [
    pytest.param(_builder("llama", attention_bias=True, mlp_bias=True, tie_word_embeddings=False),
                 "LlamaForCausalLM definition has no", "_proj.bias", id="llama-biases"),
    pytest.param(_builder("gemma", attention_bias=True), "GemmaForCausalLM definition has no",
                 "_proj.bias", id="gemma-attention-bias"),
    pytest.param(_builder("qwen3", attention_bias=True, tie_word_embeddings=True),
                 "Qwen3ForCausalLM definition has no", "_proj.bias", id="qwen3-attention-bias"),
    pytest.param(_builder("gemma", tie_word_embeddings=False),
                 "GemmaForCausalLM definition has no", "lm_head.weight", id="gemma-untied"),
    pytest.param(_builder("phi3", tie_word_embeddings=True), "Phi3ForCausalLM definition requires",
                 "lm_head.weight", id="phi3-tied"),
    pytest.param(_builder("gpt_neox", attention_bias=False), "definition requires",
                 "attention.dense.bias", id="neox-no-attention-bias"),
    pytest.param(_builder("gpt_neox", tie_word_embeddings=True), "definition requires",
                 "embed_out.weight", id="neox-tied"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "says", "tensor"), UNCOVERED)
def test_align_refuses_a_config_mergekit_would_not_merge_whole(
    tmp_path, cache_env, capsys, no_work, build, says, tensor
):
    _family(tmp_path, build, "mk-gap")
    capsys.readouterr()
    out, config, a = tmp_path / "b", tmp_path / "m.yaml", tmp_path / "a"
    _refused(capsys, ["align", "mk-gap", "--seeds", "0", "1", "--out", str(out),
                             "--out-a", str(a), "--mergekit-config", str(config)],
             "mergekit", says, tensor, "cannot merge this pair")  # fmt: skip
    assert not out.exists() and not config.exists() and not a.exists()


@pytest.mark.parametrize(("build", "says", "tensor"), UNCOVERED[:1] + UNCOVERED[-2:-1])
def test_merges_refuses_them_before_any_work(tmp_path, cache_env, capsys, no_work, build, says,
                                             tensor):  # fmt: skip
    _family(tmp_path, build, "mk-gap")
    capsys.readouterr()
    _refused(capsys, ["merges", "mk-gap", "--seeds", "0", "1", "--operators", "linear",
                      "--points", "3"], says, tensor)  # fmt: skip


def test_a_complete_own_directory_of_a_still_refuses_out_a(tmp_path, cache_env, capsys, no_work):
    _family(tmp_path, tiny_llama, "mk-llama")
    capsys.readouterr()
    _refused(capsys, ["align", "mk-llama", "--seeds", "0", "1", "--out", str(tmp_path / "b"),
                      "--mergekit-config", str(tmp_path / "m.yaml"), "--out-a",
                      str(tmp_path / "a")], "leaves A as it is")  # fmt: skip


_NEOX = _builder("gpt_neox", tie_word_embeddings=False)


def test_neox_merges_through_mergekit_on_the_line(tmp_path, cache_env, capsys):
    # mergekit's linear merge of the written pair is the straight line at every λ
    _family(tmp_path, _NEOX, "mk-neox")
    capsys.readouterr()
    assert main(["merges", "mk-neox", "--seeds", "0", "1", "--operators", "linear", "--points",
                 "3", "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    for al in r["pairs"][0]["alignments"]:
        line, linear = al["line"]["loss"], al["operators"]["linear"]["loss"]
        assert max(abs(x - y) for x, y in zip(line, linear, strict=True)) < 1e-4, (line, linear)


def test_neox_mergekit_config_merges_to_align_merge(tmp_path, cache_env, capsys):
    # A's own directory (saved by transformers 5) lacks the buffers: A is written with them
    _family(tmp_path, _NEOX, "mk-neox")
    capsys.readouterr()
    b, a, config = tmp_path / "b", tmp_path / "a", tmp_path / "m.yaml"
    assert main(["align", "mk-neox", "--seeds", "0", "1", "--out", str(b), "--out-a", str(a),
                 "--mergekit-config", str(config), "--merge-weight", "0.3"]) == 0  # fmt: skip
    assert str(a) in config.read_text(encoding="utf-8")
    run_operator(a, b, "linear", 0.3, tmp_path / "merged")
    assert main(["align", "mk-neox", "--seeds", "0", "1", "--merge", "0.3", "--out",
                 str(tmp_path / "line")]) == 0  # fmt: skip
    merged, line = import_checkpoint(tmp_path / "merged"), import_checkpoint(tmp_path / "line")
    gap = max(float((merged.params[k] - line.params[k]).abs().max()) for k in line.params)
    assert gap < 1e-6, gap


def test_without_mergekit_the_config_is_written_with_a_warning(tmp_path, cache_env, capsys,
                                                               monkeypatch):  # fmt: skip
    # the config is for a machine that has mergekit: here nothing can be checked, and it says so
    _family(tmp_path, tiny_llama, "mk-none")
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "mergekit.architecture", None)  # import → ImportError
    config = tmp_path / "m.yaml"
    assert main(["align", "mk-none", "--seeds", "0", "1", "--out", str(tmp_path / "b"),
                 "--mergekit-config", str(config), "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    assert config.is_file() and r["function_ok"]
    assert any("not checked" in w for w in r["warnings"]), r["warnings"]
