"""GGUF checkpoints: a tiny Llama written as GGUF in the test (weights and a byte-level BPE
tokenizer), read by the importer and by transformers; its text encoded with its own tokenizer."""

from pathlib import Path

import pytest
import torch

from landscape.data.text import token_corpus
from landscape.models import forward
from landscape.models.importers import checkpoint_tokenizer, import_checkpoint
from landscape.models.importers.gguf import gguf_file

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
pytest.importorskip("accelerate")

D, F, LAYERS, HEADS, KV, D_HEAD = 16, 24, 2, 4, 2, 4
MERGES = ["t h", "th e", "Ġ t", "e r"]


def _byte_symbols() -> list[str]:
    """The printable stand-in for each byte that byte-level BPE vocabularies use."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def write_tiny_gguf(d: Path, name: str = "tiny.gguf", merges: list[str] = MERGES,
                    tokenizer: str | None = "gpt2", seed: int = 0, extra_tokens: int = 0,
                    **lies: int) -> Path:  # fmt: skip
    """A 2-layer Llama with grouped-query attention and a BPE vocabulary (the 256 byte symbols,
    the tokens ``merges`` make, an end token, ``extra_tokens`` fillers), as GGUF.
    ``tokenizer``: the tokenizer model written (None: no tokenizer at all); ``lies``: metadata
    written in place of the true values (``block_count``, ``vocab_size``,
    ``feed_forward_length``, ``head_count``)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    fillers = [f"<filler{i}>" for i in range(extra_tokens)]
    tokens = [*_byte_symbols(), *(m.replace(" ", "") for m in merges), *fillers, "<|endoftext|>"]
    v = len(tokens)
    f = d / name
    w = gguf.GGUFWriter(str(f), "llama")
    w.add_context_length(32)
    w.add_embedding_length(D)
    w.add_block_count(lies.get("block_count", LAYERS))
    w.add_feed_forward_length(lies.get("feed_forward_length", F))
    w.add_head_count(lies.get("head_count", HEADS))
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(D_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(lies.get("vocab_size", v))
    if tokenizer is not None:
        w.add_tokenizer_model(tokenizer)
        w.add_token_list(tokens)
        w.add_token_types([1] * (v - 1) + [3])
        w.add_token_merges(merges)
        w.add_bos_token_id(v - 1)
        w.add_eos_token_id(v - 1)

    def tensor(name: str, *shape: int) -> None:
        scale = 0.3 if len(shape) > 1 else 1.0
        w.add_tensor(name, (1.0 * (len(shape) == 1) + scale * rng.standard_normal(shape)
                            ).astype(np.float32))  # fmt: skip

    tensor("token_embd.weight", v, D)
    tensor("output_norm.weight", D)
    tensor("output.weight", v, D)
    for i in range(LAYERS):
        b = f"blk.{i}"
        tensor(f"{b}.attn_norm.weight", D)
        tensor(f"{b}.ffn_norm.weight", D)
        tensor(f"{b}.attn_q.weight", HEADS * D_HEAD, D)
        tensor(f"{b}.attn_k.weight", KV * D_HEAD, D)
        tensor(f"{b}.attn_v.weight", KV * D_HEAD, D)
        tensor(f"{b}.attn_output.weight", D, HEADS * D_HEAD)
        tensor(f"{b}.ffn_gate.weight", F, D)
        tensor(f"{b}.ffn_up.weight", F, D)
        tensor(f"{b}.ffn_down.weight", D, F)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return f


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf"))


def test_gguf_logits_equal_transformers(tiny):
    ckpt = import_checkpoint(tiny)
    assert ckpt.meta["format"] == "gguf" and ckpt.cfg.n_kv_heads == KV and ckpt.cfg.gated
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        str(tiny.parent), gguf_file=tiny.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    x = torch.randint(0, ckpt.cfg.d_vocab, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = ref(x).logits
    assert (forward(ckpt.cfg, ckpt.params, x) - expected).abs().max() < 1e-4


def test_gguf_text_is_encoded_with_the_tokenizer_it_stores(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "t.txt"
    text.write_text("the other thing, then the theatre; " * 40)
    assert gguf_file(tiny.parent) == tiny and gguf_file(text) is None
    corpus = token_corpus(text, checkpoint_tokenizer(tiny), d_vocab=261)
    assert corpus.tokenizer == "gguf" and tiny.name in corpus.note
    ref = transformers.AutoTokenizer.from_pretrained(str(tiny.parent), gguf_file=tiny.name)
    ids = ref(text.read_text(), add_special_tokens=False)["input_ids"]
    assert torch.cat([corpus.train, corpus.test]).tolist() == ids
    assert len(ids) < len(text.read_bytes())  # merges were applied: not bytes
    stored = list((tmp_path / "cache" / "tokenizers").glob("*.json"))
    assert len(stored) == 1
    # the second time the stored file is read, whatever transformers would do
    monkeypatch.setattr(transformers, "AutoTokenizer", None)
    again = token_corpus(text, checkpoint_tokenizer(tiny.parent), d_vocab=261)
    assert again.tokenizer == "gguf" and torch.equal(again.train, corpus.train)
