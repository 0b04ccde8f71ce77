"""Untrusted text on a terminal: folder names, labels and family names holding terminal escapes
(a window title, a cleared screen) are printed as visible escapes, never raw; --json stays JSON.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from landscape.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TITLE = "\x1b]0;pwned\x07\x1b[2J"  # set the window title, clear the screen
C1 = "\x9b31m\x85\x7f"  # an 8-bit CSI, a next-line, a DEL
RAW = ["\x1b", "\x07", "\x9b", "\x85", "\x7f"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))
    return tmp_path


def _no_raw_control(text: str) -> None:
    for c in RAW:
        assert c not in text, (c, text)


@pytest.mark.parametrize(
    "text,shown",
    [
        (TITLE, "\\x1b]0;pwned\\x07\\x1b[2J"),
        (C1, "\\x9b31m\\x85\\x7f"),
        ("a\tb\r\nc\x00", "a\\tb\\r\\nc\\x00"),
        ("plain · text ✓", "plain · text ✓"),
    ],
)
def test_terminal_safe_writes_every_control_character_as_a_visible_escape(text, shown):
    from landscape.cli.summaries import terminal_safe

    assert terminal_safe(text) == shown
    assert terminal_safe("one\ntwo" + TITLE, keep="\n") == "one\ntwo\\x1b]0;pwned\\x07\\x1b[2J"


def test_family_add_and_show_print_hostile_folders_and_labels_as_visible_escapes(
    home, tmp_path, capsys
):
    pytest.importorskip("transformers")
    from tests.conftest import llama_checkpoints

    ckpts = llama_checkpoints(tmp_path / "made", 7)
    folder = tmp_path / f"member{TITLE}"
    shutil.copytree(ckpts["a"], folder)
    argv = ["family", "add", "evil", str(folder), str(ckpts["b"]), "--text", str(ckpts["text"]),
            "--n-ctx", "16", "--max-windows", "8",
            "--labels", f"tune{TITLE}", f"b{C1}"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr()
    _no_raw_control(out.out + out.err)
    assert "\\x1b]0;pwned\\x07" in out.out  # the folder and the label are shown, escaped

    assert main(["family", "show", "evil"]) == 0
    out = capsys.readouterr()
    _no_raw_control(out.out + out.err)
    assert "tune\\x1b]0;pwned\\x07\\x1b[2J" in out.out and "b\\x9b31m\\x85\\x7f" in out.out

    # JSON: the text itself, escaped by JSON (no raw control character on the terminal)
    assert main(["family", "show", "evil", "--json"]) == 0
    raw = capsys.readouterr().out
    _no_raw_control(raw)
    shown = json.loads(raw)
    assert shown["labels"] == [f"tune{TITLE}", f"b{C1}"]
    assert [m["path"] for m in shown["members"]][0] == str(folder)


def test_errors_echoing_a_hostile_path_are_one_line_with_visible_escapes(home, tmp_path, capsys):
    missing = tmp_path / f"gone{TITLE}\n{C1}"
    assert main(["family", "add", f"x{TITLE}", str(missing)]) == 2
    err = capsys.readouterr().err
    _no_raw_control(err)
    assert "landscape: error:" in err
    assert main(["inspect", str(missing)]) == 2
    err = capsys.readouterr().err
    _no_raw_control(err)
    assert len(err.strip().splitlines()) == 1, err
