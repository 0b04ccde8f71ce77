"""The importers' defaults for rotary and sliding-window fields are transformers' own: every
entry of ``landscape.models.importers.defaults.DEFAULTS`` equals the installed configuration
class's default, and the layer types each family derives when config.json lists none are
transformers' (so a drift in transformers fails here rather than changing logits quietly)."""

import dataclasses
import itertools

import pytest

from landscape.errors import LandscapeError
from landscape.models.importers import gemma, llama
from landscape.models.importers.defaults import DEFAULTS

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SHAPE = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24,
             vocab_size=64)  # fmt: skip


def _config_class(model_type: str):
    return type(transformers.AutoConfig.for_model(model_type))


def _transformers_default(model_type: str, field: str):
    """What the configuration class of ``model_type`` makes of config.json without ``field``."""
    cls = _config_class(model_type)
    built = cls()
    rope = built.rope_parameters
    if model_type == "gemma3_text" and field in ("rope_theta", "rope_local_base_freq"):
        kind = "full_attention" if field == "rope_theta" else "sliding_attention"
        return rope[kind]["rope_theta"]
    if field in ("rope_theta", "partial_rotary_factor"):
        return rope.get(field, 1.0 if field == "partial_rotary_factor" else None)
    if field == "sliding_window_pattern":  # read from the keyword arguments, not a field
        layers = cls(num_hidden_layers=24).layer_types
        return next(i + 1 for i, k in enumerate(layers) if k == "full_attention")
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    assert field in fields, f"{cls.__name__} has no field {field}"
    return fields[field]


@pytest.mark.parametrize(
    ("model_type", "field"),
    [(m, f) for m, entry in DEFAULTS.items() for f in entry],
    ids=lambda v: v,
)
def test_each_default_is_the_transformers_configuration_class_default(model_type, field):
    assert DEFAULTS[model_type][field] == _transformers_default(model_type, field)


def test_every_rotary_and_window_field_of_the_windowed_families_is_in_the_table():
    fields = {"rope_theta", "max_position_embeddings", "sliding_window", "use_sliding_window",
              "max_window_layers", "query_pre_attn_scalar", "partial_rotary_factor"}  # fmt: skip
    for model_type in ("qwen2", "qwen3", "qwen3_moe", "mistral", "phi3", "gemma2",
                       "gemma3_text"):  # fmt: skip
        declared = {f.name for f in dataclasses.fields(_config_class(model_type))}
        assert (fields & declared) - set(DEFAULTS[model_type]) == set(), model_type


SLIDING = {"qwen2": "by layer", "qwen3": "by layer", "qwen3_moe": "every layer when used"}


def _llama_like_windows(model_type: str, config: dict, n_layers: int):
    sliding = SLIDING.get(model_type, "every layer")
    return llama._layer_windows(config, "config.json", n_layers, 8192, sliding,
                                DEFAULTS[model_type])[0]  # fmt: skip


def _gemma_windows(model_type: str, config: dict, n_layers: int):
    version = 2 if model_type == "gemma2" else 3
    kinds = gemma._layer_kinds(config, "config.json", n_layers, version)
    return gemma._windows(config, "config.json", kinds, model_type)


def _transformers_windows(model_type: str, config: dict, n_layers: int):
    """Per-layer windows of the model transformers builds from ``config``; None when it
    would build a model it cannot run (sliding layers without a window)."""
    built = _config_class(model_type).from_dict(
        {"model_type": model_type, **SHAPE, **config, "num_hidden_layers": n_layers}
    )
    window = built.sliding_window
    if "layer_types" not in {f.name for f in dataclasses.fields(_config_class(model_type))}:
        # one window for every layer, if any (Mistral, Phi-3, Qwen3-MoE: a layer_types in
        # config.json is kept on the config but never read)
        return (window,) * n_layers if window else ()
    kinds = built.layer_types
    if "sliding_attention" in kinds and window is None:
        return None
    out = tuple(window if k == "sliding_attention" else 0 for k in kinds)
    return out if any(out) else ()


ABSENT = "<absent>"


def _cases(options: dict[str, tuple]):
    for values in itertools.product(*options.values()):
        yield {k: v for k, v in zip(options, values, strict=True) if v != ABSENT}


QWEN = {"use_sliding_window": (ABSENT, True, False), "max_window_layers": (ABSENT, 0, 2),
        "sliding_window": (ABSENT, None, 5),
        "layer_types": (ABSENT, ["full_attention", "sliding_attention", "sliding_attention"])}
OPTIONS = {
    "qwen2": QWEN,
    "qwen3": QWEN,
    "qwen3_moe": QWEN,  # layer_types and max_window_layers: not read
    "mistral": {"sliding_window": (ABSENT, None, 5), "use_sliding_window": (ABSENT, False)},
    "phi3": {"sliding_window": (ABSENT, None, 5), "use_sliding_window": (ABSENT, False)},
    "gemma2": {"sliding_window": (ABSENT, None, 5),
               "layer_types": (ABSENT, ["full_attention", "full_attention", "sliding_attention"])},
    "gemma3_text": {"sliding_window": (ABSENT, None, 5), "sliding_window_pattern": (ABSENT, 2, 3),
                    "layer_types": (ABSENT, ["full_attention", "sliding_attention",
                                             "full_attention"])},
}  # fmt: skip


@pytest.mark.parametrize("model_type", list(OPTIONS))
def test_derived_layer_windows_are_transformers_or_refused(model_type):
    """Every combination of the window fields (absent, null, set): the importer's per-layer
    windows equal those of the model transformers builds, and what transformers cannot run
    is refused."""
    ours = _gemma_windows if model_type.startswith("gemma") else _llama_like_windows
    for config in _cases(OPTIONS[model_type]):
        expected = _transformers_windows(model_type, dict(config), 3)
        if expected is None:
            with pytest.raises(LandscapeError, match="sliding layers"):
                ours(model_type, config, 3)
        else:
            assert ours(model_type, config, 3) == expected, config
