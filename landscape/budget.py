"""A memory budget for the parts of a request that grow with its size (docs/design.md §4).

Evaluation itself is bounded whatever the request: the mixtures of a curve or a triangle are
formed a chunk of λ at a time (``barrier.MIX_BUDGET_ELEMENTS`` parameters, or what fits the GPU)
and batches of data are sized to a logit budget. What still grows is what a request asks to
keep: the points of a curve or a triangle grid (their values, the JSON of the result and its
cache entry), the evaluation windows of a text, the encoded text itself, and the metadata
arrays of a GGUF file (its tokens and merges, which readers turn into objects one by one). Each
is checked against the budget **before** any work starts, and refused in one line naming the
limit.

The budget is ``$LANDSCAPE_MEMORY_GB`` gigabytes (default 2). The costs below are measured
peaks per unit (bytes), rounded up about twofold.

**Time** is bounded the same way, by counts of work estimated before any starts: evaluations of
a model on its split (the λ points of a line, the points of a grid, over every pair),
alignments (pairs of a matrix), mergekit runs and training steps. Past a count's limit a request
is refused in one line naming the limit, unless long work was asked for (``--yes`` on the
command line; :func:`long_work` in a library call), since a mistyped count (``--points 2000000``,
``--seeds 0..300``) would otherwise sit at 0% for days. Training steps have a fixed cap
(:data:`MAX_STEPS`) that ``--yes`` does not lift.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Iterator
from pathlib import Path

from landscape.errors import LandscapeError

__all__ = [
    "HESSIAN_ADVICE",
    "MAX_ALIGNMENTS",
    "MAX_EVALUATIONS",
    "MAX_MERGEKIT_RUNS",
    "MAX_STEPS",
    "budget_bytes",
    "check_checkpoints",
    "check_gguf_entries",
    "check_hessian",
    "check_grid_points",
    "check_points",
    "check_resolution",
    "check_snapshots",
    "check_steps",
    "check_text_file",
    "check_windows",
    "check_work",
    "long_work",
    "max_points",
    "max_resolution",
    "max_snapshots",
]

DEFAULT_GB = 2.0
MAX_GB = 2**20  # a pebibyte: past any machine, and its bytes are still an exact integer
# One point of a curve: λ, loss, accuracy as tensors, lists, the result dict, its JSON in the
# cache and on stdout (≈ 510 bytes measured for a 10⁶-point curve).
BYTES_PER_POINT = 1024
# One point of a triangle grid: its three weights as well (≈ 1.2 kB measured, 10⁶ points).
BYTES_PER_GRID_POINT = 2048
# One token of an evaluation window: int64 input and target.
BYTES_PER_WINDOW_TOKEN = 16
# Encoding a text, per byte of the file: with a tokenizer.json the tokenizer's own encoding
# (ids, offsets, token strings) dominates (≈ 170 bytes measured on 10 MB); bytes or characters
# keep the file, its decoded text and one uint8 code per token (≈ 4 bytes).
TEXT_BYTES_TOKENIZER = 256
TEXT_BYTES_CODES = 8
# A character model's text (``data.text_corpus``): the file, its decoded text and its digest's
# UTF-8 copy, plus one compact code per character (≈ 4 bytes per byte measured on 30 MB).
TEXT_BYTES_CHARACTERS = 8
# One entry of a GGUF file's metadata arrays (a token, its type or score, a merge): the views
# transformers' reader builds of it and the tokenizer or model built from them (≈ 1 kB per entry
# measured on 200,000 tokens with their types).
BYTES_PER_GGUF_ENTRY = 2048
# A checkpoint a run keeps (the gauge sweep's recovery grid and trajectory): its float32
# parameters and their copy in a random gauge.
COPIES_PER_CHECKPOINT = 2
# A snapshot of a training run (``landscape spawn``'s parent): its float32 parameters and AdamW's
# two moments, and the serialised copy of all three that its cache entry is written from.
COPIES_PER_SNAPSHOT = 6
# Curvature (``landscape curvature``): ARPACK's Lanczos keeps its basis and three work vectors of
# every parameter in float64; torch keeps about ten copies of the parameters in the working dtype
# (both endpoints, the point on the line, its gradient with the gradient's graph, the vector and
# its product, a probe).
HESSIAN_LANCZOS_EXTRA = 3
HESSIAN_PARAM_COPIES = 10
# The steps of one fine-tuning or training run a sweep asks for. Time, not memory, grows with
# them, so the cap is fixed: over ten times the zoo's longest training (7,500 steps), so that a
# mistyped count (10⁹) is refused instead of sitting at 0% for days.
MAX_STEPS = 100_000


# Work counts past which a request needs --yes (module docstring). An evaluation runs the model
# on its whole split (a zoo model: milliseconds to a second), so 100,000 are minutes to hours;
# an alignment is a matching and a curve (seconds to minutes); a mergekit run is a fresh process
# (20-35 s, mostly its imports), so 200 are one to two hours.
MAX_EVALUATIONS = 100_000
MAX_ALIGNMENTS = 200
MAX_MERGEKIT_RUNS = 200
_LONG_WORK: contextvars.ContextVar[bool] = contextvars.ContextVar("long_work", default=False)


@contextlib.contextmanager
def long_work(allowed: bool = True) -> Iterator[None]:
    """Within this block, work past the time limits (:func:`check_work`) runs instead of being
    refused: what ``--yes`` asks for."""
    token = _LONG_WORK.set(allowed)
    try:
        yield
    finally:
        _LONG_WORK.reset(token)


def check_work(asked: str, count: int, limit: int, each: str) -> None:
    """Refuse ``count`` units of work past ``limit`` unless long work was asked for
    (:func:`long_work`); ``asked`` begins the line (the options and what they ask for),
    ``each`` says what one unit costs."""
    if count > limit and not _LONG_WORK.get():
        raise LandscapeError(f"{asked}; the limit is {limit} without --yes ({each}): give --yes "
                             "to run it")  # fmt: skip


EVALUATION = "each evaluates the model on its whole split"


def budget_bytes() -> int:
    """The memory budget in bytes (``$LANDSCAPE_MEMORY_GB``, default 2 GB)."""
    raw = os.environ.get("LANDSCAPE_MEMORY_GB")
    if raw is None or raw == "":
        return int(DEFAULT_GB * 2**30)
    try:
        gb = float(raw)
    except ValueError:
        gb = math.nan
    if not (math.isfinite(gb) and gb > 0):
        raise LandscapeError(f"LANDSCAPE_MEMORY_GB must be a positive number of GB, got {raw!r}")
    if gb > MAX_GB:
        raise LandscapeError(f"LANDSCAPE_MEMORY_GB must be at most {MAX_GB} GB (more than any "
                             f"machine holds), got {raw!r}")  # fmt: skip
    return int(gb * 2**30)


def _budget_text() -> str:
    return f"memory budget {budget_bytes() / 2**30:g} GB, set by LANDSCAPE_MEMORY_GB"


def max_points() -> int:
    """Most λ points one curve may have within the budget."""
    return budget_bytes() // BYTES_PER_POINT


def check_points(points: int) -> None:
    """Refuse a curve of more points than the budget holds, or than :data:`MAX_EVALUATIONS`
    without long work asked for (one line naming the limit)."""
    limit = max_points()
    if points > limit:
        raise LandscapeError(f"--points {points} exceeds the limit of {limit} ({_budget_text()})")
    check_work(f"--points {points} asks for {points} evaluations of the model per line", points,
               MAX_EVALUATIONS, EVALUATION)  # fmt: skip


def max_resolution() -> int:
    """Largest triangle resolution R whose (R+1)(R+2)/2 grid points fit the budget."""
    points = budget_bytes() // BYTES_PER_GRID_POINT
    r = math.isqrt(2 * points)  # (r+1)(r+2)/2 > r²/2, so this is never too small
    while r > 1 and (r + 1) * (r + 2) // 2 > points:
        r -= 1
    return r


def check_resolution(resolution: int) -> None:
    """Refuse a triangle grid of more points than the budget holds (one line naming the limit)."""
    limit = max_resolution()
    if resolution > limit:
        raise LandscapeError(
            f"--resolution {resolution} exceeds the limit of {limit} ({_budget_text()})"
        )
    points = (resolution + 1) * (resolution + 2) // 2
    check_work(f"--resolution {resolution} asks for {points} evaluations of the model (the "
               "grid's points)", points, MAX_EVALUATIONS, EVALUATION)  # fmt: skip


def check_grid_points(points: int, asked: str) -> None:
    """Refuse a grid of ``points`` points (a surface's) that the budget does not hold; ``asked``
    begins the line: which options asked for how many points."""
    limit = budget_bytes() // BYTES_PER_GRID_POINT
    if points > limit:
        raise LandscapeError(f"{asked}; the limit is {limit} ({_budget_text()})")
    check_work(asked, points, MAX_EVALUATIONS, f"each point {EVALUATION.removeprefix('each ')}")


def check_windows(max_windows: int, n_ctx: int) -> None:
    """Refuse more window tokens (``max_windows × n_ctx``) than the budget holds."""
    limit = budget_bytes() // (BYTES_PER_WINDOW_TOKEN * max(n_ctx, 1))
    if max_windows > limit:
        raise LandscapeError(
            f"--max-windows {max_windows} exceeds the limit of {limit} for --n-ctx {n_ctx} "
            f"({_budget_text()})"
        )


def check_text_file(path: str | os.PathLike, bytes_per_byte: int, how: str) -> None:
    """Refuse a text file whose encoding (``how``) would need more than the budget, before
    reading it: ``bytes_per_byte`` is the peak cost per byte of the file."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError:
        return  # reading it names the problem
    limit = budget_bytes() // bytes_per_byte
    if size > limit:
        raise LandscapeError(
            f"text file {p} is {_size(size)}; encoding it {how} is limited to {_size(limit)} "
            f"({_budget_text()})"
        )


def check_steps(option: str, steps: int) -> None:
    """Refuse a run of more than :data:`MAX_STEPS` steps (one line naming ``option``)."""
    if steps > MAX_STEPS:
        raise LandscapeError(
            f"{option} {steps} exceeds the limit of {MAX_STEPS} steps of one run (over ten "
            "times the longest training of the zoo)"
        )


def max_checkpoints(parameters: int) -> int:
    """How many checkpoints of ``parameters`` float32 parameters (each with its gauged copy) the
    budget holds."""
    return budget_bytes() // (4 * COPIES_PER_CHECKPOINT * max(1, parameters))


def check_checkpoints(what: str, count: int, parameters: int) -> None:
    """Refuse a run that keeps ``count`` checkpoints of ``parameters`` float32 parameters (each
    with its gauged copy) when they exceed the budget; ``what`` names the options asking for
    them."""
    each = 4 * COPIES_PER_CHECKPOINT * max(1, parameters)
    limit = max_checkpoints(parameters)
    if count > limit:
        raise LandscapeError(
            f"{what} keeps {count} checkpoints of {_size(each)} each; the limit is {limit} "
            f"({_budget_text()})"
        )


def max_snapshots(parameters: int) -> int:
    """How many snapshots (parameters and both AdamW moments) of ``parameters`` float32
    parameters the budget holds."""
    return budget_bytes() // (4 * COPIES_PER_SNAPSHOT * max(1, parameters))


def check_snapshots(what: str, count: int, parameters: int, hint: str = "") -> None:
    """Refuse a training run that keeps ``count`` snapshots (parameters and both AdamW moments)
    of ``parameters`` float32 parameters when they exceed the budget; ``what`` names the
    options asking for them, ``hint`` (optional) what would fit."""
    each = 4 * COPIES_PER_SNAPSHOT * max(1, parameters)
    limit = max_snapshots(parameters)
    if count > limit:
        raise LandscapeError(
            f"{what} keeps {count} snapshots (parameters and both AdamW moments, "
            f"{_size(count * each)} in all); the limit is {limit} ({_budget_text()})"
            + (f"; {hint}" if hint else "")
        )


HESSIAN_ADVICE = "fewer --top-k, a smaller model or float32 need less"


def check_hessian(parameters: int, lanczos_vectors: int, itemsize: int, row_bytes: int,
                  rows: int, advice: str = HESSIAN_ADVICE) -> int:  # fmt: skip
    """Rows of a batch whose Hessian-vector products run at once (one chunk) within the budget,
    at most ``rows``: the Lanczos basis (``lanczos_vectors`` float64 vectors of ``parameters``)
    and the parameters' working copies (``itemsize`` bytes each) come first, what is left holds
    the gradient's graph of ``row_bytes`` per row. Refused in one line when not even one row
    fits, ending with ``advice`` (what the command can ask for instead)."""
    fixed = parameters * (8 * (lanczos_vectors + HESSIAN_LANCZOS_EXTRA)
                          + itemsize * HESSIAN_PARAM_COPIES)  # fmt: skip
    left = budget_bytes() - fixed
    if left < row_bytes:
        raise LandscapeError(
            f"the Hessian of {parameters} parameters needs {_size(fixed)} for its Lanczos "
            f"vectors and working copies and {_size(row_bytes)} for one row's gradient graph; "
            f"that exceeds the {_budget_text()} ({advice})"
        )
    return max(1, min(rows, left // row_bytes))


def check_gguf_entries(path: str, field: str, count: int, total: int) -> None:
    """Refuse a GGUF file whose metadata arrays hold more entries than the budget, before they
    are read: ``field`` is the array just found (``count`` entries), ``total`` the entries of
    every array so far, this one included."""
    limit = budget_bytes() // BYTES_PER_GGUF_ENTRY
    if total > limit:
        raise LandscapeError(
            f"{path}: {field} holds {count} entries; a GGUF file's metadata arrays are limited "
            f"to {limit} entries in all ({_budget_text()})"
        )


def _size(n: int) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
