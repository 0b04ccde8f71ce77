"""Hostile links: a URL value holding markdown (blank lines, an image, a link) is never rendered.

Every link value is looked up among its control's options; one that is not an option falls back
to the default with a note that quotes it as text. The note, and every other element on the page,
must hold no image or link the value brought (the browser would fetch the image).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from tests.app.common import MAIN

IMAGE = "x\n\n![b](http://127.0.0.1:9/b.png)"
LINK = "x\n\n[Log in again](https://127.0.0.1:9/login)\n\n"
HOSTILE = [IMAGE, LINK, "x `\n\n![c](http://127.0.0.1:9/c.png)` y"]


def _texts(node: Any) -> Iterator[str]:
    """Every text of the page a markdown renderer reads: element bodies and widget labels."""
    proto = getattr(node, "proto", None)
    if proto is not None:
        for field in ("body", "label", "value", "help", "caption", "text"):
            try:
                value = getattr(proto, field)
            except AttributeError:
                continue
            if isinstance(value, str) and value:
                yield value
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from _texts(child)


def _no_rendered_link(at: AppTest, hostile: str) -> list[str]:
    """The texts on the page; asserts none renders an image or a link."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    texts = list(_texts(at._tree))
    for text in texts:
        html = md.render(text)
        assert "<img" not in html and "<a " not in html, (hostile, text)
    return texts


def _open(page: str, query: dict[str, str], **state: Any) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params.update(query)
    at.switch_page(page)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("hostile", HOSTILE, ids=["image", "link", "backtick"])
def test_hostile_link_values_are_quoted_as_text_on_the_home_page(hostile):
    at = _open("views/home.py", {"model": hostile, "lam": hostile})
    assert at.sidebar.selectbox(key="model").value == "mlp-digits"
    texts = _no_rendered_link(at, hostile)
    notes = [t for t in texts if "is not an option" in t]
    assert len(notes) == 2, notes  # the model's note in the sidebar, λ's on the page
    assert all("\n" not in n for n in notes)


def test_hostile_link_values_are_quoted_as_text_on_the_gauge_and_atlas_pages():
    query = {"seed": IMAGE, "draws": LINK, "steps": IMAGE, "gauge": LINK}
    at = _open("views/gauge.py", query)
    assert len([t for t in _no_rendered_link(at, IMAGE) if "is not an option" in t]) == 4
    # two seeds are not enough for an atlas: the page stops before any work, after its controls
    at = _open("views/atlas.py", {"projection": IMAGE, "group": LINK, "reference": IMAGE},
               **{"atlas_seeds_mlp-digits": [0]})  # fmt: skip
    assert len([t for t in _no_rendered_link(at, IMAGE) if "is not an option" in t]) == 3


def test_hostile_link_values_are_quoted_as_text_on_the_interpolation_page():
    query = {"pairs": IMAGE, "methods": LINK, "dl_lam": IMAGE, "split": LINK, "points": IMAGE,
             "space": IMAGE}  # fmt: skip
    at = _open("views/interpolation.py", query)
    notes = [t for t in _no_rendered_link(at, IMAGE) if "is not an option" in t]
    # pairs, methods, split, points and the download's λ (a model without heads has no space)
    assert len(notes) == 5, notes


def test_a_bad_links_note_speaks_of_the_control_and_its_default_in_words():
    at = _open("views/home.py", {"present": "2"})
    notes = [t for t in _texts(at._tree) if "is not an option" in t]
    assert len(notes) == 1, notes
    assert "presentation mode" in notes[0] and "` off `" in notes[0], notes[0]
    assert "` 0 `" not in notes[0] and "present " not in notes[0]
