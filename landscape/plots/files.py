"""The figures of command results, written to files: what ``--figure PATH`` draws.

Each command that the app draws has one builder here, which calls the same figure function
as its page (``landscape.plots``) on the command's JSON result, so a figure from the command
line is the figure the page shows. The file's suffix picks the format: ``.html`` (the
interactive figure, plotly.js included, opens offline), ``.png`` and ``.svg`` (the app's
export theme, drawn by a headless browser; :mod:`landscape.plots.export`). A command with
several figures (the gauge sweep: one per part) writes ``PATH`` with the part's name before
the suffix.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from landscape.errors import LandscapeError
from landscape.store.files import replace_file, write_problem

if TYPE_CHECKING:
    import plotly.graph_objects as go

SUFFIXES = (".html", ".png", ".svg")
Builder = Callable[[dict[str, Any]], "dict[str, go.Figure]"]


def check_figure_path(path: str) -> str:
    """``path`` if its suffix is one this module writes and its folder exists, else refused."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise LandscapeError(
            f"--figure {path}: the suffix picks the format; use one of {', '.join(SUFFIXES)}"
        )
    if not p.parent.is_dir():
        raise LandscapeError(f"--figure {path}: the folder {p.parent} does not exist")
    return path


def check_figure_target(target: str | Path, force: bool = False) -> None:
    """Refuse to write a figure over anything at ``target`` unless ``force``; never over a
    folder or a special file. With ``force`` a file is replaced, and a link is replaced by the
    figure (its target is left as it is: a figure is never written through a link)."""
    p = Path(target)
    try:
        st = p.lstat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise LandscapeError(f"--figure {p}: cannot look at it ({write_problem(e)})") from None
    if stat.S_ISLNK(st.st_mode):
        if not force:
            raise LandscapeError(f"--figure {p} is a link to {os.readlink(p)}; give --force to "
                                 "replace the link (its target is left as it is)")  # fmt: skip
        return
    if not stat.S_ISREG(st.st_mode):
        raise LandscapeError(f"--figure {p} exists and is not a file; choose another path")
    if not force:
        raise LandscapeError(f"--figure {p} exists; give --force to replace it")


