"""A mergekit configuration for an aligned pair: the aligned pair one command from any of its
merge methods (``landscape align … --mergekit-config PATH``).

mergekit (PyPI ``mergekit``, the optional extra ``landscape[merge]``) merges Hugging Face
directories of one architecture. After ``align --out B`` the two endpoints of the line are A
(its source directory, or with a group that processes the weights A processed the same way,
``--out-a``) and the aligned B; :func:`mergekit_config` writes the YAML that merges them at
λ (λ = 1 is A, as on the line):

- ``linear``: weights λ for A and 1 − λ for B, the straight line itself, so the merged model's
  loss is the curve's value at λ (``tests/experiments/test_mergekit.py`` runs mergekit's CLI);
- ``slerp``: B the base, ``t = λ`` towards A (t = 0 is B);
- ``task_arithmetic``, ``ties``, ``dare_ties``, ``dare_linear``, ``breadcrumbs``, ``della``:
  methods that add task vectors to a base; with no common ancestor, B is the base and A − B the
  one task vector, at weight λ (task arithmetic at λ is then the line again; the sparsifying
  methods take mergekit's defaults for density and the like, to be edited in the file, or
  ``density``). ``normalize: false`` is written for them: with one task vector, mergekit's
  normalisation (the default of ``ties`` and ``della``) divides the weight λ away, and every λ
  would give the same model.

``landscape merges`` (:mod:`landscape.experiments.merging.operators`) runs these configurations
through mergekit along λ, beside the straight line.

Written as plain YAML (JSON strings are YAML scalars), float32, so no YAML library is needed.
Paths are written as UTF-8 text, as mergekit reads the file (an emoji stays one character, not
the two UTF-16 halves JSON's ASCII escapes would make of it, which YAML reads as two broken
characters); the characters YAML does not allow raw are escaped, and a path mergekit's model
string would split (at ``+``, a LoRA, or ``@``, a revision) is written as a mapping, which it
takes whole. A path that is not valid UTF-8 cannot be written and is refused
(:func:`utf8_path`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from landscape.errors import LandscapeError
from landscape.store.files import replace_file

MERGE_METHODS = ("linear", "slerp", "task_arithmetic", "ties", "dare_ties", "dare_linear",
                 "breadcrumbs", "della")  # fmt: skip


def utf8_path(path: str | os.PathLike, what: str) -> str:
    """``path`` as text, or one line refusing it where its name is not valid UTF-8 (bytes that
    Python carries as lone surrogates): safetensors cannot open such a file, nor can a YAML
    file name it. ``what``: how the line names it (``--out``)."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise LandscapeError(f"{what} {shown}: the name is not valid UTF-8, which safetensors "
                             "and mergekit's YAML need; choose a UTF-8 name") from None  # fmt: skip
    return text


# characters YAML does not take raw in a double-quoted scalar: those PyYAML's reader refuses,
# and the line breaks it would fold into a space (NEL, U+2028, U+2029)
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd"
                            "\U00010000-\U0010ffff]")  # fmt: skip


def _model(path: str | os.PathLike) -> str:
    """A model reference of the YAML: the absolute path, quoted (module docstring)."""
    text = utf8_path(Path(path).resolve(), "the path")
    quoted = json.dumps(text, ensure_ascii=False)
    quoted = _NOT_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)
    # mergekit splits a model string at "+" (a LoRA) and "@" (a revision); a mapping it does not
    return quoted if not set("+@") & set(text) else f"{{model: {{path: {quoted}}}}}"


def mergekit_yaml(a: str | os.PathLike, b: str | os.PathLike, method: str = "linear",
                  weight: float = 0.5, density: float | None = None) -> str:  # fmt: skip
    """The YAML merging A and B at λ = ``weight`` with ``method`` (module docstring);
    ``density``: the fraction of the task vector the sparsifying methods keep (None: mergekit's
    default)."""
    if method not in MERGE_METHODS:
        raise LandscapeError(f"unknown merge method {method!r}; expected one of "
                             f"{', '.join(MERGE_METHODS)}")  # fmt: skip
    if not 0.0 <= weight <= 1.0:
        raise LandscapeError(f"--merge-weight must lie in [0, 1] (λ = 1 is A), got {weight}")
    if density is not None and not 0.0 < density <= 1.0:
        raise LandscapeError(f"--density must lie in (0, 1], got {density}")
    qa, qb = _model(a), _model(b)
    lines = [
        f"# A at λ = {weight:g} (λ = 1 is A), B aligned to A by landscape",
        f"merge_method: {method}",
    ]
    if method == "linear":
        lines += ["models:", f"  - model: {qa}", "    parameters:", f"      weight: {weight!r}",
                  f"  - model: {qb}", "    parameters:",
                  f"      weight: {1.0 - weight!r}"]  # fmt: skip
    elif method == "slerp":
        lines += [f"base_model: {qb}", "models:", f"  - model: {qa}", f"  - model: {qb}",
                  "parameters:", f"  t: {weight!r}"]  # fmt: skip
    else:
        lines += [f"base_model: {qb}", "models:", f"  - model: {qa}", "    parameters:",
                  f"      weight: {weight!r}"]  # fmt: skip
        if density is not None:
            lines.append(f"      density: {density!r}")
        lines += ["parameters:", "  normalize: false"]
    lines += ["dtype: float32", ""]
    return "\n".join(lines)


def write_mergekit_config(
    path: str | os.PathLike,
    a: str | os.PathLike,
    b: str | os.PathLike,
    method: str = "linear",
    weight: float = 0.5,
) -> dict[str, Any]:
    """Write :func:`mergekit_yaml` to ``path`` (a new file) and say how to run it."""
    target = Path(path)
    if target.exists():
        raise LandscapeError(f"{target} exists; choose a new file")
    if not target.parent.is_dir():
        raise LandscapeError(f"{target.parent} does not exist")
    text = mergekit_yaml(a, b, method, weight)
    replace_file(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return {"path": str(target), "method": method, "weight": weight, "a": str(a), "b": str(b),
            "command": f"mergekit-yaml {target} MERGED_DIR"}  # fmt: skip
