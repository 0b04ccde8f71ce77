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

mergekit merges the tensors its architecture definition for the model names, and nothing else:
a tensor of the file the definition lacks is left out of the merge without a word (mergekit's
Llama and Gemma definitions have no attention or MLP biases, Gemma's no separate head), and a
tensor the definition requires that the file lacks fails the merge.
:func:`check_mergekit_covers` compares the two before anything is aligned or written, and
refuses the pair in one line where they differ.

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
from collections.abc import Collection
from pathlib import Path
from typing import Any

from landscape.errors import LandscapeError
from landscape.store.files import read_json, replace_file

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


def stored_tensor_names(directory: str | os.PathLike) -> list[str]:
    """The tensor names a Hugging Face directory stores (its safetensors index, or its one
    ``model.safetensors``), read from the headers only."""
    from safetensors import safe_open

    d = Path(directory)
    if (d / "model.safetensors.index.json").is_file():
        return list(read_json(d / "model.safetensors.index.json").get("weight_map", {}))
    with safe_open(str(d / "model.safetensors"), "pt") as f:
        return list(f.keys())


def mergekit_gap(config: dict[str, Any], names: Collection[str]) -> str | None:
    """Why mergekit cannot merge a Hugging Face checkpoint with ``config`` (its config.json)
    and tensors ``names``: its architecture definition for the model leaves one of them out,
    or requires one the file lacks (module docstring); None when it holds exactly these.
    Needs mergekit; the definition is found as mergekit finds it."""
    import importlib.metadata

    import transformers
    from mergekit.architecture import arch_info_for_config

    version = importlib.metadata.version("mergekit")
    model_type = config.get("model_type")
    archs = config.get("architectures") or []
    try:
        hf = transformers.CONFIG_MAPPING[model_type].from_dict(config)
        info = arch_info_for_config(hf) if len(archs) == 1 else None
    except Exception:  # a config mergekit cannot read either; said below
        info = None
    if info is None:
        return (f"mergekit {version} has no architecture definition for {model_type} "
                f"{'/'.join(archs) or '(no architectures)'}")  # fmt: skip
    what = f"mergekit {version}'s {archs[0]} definition"
    weights = info.all_weights(hf)
    known = {n for w in weights for n in (w.name, *(w.aliases or ()))}
    left_out = sorted(set(names) - known)
    if left_out:
        more = f" and {len(left_out) - 1} more" if len(left_out) > 1 else ""
        return (f"{what} has no {left_out[0]}{more} of this {model_type} model's tensors: its "
                "merge would leave them out and still report success")  # fmt: skip
    have = set(names)
    for w in weights:
        if not w.optional and not have & {w.name, *(w.aliases or ()), *(w.tied_names or ())}:
            return f"{what} requires {w.name}, a tensor this {model_type} model does not have"
    return None


def check_mergekit_covers(config: dict[str, Any], names: Collection[str]) -> list[str]:
    """One line refusing a checkpoint mergekit cannot merge whole (:func:`mergekit_gap`); where
    mergekit is not installed nothing can be checked, and the warning saying so is returned."""
    try:
        gap = mergekit_gap(config, names)
    except ImportError:
        return ["mergekit is not installed here, so whether its architecture definition holds "
                "every tensor of the written model was not checked"]  # fmt: skip
    if gap is not None:
        raise LandscapeError(f"{gap}; mergekit cannot merge this pair")
    return []
