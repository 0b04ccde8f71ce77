"""Untrusted text (file contents, paths, names, error messages) shown exactly as written."""

from __future__ import annotations

import re

# Characters that start markdown, HTML, math ($) or Streamlit's own syntax (:red[...],
# :material/icon:, emoji shortcodes) anywhere in a line; "-" starts a list only at a line start.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#+.!|~$:=&^@])")
_LINE_START = re.compile(r"^([ \t]*)-", re.MULTILINE)


def plain(text: object) -> str:
    """``text`` for any Streamlit markdown body or label, shown exactly as written.

    File contents, paths, names, labels and error messages are untrusted: escaped with
    backslashes, they can add no image, link, HTML tag, formula or heading to a page.
    """
    return _LINE_START.sub(r"\1\\-", _MARKDOWN.sub(r"\\\1", str(text)))


def literal(text: object) -> str:
    """``text`` as an inline code span (monospace, nothing in it is markdown): for paths."""
    s = " ".join(str(text).splitlines())
    fence = "`" * (max(map(len, re.findall(r"`+", s)), default=0) + 1)
    return f"{fence} {s} {fence}"
