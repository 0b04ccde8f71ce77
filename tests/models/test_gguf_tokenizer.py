"""The tokenizer a GGUF file stores: its content in the data key, the extracted copy in the cache
checked against the file, and loads from several threads that neither race nor fall back to
other ids."""

import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

from landscape.data.text import token_corpus
from landscape.errors import LandscapeError
from landscape.models.importers import checkpoint_tokenizer, import_checkpoint
from landscape.sources import DataSpec, spec_data
from tests.models.test_gguf import write_tiny_gguf

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")

# as many merges as MERGES (so the same number of tokens and the same weights), other tokens
OTHER_MERGES = ["h e", "Ġ t", "t h", "e r"]
TEXT = "the other thing, then the theatre; here there " * 40


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("LANDSCAPE_CACHE", str(root))
    return root


@pytest.fixture
def text(tmp_path) -> Path:
    f = tmp_path / "t.txt"
    f.write_text(TEXT)
    return f


def _reference_ids(f: Path) -> list[int]:
    tok = transformers.AutoTokenizer.from_pretrained(str(f.parent), gguf_file=f.name)
    return tok(TEXT, add_special_tokens=False)["input_ids"]


def _ids(corpus) -> list[int]:
    return torch.cat([corpus.train, corpus.test]).tolist()


