"""The Models page's import form speaks the form's language: a path that is not there is said to
be missing, a missing input is named by its field (never a command-line flag), and the import
says how a text was encoded."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from landscape.models.checkpoint import Checkpoint, save_checkpoint_dir
from landscape.models.config import ModelConfig
from landscape.models.params import init_params
from tests.app.common import MAIN


def _import(paths: list[Path | str], text: str = "", name: str = "form-fam") -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page("views/models.py")
    at.run()
    at.text_input(key="import_name").set_value(name)
    at.text_area(key="import_paths").set_value("\n".join(str(p) for p in paths))
    at.text_input(key="import_text").set_value(text)
    next(b for b in at.get("form_submit_button") if b.label == "Import").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _gpt_pair(tmp_path: Path, d_vocab: int = 50257) -> list[Path]:
    """Two random GPTs with GPT-2's vocabulary and no tokenizer.json beside them."""
    cfg = ModelConfig("gpt", d_model=8, d_mlp=12, n_layers=1, n_out=d_vocab, n_heads=2,
                      d_head=4, d_vocab=d_vocab, n_ctx=8)  # fmt: skip
    return [save_checkpoint_dir(Checkpoint(cfg, init_params(cfg, s), {}), tmp_path / f"g{s}")
            for s in (0, 1)]  # fmt: skip


def test_a_missing_path_is_said_to_be_missing(tmp_path):
    at = _import([tmp_path / "nowhere"])
    errors = " ".join(e.value for e in at.error)
    assert "does not exist" in errors and "nowhere" in errors, errors
    assert "zoo model" not in errors


def test_a_missing_text_file_names_the_form_field_not_a_flag(tmp_path):
    at = _import(_gpt_pair(tmp_path, d_vocab=64))
    errors = " ".join(e.value for e in at.error).replace("\\", "")  # markdown escapes
    assert "Text file (language models)" in errors, errors
    assert "--" not in errors


def test_a_gpt2_vocabulary_without_tokenizer_says_how_the_text_was_encoded(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("To be, or not to be, that is the question. " * 80)
    at = _import(_gpt_pair(tmp_path), text=str(text), name="bytes-fam")
    said = " ".join(s.value for s in at.success)
    assert "bytes-fam" in said, [e.value for e in at.error]
    assert "UTF-8 bytes" in said and "not the model's tokenizer" in said, said