def _barrier(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.fields import BARRIER, key_of
    from landscape.plots.interpolation import figure_interpolation

    series = [{"label": key_of(BARRIER, result), "results": [result],
               "space": BARRIER.read(result, "space")}]  # fmt: skip
    return {"": figure_interpolation(series, split=BARRIER.read(result, "split") or "test")}


def _triangle(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.triangle import figure_triangles

    return {"": figure_triangles([result])}


def _surface(result: dict[str, Any]) -> dict[str, go.Figure]:
    """The contour map, and the 3-D surface as ``-3d``."""
    from landscape.plots.surface import figure_surface

    return {"": figure_surface(result), "3d": figure_surface(result, view="3d")}


def _eigenangles(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.eigenangles import (
        figure_checkpoint_barriers,
        figure_eigenangles,
        figure_round_barriers,
    )

    out = {"": figure_eigenangles(result)}
    if "iterations" in result:
        out["rounds"] = figure_round_barriers(result["iterations"])
        if result["iterations"].get("checkpoints"):
            out["checkpoints"] = figure_checkpoint_barriers(result["iterations"])
    return out


def _widths(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.interpolation import figure_widths

    return {"": figure_widths(result, split=result.get("split", "test"))}


def _symmetries(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.gauge import figure_symmetry_check

    return {"": figure_symmetry_check(result["rows"])}


def _gauge_sweep(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots import gauge as g

    builders = {
        "table": lambda part: g.figure_symmetry_check(part["rows"]),
        "scramble": g.figure_scramble,
        "recovery": g.figure_recovery,
        "trajectory": g.figure_trajectory,
        "claims": g.figure_claims,
    }
    return {name: build(result[name]) for name, build in builders.items() if name in result}


def _transport(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.gauge import figure_transport

    if "rows" not in result:
        raise LandscapeError("--figure: transport draws its table (without --artifact)")
    return {"": figure_transport(result["rows"])}


def _matrix(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.matrix import figure_barrier_matrix

    return {"": figure_barrier_matrix(result)}


def _merges(result: dict[str, Any]) -> dict[str, go.Figure]:
    """One figure per pair (``-<A>-<B>``), or the one pair's."""
    from landscape.plots.interpolation import figure_merges

    pairs = result["pairs"]
    if len(pairs) == 1:
        return {"": figure_merges(pairs[0])}
    return {f"{p['seeds'][0]}-{p['seeds'][1]}": figure_merges(p) for p in pairs}


def _curve(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.curves import figure_curve

    return {"": figure_curve(result)}


def _spawn(result: dict[str, Any]) -> dict[str, go.Figure]:
    from landscape.plots.curves import figure_spawn

    return {"": figure_spawn(result)}


def _ablation(result: dict[str, Any]) -> dict[str, go.Figure]:
    """The learned/orth barrier per entry, and one figure of curves per entry (``-<model>``)."""
    from landscape.plots.ablation import figure_ablation, figure_ablation_curves

    out = {"": figure_ablation(result)}
    for step in result["steps"]:
        out[step["model"]] = figure_ablation_curves(result, step["model"])
    return out


def _curvature(result: dict[str, Any]) -> dict[str, go.Figure]:
    """Loss, top eigenvalue and trace along λ; with --per-block, each block's as ``-blocks``."""
    from landscape.plots.curvature import figure_curvature, figure_curvature_blocks

    out = {"": figure_curvature(result)}
    if any(line.get("blocks") for line in result["lines"]):
        out["blocks"] = figure_curvature_blocks(result)
    return out


BUILDERS: dict[str, Builder] = {
    "barrier": _barrier,
    "triangle": _triangle,
    "surface": _surface,
    "eigenangles": _eigenangles,
    "widths": _widths,
    "symmetries": _symmetries,
    "gauge-sweep": _gauge_sweep,
    "transport": _transport,
    "matrix": _matrix,
    "merges": _merges,
    "curve": _curve,
    "spawn": _spawn,
    "ablation": _ablation,
    "curvature": _curvature,
}


def write_figures(command: str, result: dict[str, Any], path: str, size: str = "double",
                  force: bool = False) -> list[str]:  # fmt: skip
    """Draw ``command``'s ``result`` as its page does and write it to ``path`` (one file per
    figure; a named figure goes to ``<stem>-<name><suffix>``). PNG and SVG are drawn at the
    preset ``size`` (:data:`landscape.plots.export.SIZES`); HTML stays the screen figure.
    Every path is checked before any is written: one that exists is refused unless ``force``
    (:func:`check_figure_target`). Returns the paths written."""
    from landscape.plots import export

    p = Path(check_figure_path(path))
    export.size_preset(size)  # an unknown size fails before anything is drawn
    figures = {(p if not name else p.with_name(f"{p.stem}-{name}{p.suffix}")): fig
               for name, fig in BUILDERS[command](result).items()}  # fmt: skip
    for target in figures:
        check_figure_target(target, force)
    written = []
    for target, fig in figures.items():
        suffix = p.suffix.lower()
        if suffix == ".html":
            data = fig.to_html(include_plotlyjs=True, full_html=True).encode()
        else:
            try:
                data = export.to_png(fig, size) if suffix == ".png" else export.to_svg(fig, size)
            except Exception as e:  # kaleido or its browser missing: one line, what to do
                raise LandscapeError(
                    f"--figure {target}: drawing {suffix[1:].upper()} needs kaleido and a "
                    f"Chromium browser ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
                    "an .html figure needs neither"
                ) from None
        _write(target, data)
        written.append(str(target))
    return written


def _write(target: Path, data: bytes) -> None:
    """Whole or not at all (``store.files.replace_file``): a full disk leaves no half-written
    figure under ``target``, and a file of the user's beside it is never touched."""
    try:
        replace_file(target, lambda tmp: tmp.write_bytes(data))
    except OSError as e:
        raise LandscapeError(f"--figure {target}: cannot write it ({write_problem(e)})") from None