def _two(tmp_path: Path) -> tuple[Path, Path]:
    """Two GGUF files with the same weights and different tokenizers, in folders of their own."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return write_tiny_gguf(tmp_path / "a"), write_tiny_gguf(tmp_path / "b", merges=OTHER_MERGES)


def test_same_weights_other_tokenizer_is_another_data_key(tmp_path, cache, text):
    a, b = _two(tmp_path)
    ca, cb = import_checkpoint(a), import_checkpoint(b)
    assert all(torch.equal(ca.params[k], cb.params[k]) for k in ca.params)  # the same weights
    spec = DataSpec(str(text), n_ctx=8, max_windows=4)
    ka, kb = spec_data(ca, a, spec).key, spec_data(cb, b, spec).key
    assert ka["text"] == kb["text"] and ka["tokens"] == kb["tokens"] == "gguf"
    assert ka != kb  # the tokenizer's content is in the key
    assert _ids(token_corpus(text, checkpoint_tokenizer(a), 261)) == _reference_ids(a)
    assert _ids(token_corpus(text, checkpoint_tokenizer(b), 261)) == _reference_ids(b)


def test_a_swapped_or_truncated_stored_tokenizer_is_extracted_again(tmp_path, cache, text):
    a, b = _two(tmp_path)
    token_corpus(text, checkpoint_tokenizer(a), 261)
    (stored_a,) = (cache / "tokenizers").glob("*.json")
    token_corpus(text, checkpoint_tokenizer(b), 261)
    (stored_b,) = set((cache / "tokenizers").glob("*.json")) - {stored_a}
    shutil.copyfile(stored_b, stored_a)  # b's tokenizer where a's should be
    assert _ids(token_corpus(text, checkpoint_tokenizer(a), 261)) == _reference_ids(a)
    whole = stored_a.read_bytes()
    stored_a.write_bytes(whole[: len(whole) // 2])  # truncated
    assert _ids(token_corpus(text, checkpoint_tokenizer(a), 261)) == _reference_ids(a)
    assert stored_a.read_bytes() == whole  # written whole again


class _Loader:
    """transformers' tokenizer loader wrapped: counts calls and the most running at once,
    raises ``fail`` the first time when given, and holds each call a moment so that calls
    from threads started together overlap unless something serialises them."""

    def __init__(self, real, fail: BaseException | None = None) -> None:
        self.real, self.fail = real, fail
        self.calls = self.running = self.most = 0
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
            first = self.calls == 1
        try:
            time.sleep(0.3)
            if first and self.fail is not None:
                raise self.fail
            return self.real(*args, **kwargs)
        finally:
            with self.lock:
                self.running -= 1


def _patch_loader(monkeypatch, fail: BaseException | None = None) -> _Loader:
    loader = _Loader(transformers.AutoTokenizer.from_pretrained, fail)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", loader)
    return loader


def _in_threads(fn, n: int = 2) -> list:
    """``fn()`` in ``n`` threads released together; each result, or the exception raised."""
    start, out = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        start.wait()
        try:
            out[i] = fn()
        except Exception as e:  # collected for the test to judge
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_two_threads_encoding_for_one_gguf_extract_once(tmp_path, cache, text, monkeypatch):
    f = write_tiny_gguf(tmp_path)
    expected = _reference_ids(f)
    loader = _patch_loader(monkeypatch)
    results = _in_threads(lambda: token_corpus(text, checkpoint_tokenizer(f), 261))
    assert loader.most == 1 and loader.calls == 1  # serialised; the second read the first's
    assert all(not isinstance(r, Exception) for r in results), results
    assert [r.tokenizer for r in results] == ["gguf", "gguf"]
    assert _ids(results[0]) == _ids(results[1]) == expected


def test_an_import_error_inside_the_loader_is_an_error_not_a_fallback(tmp_path, cache, text,
                                                                      monkeypatch):  # fmt: skip
    """The ImportError a half-imported transformers module raises is reported as what it is,
    in one line, and never turns into character or byte ids; nothing wrong is kept, so the
    next call encodes with the stored tokenizer."""
    f = write_tiny_gguf(tmp_path)
    why = ImportError("cannot import name 'GGUFTokenizerSkeleton' from partially initialized "
                      "module 'transformers.integrations.ggml'")  # fmt: skip
    _patch_loader(monkeypatch, why)
    results = _in_threads(lambda: token_corpus(text, checkpoint_tokenizer(f), 261))
    assert not [r for r in results if not isinstance(r, Exception) and r.tokenizer != "gguf"]
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], LandscapeError), results
    msg = str(errors[0])
    assert "partially initialized" in msg and "needs" not in msg and "\n" not in msg
    assert _ids(token_corpus(text, checkpoint_tokenizer(f), 261)) == _reference_ids(f)


def test_a_missing_package_is_named(tmp_path, cache, text, monkeypatch):
    import importlib.util

    f = write_tiny_gguf(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "transformers" else real(name, *a),
    )
    with pytest.raises(LandscapeError, match="needs the transformers package"):
        token_corpus(text, checkpoint_tokenizer(f), 261)


def test_a_tokenizer_that_cannot_be_extracted_is_one_line(tmp_path, cache, text):
    f = write_tiny_gguf(tmp_path, tokenizer="no-such-model")
    with pytest.raises(LandscapeError) as err:
        token_corpus(text, checkpoint_tokenizer(f), 261)
    assert f.name in str(err.value) and "tokenizer" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_gguf_without_a_tokenizer_says_so(tmp_path, cache, text):
    f = write_tiny_gguf(tmp_path, tokenizer=None)
    corpus = token_corpus(text, checkpoint_tokenizer(f), 261)
    assert corpus.tokenizer == "bytes" and "stores no tokenizer" in corpus.note


def test_a_failed_first_load_leaves_no_wrong_family_data(tmp_path, cache, text, monkeypatch):
    """The family memo keeps only data encoded with the family's own tokenizer: a first load
    that fails inside transformers is an error, and the next call encodes properly."""
    from landscape.sources import DataSpec, add_family, family_splits
    from landscape.sources import families as sources

    members = []
    for seed in (0, 1):
        (tmp_path / f"m{seed}").mkdir()
        members.append(write_tiny_gguf(tmp_path / f"m{seed}", seed=seed))
    add_family("gguf-pair", members, DataSpec(text=text, n_ctx=8, max_windows=4))
    # as in a new process: no data read yet, no tokenizer extracted
    monkeypatch.setattr(sources, "_FAMILY_DATA", {})
    shutil.rmtree(cache / "tokenizers", ignore_errors=True)
    _patch_loader(
        monkeypatch,
        ImportError(
            "cannot import name 'X' from partially initialized "
            "module 'transformers.integrations.ggml'"
        ),
    )
    with pytest.raises(LandscapeError, match="partially initialized"):
        family_splits("gguf-pair")
    splits, key = family_splits("gguf-pair")
    assert key["tokens"] == "gguf" and key["tokenizer"]
    assert splits["train"].inputs.max() > 255  # merged tokens: not bytes
