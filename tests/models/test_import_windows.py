"""Sliding-window and rotary fields of Qwen2, Qwen3, Mistral, Phi-3, Gemma 2 and Gemma 3, each
missing or set each way in config.json, against transformers' logits on contexts longer than
the window (so the window is what the comparison tests).

Each case saves a tiny random model with transformers, edits its config.json, and compares the
logits transformers computes from the edited file with the imported model's. A configuration
transformers cannot run is refused in one line instead."""

import json
from pathlib import Path

import pytest
import torch

from landscape.models import forward
from landscape.models.importers import import_checkpoint
from tests.conftest import perturbed, refused_import

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=24, vocab_size=64, max_position_embeddings=8192)  # fmt: skip
# the long contexts pass transformers' default window of 4096 by far: a narrower model
LONG = dict(SMALL, hidden_size=16, num_attention_heads=2, num_key_value_heads=1)
WINDOW = 4  # shorter than the SHORT positions of the test input
SHORT, PAST_DEFAULT = 12, 4096 + 512
DROP = "<drop>"  # an edit that deletes the field (None writes null)

# how each kind is built before its config.json is edited: a window of WINDOW everywhere it has
# one, so that an edit that drops or keeps it shows in the logits
BUILD = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0,
                   head_dim=8)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=WINDOW)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(sliding_window=WINDOW, pad_token_id=0,
                                                   bos_token_id=1, eos_token_id=2)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               dict(sliding_window=WINDOW, query_pre_attn_scalar=12, head_dim=8)),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    dict(sliding_window=WINDOW, query_pre_attn_scalar=12, head_dim=8,
                         layer_types=["sliding_attention", "sliding_attention"])),
}  # fmt: skip


def _saved(tmp_path: Path, kind: str, edits: dict, long: bool = False) -> Path:
    """A tiny random ``kind`` model saved by transformers, its config.json then edited
    (``DROP`` deletes a field, None writes null)."""
    config_class, model_class, built = BUILD[kind]
    base = LONG if long else SMALL
    torch.manual_seed(0)
    cfg = getattr(transformers, config_class)(**base, **built)
    model = perturbed(getattr(transformers, model_class)(cfg)).eval()
    out = tmp_path / kind
    model.save_pretrained(out, safe_serialization=True)
    f = out / "config.json"
    config = json.loads(f.read_text())
    for key, value in edits.items():
        if value == DROP:
            config.pop(key, None)
        else:
            config[key] = value
    f.write_text(json.dumps(config))
    return out


def _agrees(path: Path, positions: int, windows: tuple[int, ...]):
    """The imported model has ``windows`` and transformers' logits on ``positions`` tokens."""
    ckpt = import_checkpoint(path)
    assert ckpt.cfg.windows == windows
    x = torch.randint(0, 64, (1, positions), generator=torch.Generator().manual_seed(1))
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        ref = model(x).logits
    got = forward(ckpt.cfg, ckpt.params, x)
    assert float((got - ref).abs().max()) < 1e-4
    if any(windows):  # the window is what makes them agree
        unwindowed = forward(ckpt.cfg.replace(windows=()), ckpt.params, x)
        assert float((unwindowed - ref).abs().max()) > 1e-3
    return ckpt


W, D = WINDOW, 4096
USE = dict(layer_types=DROP)  # every Qwen case below derives its layer types


