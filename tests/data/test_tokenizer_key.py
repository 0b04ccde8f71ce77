"""A family's data key records its tokenizer's content: replacing tokenizer.json in the
members' folders (same weights, same text) gives fresh numbers, not the cached ones."""

import pytest

from landscape.experiments.barriers.pipeline import measure_barrier
from landscape.experiments.barriers.request import BarrierRequest
from landscape.sources import DataSpec, Source, add_family, family_splits
from landscape.store.cache import Cache
from tests.conftest import tiny_llama

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["[UNK]", "to", "be", "or", "not", "that", "is", "the", "question", ",", "."]


def _tokenizer(order: list[str]):
    """A word-level tokenizer giving the words of ``order`` the ids 0, 1, ..."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(
        {w: i for i, w in enumerate(order)}, unk_token="[UNK]"))  # fmt: skip
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return tok


def test_a_replaced_tokenizer_gives_another_data_key_and_fresh_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    members = []
    for seed in (0, 1):
        members.append(tmp_path / f"m{seed}")
        tiny_llama(seed).save_pretrained(members[-1], safe_serialization=True)
        _tokenizer(WORDS).save(str(members[-1] / "tokenizer.json"))
    text = tmp_path / "text.txt"
    text.write_text("To be, or not to be, that is the question. " * 60)
    add_family("tok-family", members, DataSpec(text=text, n_ctx=8, max_windows=8))
    cache = Cache(tmp_path / "barriers")
    request = BarrierRequest(Source("tok-family", 0), Source("tok-family", 1), "naive", points=3)

    def barrier():
        return measure_barrier(request, cache=cache)

    first, key = barrier(), family_splits("tok-family")[1]
    assert not first.cached and barrier().cached
    for m in members:  # same weights, same text; the words get other ids
        _tokenizer([WORDS[0], *reversed(WORDS[1:])]).save(str(m / "tokenizer.json"))
    again = barrier()
    assert family_splits("tok-family")[1] != key and key["tokenizer"]
    assert not again.cached
    assert again.entry["curve"]["loss"] != first.entry["curve"]["loss"]
    fresh = measure_barrier(request, cache=Cache(tmp_path / "fresh"))
    assert again.entry["curve"]["loss"] == fresh.entry["curve"]["loss"]
