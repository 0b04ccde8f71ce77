"""GGUF files whose metadata lies (small on disk, huge in what they claim) are refused in one
line naming the field and the limit, before transformers builds anything from them."""

import pytest

from landscape.data.text import token_corpus
from landscape.errors import LandscapeError
from landscape.models.importers import checkpoint_tokenizer, import_checkpoint
from tests.models.test_gguf import write_tiny_gguf

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")


@pytest.fixture(autouse=True)
def no_transformers(monkeypatch, tmp_path):
    """transformers is never reached: a call to its loaders fails the test."""
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))

    def reached(*args, **kwargs):
        raise AssertionError("transformers was asked to build it")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", reached)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", reached)


def _refused(call, *fragments: str) -> str:
    with pytest.raises(LandscapeError) as err:
        call()
    msg = str(err.value)
    assert "\n" not in msg and "transformers was asked" not in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_metadata_arrays_beyond_the_budget_are_refused(tmp_path, monkeypatch):
    """Tokens beyond the budget: refused by the importer and by the text encoder alike (the
    budget of 0.01 GB holds 5,242 entries; the file has 6,261 tokens, 93 kB on disk each)."""
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.01")
    f = write_tiny_gguf(tmp_path, extra_tokens=6000)
    text = tmp_path / "t.txt"
    text.write_text("the theatre " * 20)
    encode = lambda: token_corpus(text, checkpoint_tokenizer(f), 6261)  # noqa: E731
    for call in (lambda: import_checkpoint(f), encode):
        _refused(call, "tokenizer.ggml.tokens", "6261 entries", "5242", "LANDSCAPE_MEMORY_GB")


def test_the_same_file_fits_a_larger_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.05")
    from landscape.models.importers.gguf_header import check_model, read_header

    header = read_header(write_tiny_gguf(tmp_path, extra_tokens=6000))
    check_model(header)
    assert header.arrays["tokenizer.ggml.tokens"] == 6261 and header.has_tokenizer


@pytest.mark.parametrize(
    ("lie", "fragments"),
    [
        ({"block_count": 100_000}, ("llama.block_count 100000", "2 blocks")),
        ({"vocab_size": 10**9}, ("llama.vocab_size 1000000000 does not match", "261 rows")),
        ({"feed_forward_length": 10**7}, ("llama.feed_forward_length 10000000", "24 rows")),
        ({"head_count": 100_000}, ("llama.attention.head_count 100000", "16 rows")),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_sizes_beyond_the_tensors_the_file_holds_are_refused(tmp_path, lie, fragments):
    f = write_tiny_gguf(tmp_path, **lie)
    _refused(lambda: import_checkpoint(f), str(f), *fragments)


def test_a_truncated_file_is_refused(tmp_path):
    f = write_tiny_gguf(tmp_path)
    whole = f.read_bytes()
    f.write_bytes(whole[:-100])  # inside the last tensor
    _refused(lambda: import_checkpoint(f), "ends past the file")
    f.write_bytes(whole[:2000])  # inside the token list
    _refused(lambda: import_checkpoint(f), "tokenizer.ggml.tokens", "truncated")