@pytest.mark.parametrize(
    ("kind", "edits", "windows"),
    [
        # Qwen2 and Qwen3: use_sliding_window (default false), max_window_layers (default 28)
        *[pytest.param(k, e, w, id=f"{k}-{name}") for k in ("qwen2", "qwen3") for name, e, w in (
            ("use-absent", {**USE, "use_sliding_window": DROP}, ()),
            ("use-false", {**USE, "use_sliding_window": False}, ()),
            ("use-true", {**USE, "use_sliding_window": True}, (W, W)),
            ("max-window-layers-absent", {**USE, "max_window_layers": DROP}, ()),
            ("max-window-layers-1", {**USE, "max_window_layers": 1}, (0, W)),
            ("window-null", {**USE, "sliding_window": None}, ()),
            ("layer-types", {"layer_types": ["sliding_attention", "full_attention"],
                             "max_window_layers": 1}, (W, 0)),
            ("rope-absent", {"rope_parameters": DROP, "rope_theta": DROP}, (W, W)),
            ("rope-theta", {"rope_parameters": {"rope_type": "default", "rope_theta": 50.0}},
             (W, W)),
        )],
        # Mistral: no use_sliding_window field; a window that is set applies to every layer
        pytest.param("mistral", {"use_sliding_window": False}, (W, W), id="mistral-use-false"),
        pytest.param("mistral", {"sliding_window": None}, (), id="mistral-window-null"),
        pytest.param("mistral", {"rope_parameters": DROP}, (W, W), id="mistral-rope-absent"),
        # Phi-3: no window by default; partial_rotary_factor honoured (default 1)
        pytest.param("phi3", {"sliding_window": DROP}, (), id="phi3-window-absent"),
        pytest.param("phi3", {"use_sliding_window": False}, (W, W), id="phi3-use-false"),
        pytest.param("phi3", {"rope_parameters": DROP}, (W, W), id="phi3-rope-absent"),
        pytest.param("phi3", {"rope_parameters": {"rope_type": "default", "rope_theta": 50.0,
                                                  "partial_rotary_factor": 0.5}}, (W, W),
                     id="phi3-partial-rotary"),
        # Gemma 2: every other layer sliding from layer 0; query_pre_attn_scalar 256
        pytest.param("gemma2", {"layer_types": DROP}, (W, 0), id="gemma2-layer-types-absent"),
        pytest.param("gemma2", {"query_pre_attn_scalar": DROP}, (W, 0),
                     id="gemma2-query-pre-attn-scalar-absent"),
        pytest.param("gemma2", {"rope_parameters": DROP}, (W, 0), id="gemma2-rope-absent"),
        # Gemma 3: every 6th layer full (sliding_window_pattern); bases 1e6 and 1e4
        pytest.param("gemma3_text", {"layer_types": DROP}, (W, W),
                     id="gemma3-pattern-absent"),
        pytest.param("gemma3_text", {"layer_types": DROP, "sliding_window_pattern": 2}, (W, 0),
                     id="gemma3-pattern-2"),
        pytest.param("gemma3_text", {"rope_parameters": DROP}, (W, W), id="gemma3-rope-absent"),
        pytest.param("gemma3_text", {"rope_parameters": DROP, "rope_local_base_freq": 50.0,
                                     "rope_theta": 5e3, "layer_types": DROP,
                                     "sliding_window_pattern": 2}, (W, 0),
                     id="gemma3-rope-local-base-freq"),
        pytest.param("gemma3_text", {"query_pre_attn_scalar": DROP}, (W, W),
                     id="gemma3-query-pre-attn-scalar-absent"),
    ],
)  # fmt: skip
def test_each_field_missing_or_set_gives_transformers_logits(tmp_path, kind, edits, windows):
    _agrees(_saved(tmp_path, kind, edits), SHORT, windows)


@pytest.mark.parametrize(
    ("kind", "edits", "windows"),
    [
        pytest.param("qwen2", {**USE, "sliding_window": DROP, "max_window_layers": 1}, (0, D),
                     id="qwen2"),
        pytest.param("qwen3", {**USE, "sliding_window": DROP}, (D, D), id="qwen3"),
        pytest.param("mistral", {"sliding_window": DROP}, (D, D), id="mistral"),
        pytest.param("gemma2", {"sliding_window": DROP}, (D, 0), id="gemma2"),
        pytest.param("gemma3_text", {"sliding_window": DROP}, (D, D), id="gemma3"),
    ],
)  # fmt: skip
def test_an_absent_sliding_window_is_transformers_default(tmp_path, kind, edits, windows):
    """sliding_window absent: transformers' default window (4096), on a longer context."""
    _agrees(_saved(tmp_path, kind, edits, long=True), PAST_DEFAULT, windows)


@pytest.mark.parametrize(
    ("kind", "edits", "fragments"),
    [
        # transformers drops the window when use_sliding_window is false (or absent), then
        # fails on the sliding layers layer_types names
        *[pytest.param(k, {"layer_types": ["sliding_attention", "full_attention"], **use},
                       ("layer_types", "sliding", "use_sliding_window"), id=f"{k}-{name}")
          for k in ("qwen2", "qwen3") for name, use in (
              ("use-false", {"use_sliding_window": False}),
              ("use-absent", {"use_sliding_window": DROP}))],
        # transformers reads rope_scaling in place of rope_parameters: a base only in the
        # latter would be lost
        pytest.param("qwen2", {"rope_parameters": {"rope_type": "default", "rope_theta": 50.0},
                               "rope_scaling": {"rope_type": "default"}},
                     ("rope_scaling", "rope_parameters"), id="qwen2-rope-scaling-and-parameters"),
        pytest.param("phi3", {"rope_parameters": {"rope_type": "default",
                                                  "partial_rotary_factor": 0.5},
                              "rope_scaling": {"type": "default"}},
                     ("rope_scaling", "rope_parameters"), id="phi3-rope-scaling-and-parameters"),
        # transformers reads sliding_window alone: an older name that disagrees with its default
        pytest.param("gemma2", {"sliding_window": DROP, "sliding_window_size": 8},
                     ("sliding_window_size", "4096"), id="gemma2-window-size-only"),
        # a window of 0 hides every key in transformers' mask
        pytest.param("mistral", {"sliding_window": 0}, ("sliding_window",), id="mistral-window-0"),
    ],
)  # fmt: skip
def test_what_transformers_cannot_run_or_reads_otherwise_is_refused(tmp_path, kind, edits,
                                                                     fragments):  # fmt: skip
    refused_import(_saved(tmp_path, kind, edits), "config.json", *fragments)
