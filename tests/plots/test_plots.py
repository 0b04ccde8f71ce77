"""Figure builders draw what they are given, read every result field loudly, and exports are
real PNG/SVG files.

The results fed to the builders are small synthetic dicts in the experiments layer's format (and,
for the gauge page, the real producers run on a tiny untrained model), so these tests need no
training; the kaleido exports start a headless browser (slow).
"""

from __future__ import annotations

import json
import math
import struct

import plotly.graph_objects as go
import pytest
import torch

from landscape import data, plots
from landscape.experiments import transport
from landscape.experiments.basins import barrier_from_curve, barycentric_grid, triangle_from_values
from landscape.experiments.gauge import parts as gauge
from landscape.models import forward, init_params
from landscape.plots import export, fields, tidy
from landscape.plots.eigenangles import (
    RETURNED,
    figure_checkpoint_barriers,
    figure_round_barriers,
)
from landscape.plots.fields import MissingField
from landscape.plots.interpolation import above_naive
from landscape.plots.matrix import figure_barrier_matrix
from landscape.plots.theme import method_style
from landscape.sources import split_sampler
from landscape.symmetry import symmetry_table
from landscape.tasks import Task
from tests.conftest import tiny_config, tiny_inputs
from tests.plots.test_surface_plots import plane_result


def _curve(height: float) -> dict:
    lam = [i / 10 for i in range(11)]
    loss = [0.1 + height * 4 * x * (1 - x) for x in lam]
    acc = [0.95 - height * 0.2 * 4 * x * (1 - x) for x in lam]
    return barrier_from_curve(lam, loss, acc).to_dict()


def _triangle(method: str, bump: float) -> dict:
    pts = barycentric_grid(4)
    loss = [0.1 + bump * (1 - max(p)) for p in pts.tolist()]
    acc = [0.9 - 0.1 * v for v in loss]
    r = triangle_from_values(pts, loss, acc, 4).to_dict()
    return {**r, "method": method, "group": "perm", "seeds": [0, 1, 2], "split": "test"}


EIGEN = {
    "angles_wm": [math.pi * (i / 16 - 1) for i in range(32)],
    "angles_correction": [0.05 * (i - 16) for i in range(32)],
    "angles_haar": [math.pi * (i / 16 - 1) + 0.01 for i in range(32)],
}
ITERATIONS = {
    "split": "test",
    "space": "weights",
    "rounds": [{"group": g, "round": r, "barrier_loss": h / (r + 1), "barrier_accuracy": h / 9}
               for g, h in (("perm", 2.0), ("orth", 1.0)) for r in range(4)],
    "checkpoints": [{"init": i, "step": s, "barrier_loss": h / (s + 1), "barrier_accuracy": 0.1}
                    for i, h in (("identity", 3.0), ("weight", 1.0)) for s in (0, 10, 20)],
}  # fmt: skip
ATLAS = {
    "seeds": [0, 1],
    "reference": 0,
    "projection": "pca",
    "explained_raw": [0.5, 0.2],
    "explained_aligned": [0.9, 0.1],
    "orbit_ratio_raw": 1.0,
    "orbit_ratio_aligned": 0.0,
    "points": [
        {
            "seed": s,
            "kind": k,
            "copy": c,
            "raw": [s + c, c],
            "aligned": [s, 0.0],
            "distance_raw": float(c),
            "distance_aligned": 0.0,
            "on_seed_raw": False,
            "on_seed_aligned": k != "seed",
        }
        for s in (0, 1)
        for k, c in (("seed", 0), ("gauge copy", 1), ("gauge copy", 2))
    ],
}
TRAINING = [
    {
        "label": f"seed {s}",
        "curves": {
            "step": [0, 10, 20],
            "train_loss": [2.0, 1.0 - 0.1 * s, 0.5],
            "test_loss": [2.1, 1.1, 0.6 + 0.1 * s],
            "test_accuracy": [0.1, 0.7, 0.9 - 0.01 * s],
        },
    }
    for s in (0, 1)
]
ZOO = [{"name": "mlp-digits", "seeds": [{"seed": 0, "test_accuracy": 0.98},
                                        {"seed": 1, "test_accuracy": 0.97}]}]  # fmt: skip

_GROUPS = (("perm", "S_d"), ("signed-perm", "B_d"), ("orth", "O(d)"))
SYMMETRY_ROWS = [
    {
        "group": "perm",
        "acts_on": "resid S_d",
        "valid": True,
        "max_abs_dlogits": 3e-15,
        "needs": "",
        "note": "exact",
    },
    {
        "group": "orth",
        "acts_on": "resid O(d)",
        "valid": False,
        "max_abs_dlogits": 0.5,
        "needs": "fold_norm_gains",
        "note": "gains",
    },
    {
        "group": "orth after fold_norm_gains",
        "acts_on": "resid O(d)",
        "valid": True,
        "max_abs_dlogits": 0.0,
        "needs": "",
        "note": "folded",
    },
]
SCRAMBLE = {
    "summary": [
        {
            "group": g,
            "label": lab,
            "naive": 0.9,
            "matched_perm": 1e-8 if i == 0 else 0.1,
            "matched_signed-perm": 1e-8 if i < 2 else 0.05,
            "matched_orth": 0.0,
            "max_abs_dlogits": 1e-15,
        }
        for i, (g, lab) in enumerate(_GROUPS)
    ]
}
RECOVERY = {
    "curve": [
        {
            "steps": k,
            "drift": 0.01 * k,
            "flipped": 0.5,
            **{
                f"{s}_{m}_{q}": (1.0 if m == "marginalised" else 0.5) - 0.001 * k
                for s in ("activations", "weights")
                for m in ("signed", "marginalised")
                for q in ("perm", "sign", "coord")
            },
        }
        for k in (0, 10, 30, 100)
    ]
}
TRAJECTORY = {
    "rows": [
        {
            "source": s,
            "steps": t,
            "drift": t / 100,
            "local_coord": 1 - t / 400,
            "endpoint_coord": 1 - t / 150,
        }
        for s in ("weights", "activations")
        for t in (10, 20, 30, 40)
    ]
}
CLAIMS = {
    "k": 4,
    "chance": 0.125,
    "summary": [
        {
            "group": g,
            "label": lab,
            "raw": 0.1,
            "transported": 1.0,
            "perm_only": None if g == "orth" else 0.3,
        }
        for g, lab in _GROUPS
    ],
}
TRANSPORT = [
    {
        "artifact": a,
        "mode": m,
        "metric": "x",
        "value": 1.0,
        "reference": 1.0,
        "kept": None if a == "adamw" else v,
    }
    for a in ("steering", "sae", "adamw")
    for m, v in (("exact", 100.0), ("perm-only", 1800.0), ("none", -3.0))
]

WIDTHS = {
    "d_model": 64,
    "rows": [{"width": w, "method": m, "barrier_loss": b, "barrier_accuracy": b / 4}
             for w in (32, 16, 8) for m, b in (("naive", 2.0), ("weight", 1.0 + w / 64))],
}  # fmt: skip

MATRIX = {
    "model": "mlp-digits", "seeds": [0, 1], "method": "weight", "group": "perm",
    "space": "weights", "split": "test",
    "barrier_loss": [[0.0, 0.5], [0.5, 0.0]], "barrier_accuracy": [[0.0, 0.1], [0.1, 0.0]],
}  # fmt: skip
BUILDERS = {
    "symmetry_levels": lambda: plots.figure_symmetry_levels(),
    "barrier_matrix": lambda: figure_barrier_matrix(MATRIX),
    "interpolation": lambda: plots.figure_interpolation(
        [{"label": "naive", "results": [_curve(1.0), _curve(1.2)]},
         {"label": "weight/orth", "results": [_curve(0.05)]},
         {"label": "weight matching", "results": [{**_curve(0.1), "method": "weight",
                                                   "group": "perm", "seeds": [0, 1]}]}]),
    "widths": lambda: plots.figure_widths(WIDTHS),
    "triangles": lambda: plots.figure_triangles([_triangle("naive", 1.0),
                                                 _triangle("weight", 0.01)]),
    "eigenangles": lambda: plots.figure_eigenangles(EIGEN),
    "objective": lambda: plots.figure_objective([10.0, 6.0, 5.5, 5.5]),
    "lm_curve": lambda: plots.figure_lm_curve([{"step": i, "loss": 1 / (i + 1)}
                                               for i in range(40)]),
    "round_barriers": lambda: figure_round_barriers(ITERATIONS),
    "checkpoint_barriers": lambda: figure_checkpoint_barriers(ITERATIONS),
    "atlas": lambda: plots.figure_atlas(ATLAS),
    "zoo_overview": lambda: plots.figure_zoo_overview(ZOO),
    "training_curves": lambda: plots.figure_training_curves(TRAINING),
    "symmetry_check": lambda: plots.figure_symmetry_check(SYMMETRY_ROWS),
    "scramble": lambda: plots.figure_scramble(SCRAMBLE),
    "recovery": lambda: plots.figure_recovery(RECOVERY),
    "trajectory": lambda: plots.figure_trajectory(TRAJECTORY),
    "claims": lambda: plots.figure_claims(CLAIMS),
    "transport": lambda: plots.figure_transport(TRANSPORT),
    "surface": lambda: plots.figure_surface(plane_result()),
    "surface_3d": lambda: plots.figure_surface(plane_result(), view="3d"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(BUILDERS))
def test_builder_draws_and_exports_csv(name):
    fig = BUILDERS[name]()
    assert isinstance(fig, go.Figure)
    if name != "symmetry_levels":  # a schematic of shapes and text, no data traces
        frame = export.figure_frame(fig)
        assert len(frame) > 0
        csv = export.to_csv(fig).decode()
        assert csv.startswith("trace,point,")
    presented = BUILDERS[name]()
    assert presented.layout.font.size >= 14


def test_interpolation_marks_endpoints_and_band():
    fig = BUILDERS["interpolation"]()
    names = [t.name for t in fig.data]
    assert "naive range" in names  # two pairs: a band
    assert "weight/orth range" not in names  # one pair: no band
    ends = [t for t in fig.data if t.name == "naive endpoints"]
    assert list(ends[0].x) == [1.0, 0.0]
    assert fig.layout.yaxis.title.text.startswith("test")


def test_triangles_share_one_colour_scale():
    fig = BUILDERS["triangles"]()
    assert {t.marker.coloraxis for t in fig.data} == {"coloraxis"}
    assert fig.layout.coloraxis.cmin < fig.layout.coloraxis.cmax
    assert "w_A" in fig.data[0].hovertemplate


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUILDERS))
def test_export_png_and_svg(name):
    fig = BUILDERS[name]()
    w, h = _png_size(export.to_png(fig, scale=1))
    assert (w, h) == (export.PAPER_WIDTH, export.PAPER_HEIGHT)  # the default size, double
    svg = export.to_svg(fig)
    head = svg[:400].decode(errors="replace")
    assert "<svg" in head
    assert len(svg) > 5_000
    assert svg.rstrip().endswith(b"</svg>")


def test_gauge_figures_use_log_axes_and_mark_references():
    scramble = BUILDERS["scramble"]()
    assert scramble.layout.yaxis.type == "log"
    assert min(y for t in scramble.data for y in t.y) > 0  # a barrier of 0 is drawn at a floor
    check = BUILDERS["symmetry_check"]()
    assert check.layout.xaxis.type == "log"
    # valid and invalid coloured apart, each named in the legend, and the tolerance named too
    bars = [t for t in check.data if t.type == "bar"]
    assert len({t.marker.color for t in bars}) == 2
    assert all(t.showlegend is not False and t.name for t in check.data)
    assert [t.name for t in check.data if t.type != "bar"] == ["tolerance 1e-09"]
    claims = BUILDERS["claims"]()
    assert any(s.y0 == 0.125 for s in claims.layout.shapes)  # the chance level, drawn
    assert claims.data[-1].name.startswith("chance")  # and named in the legend
    transport = BUILDERS["transport"]()
    names = ["exact B_d", "permutation only", "none", "100% = as on A"]
    assert [t.name for t in transport.data] == names
    assert list(transport.data[0].x) == ["steering", "sae"]  # AdamW has no % kept
    assert max(transport.data[1].y) == 200.0  # cut at the cap, labelled with the true value
    assert transport.data[1].text[1] == "18×"  # 1800% of A


# ---------------------------------------------------------------- result fields


def _rename(record: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in record.items()}


def _rename_rows(rows: list, old: str, new: str) -> list:
    return [_rename(r, old, new) for r in rows]


# Per builder: its input with one field renamed, and the (kind, field) the error must name.
RENAMED = {
    "interpolation": (
        lambda: plots.figure_interpolation(
            [{"label": "naive", "results": [_rename(_curve(1.0), "lambdas", "lam")]}]
        ),
        "barrier result", "lambdas",
    ),
    "triangles": (
        lambda: plots.figure_triangles([_rename(_triangle("naive", 1.0), "basin_fraction", "b")]),
        "triangle result", "basin_fraction",
    ),
    "eigenangles": (
        lambda: plots.figure_eigenangles(_rename(EIGEN, "angles_wm", "angles_weight")),
        "eigenangle result", "angles_wm",
    ),
    "lm_curve": (
        lambda: plots.figure_lm_curve([{"step": 0, "merged_loss": 1.0}]),
        "learned-matching step", "loss",
    ),
    "atlas": (
        lambda: plots.figure_atlas(_rename(ATLAS, "orbit_ratio_raw", "orbit_raw")),
        "atlas result", "orbit_ratio_raw",
    ),
    "zoo_overview": (
        lambda: plots.figure_zoo_overview(
            [{"name": "m", "seeds": [{"seed": 0, "accuracy": 0.9}]}]
        ),
        "zoo seed", "test_accuracy",
    ),
    "training_curves": (
        lambda: plots.figure_training_curves(
            [{**TRAINING[0], "curves": _rename(TRAINING[0]["curves"], "step", "steps")}]
        ),
        "training curves", "step",
    ),
    "symmetry_check": (
        lambda: plots.figure_symmetry_check(
            _rename_rows(SYMMETRY_ROWS, "max_abs_dlogits", "max_dlogits")
        ),
        "symmetry table row", "max_abs_dlogits",
    ),
    "scramble": (
        lambda: plots.figure_scramble(
            {"summary": _rename_rows(SCRAMBLE["summary"], "matched_orth", "matched_O(d)")}
        ),
        "scramble summary row", "matched_orth",
    ),
    "recovery": (
        lambda: plots.figure_recovery(
            {"curve": _rename_rows(RECOVERY["curve"], "weights_signed_coord", "weights_coord")}
        ),
        "recovery curve point", "weights_signed_coord",
    ),
    "trajectory": (
        lambda: plots.figure_trajectory(
            {"rows": _rename_rows(TRAJECTORY["rows"], "endpoint_coord", "direct_coord")}
        ),
        "trajectory row", "endpoint_coord",
    ),
    "claims": (
        lambda: plots.figure_claims(
            {**CLAIMS, "summary": _rename_rows(CLAIMS["summary"], "perm_only", "permutation")}
        ),
        "claim-check summary row", "perm_only",
    ),
    "transport": (
        lambda: plots.figure_transport(_rename_rows(TRANSPORT, "kept", "kept_percent")),
        "transport row", "kept",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(RENAMED))
def test_a_renamed_field_fails_naming_the_field(name):
    build, kind, field = RENAMED[name]
    with pytest.raises(KeyError) as err:
        build()
    assert isinstance(err.value, MissingField)
    assert str(err.value).startswith(f"{kind} has no field {field!r}")


def test_absent_optional_fields_read_as_their_defaults():
    eigen = plots.figure_eigenangles({k: v for k, v in EIGEN.items() if k != "angles_correction"})
    # a result from before the averaged reference (no haar_draws) says its Haar line is one draw
    assert [t.name for t in eigen.data] == ["O_WM (weight matching)",
                                            "Haar-random O(d): one draw"]  # fmt: skip
    bare = {k: v for k, v in _triangle("w", 0.3).items() if k not in ("seeds", "split")}
    tri = plots.figure_triangles([bare])
    assert tri.layout.ternary.aaxis.title.text == "A (seed A)"
    assert tri.layout.coloraxis.colorbar.title.text == "test loss (nats)"


def test_a_field_a_kind_does_not_declare_is_refused():
    with pytest.raises(MissingField, match="declares no such field"):
        fields.SCRAMBLE_SUMMARY.read({"matched_other": 0.0}, "matched_other")


def test_every_declared_field_is_read_by_a_figure(monkeypatch):
    """The declarations kept in plots/fields.py are exactly what the figures read: none stale,
    none missing."""
    read: set[tuple[str, str]] = set()
    original = fields.Fields.read

    def spy(self, record, name):
        read.add((self.kind, name))
        return original(self, record, name)

    monkeypatch.setattr(fields.Fields, "read", spy)
    for build in BUILDERS.values():
        build()
    for metric in ("train_loss", "test_loss"):
        plots.figure_training_curves(TRAINING, metric=metric)
    plots.figure_triangles([_triangle("naive", 1.0)], metric="accuracy")
    above_naive(
        [
            {"label": "naive", "results": [_curve(1.0)]},
            {"label": "weight/orth", "results": [_curve(2.0)]},
        ]
    )  # the page's note
    # the tidy tables (the figures' CSVs) read the pair and its settings from a curve
    tidy.tidy_interpolation([{"label": "naive", "results": [_curve(1.0)]}])
    tidy.tidy_triangles([_triangle("naive", 1.0)])
    tidy.tidy_surface(plane_result())
    plots.figure_surface({**plane_result(), "kind": "directions", "directions_seed": 1})
    plots.figure_surface({**plane_result(), "kind": "directions", "directions": "trajectory",
                          "trajectory": {"explained": [0.8, 0.15]}, "trajectories": [
                              {"seed": 0, "steps": [0, 10], "x": [1.0, 0.0], "y": [0.2, 0.0],
                               "errors": [0.1, 0.0], "error": 0.1, "end_gap": 0.05}]})  # fmt: skip
    declared = {(f.kind, n) for f in fields.ALL for n in (*f.required, *f.optional)}
    # a kind declared beside its producer (the barrier result, the triangle, the surface, the
    # atlas) names every field the producer writes, whether a figure reads it or not: its test
    # holds it to the producer's records
    here = {f.kind for f in fields.ALL}
    assert declared == {(kind, n) for kind, n in read if kind in here}
    assert ("barrier result", "lambdas") in read  # read through the producer's declaration


def _tiny_task():
    """A tiny untrained MLP with its own argmax labels as data: enough to produce every gauge
    result in the shape the sweep writes (the numbers do not matter here)."""
    cfg = tiny_config("mlp").replace(d_model=16, d_norm=0)
    params = init_params(cfg, 0)
    x = tiny_inputs(cfg, batch=128, seed=1)
    with torch.no_grad():
        y = forward(cfg, params, x).argmax(-1)
    split = data.Split(x, y)
    return Task("tiny-mlp", 0, cfg, params, split_sampler(split), x[:64], y[:64],
                data.Split(x[64:], y[64:]), lr=3e-3, batch_size=32)  # fmt: skip


def test_gauge_figures_read_what_the_sweep_writes():
    """Each gauge figure drawn from the real producers' output (through JSON, as the cache
    serves it): a field renamed in the experiments fails here, not as a blank page."""
    task = _tiny_task()
    parts = {
        "table": symmetry_table(task.cfg, task.params),
        "scramble": gauge.scramble_test(task, draws=1, lambdas=3),
        "recovery": gauge.recovery_under_drift(task, steps_grid=(0, 2), draws=1),
        "trajectory": gauge.trajectory_transport(task, steps=4, every=2),
        "claims": gauge.claim_check(task, draws=1, k=2, classes=[0, 1]),
        "transport": transport.transport_rows(task, adamw_before=2, adamw_after=2),
    }
    parts = json.loads(json.dumps(parts))
    figures = [
        plots.figure_symmetry_check(parts["table"]),
        plots.figure_scramble(parts["scramble"]),
        plots.figure_recovery(parts["recovery"]),
        plots.figure_trajectory(parts["trajectory"]),
        plots.figure_claims(parts["claims"]),
        plots.figure_transport(parts["transport"]),
    ]
    assert all(len(export.figure_frame(fig)) > 0 for fig in figures)


def test_interpolation_draws_both_spaces_in_the_method_style_weights_thick_circuits_thin():
    fig = plots.figure_interpolation(
        [{"label": "weight/orth · weights", "results": [_curve(0.5)], "method": "weight/orth",
          "space": "weights"},
         {"label": "weight/orth · circuits", "results": [_curve(0.1)], "space": "circuits",
          "method": "weight/orth"},
         {"label": "weight/perm · weights", "results": [_curve(0.3)], "space": "weights",
          "method": "weight/perm"},
         {"label": "naive · circuits", "results": [_curve(0.9)], "space": "circuits",
          "method": "naive"}])  # fmt: skip
    lines = [
        t for t in fig.data if t.mode == "lines+markers" and t.xaxis == "x" and t.x[0] is not None
    ]
    # the method keeps its dash (perm and orth of one method stay apart), as the page's help says
    dashes = [method_style(k).dash for k in ("weight/orth", "weight/orth", "weight/perm", "naive")]
    assert [t.line.dash for t in lines] == dashes and dashes[0] != dashes[2]
    assert lines[0].line.color == lines[1].line.color != lines[3].line.color
    assert lines[1].marker.symbol == lines[0].marker.symbol + "-open"
    assert lines[0].line.width > lines[1].line.width and lines[1].opacity < lines[0].opacity
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == ["weight/orth", "weight/perm", "naive", "weights", "circuits"]
    key = {t.name: (t.line.width, t.marker.symbol) for t in fig.data
           if t.name in ("weights", "circuits")}  # fmt: skip
    assert key == {"weights": (lines[0].line.width, "circle"),
                   "circuits": (lines[1].line.width, "circle-open")}  # fmt: skip


def test_every_accuracy_on_screen_is_in_percent():
    fig = plots.figure_interpolation([{"label": "naive", "results": [_curve(0.5)]}])
    acc = next(t for t in fig.data if t.mode == "lines+markers" and t.xaxis == "x2")
    assert acc.y[0] == pytest.approx(95.0) and "%" in fig.layout.yaxis2.title.text
    tri = plots.figure_triangles([_triangle("naive", 0.5)], metric="accuracy")
    assert min(tri.data[0].marker.color) > 1 and "%" in tri.layout.coloraxis.colorbar.title.text
    zoo = plots.figure_zoo_overview(ZOO)
    assert min(min(t.x) for t in zoo.data) > 1 and "%" in zoo.layout.xaxis.title.text
    curves = plots.figure_training_curves(TRAINING, metric="test_accuracy")
    assert max(max(t.y) for t in curves.data) > 1 and "%" in curves.layout.yaxis.title.text


def test_one_space_keeps_the_method_dashes_and_the_endpoints_their_series_marker():
    fig = plots.figure_interpolation(
        [{"label": "weight/perm", "results": [_curve(0.5)], "method": "weight/perm"},
         {"label": "weight/orth", "results": [_curve(0.1)], "method": "weight/orth"}])  # fmt: skip
    lines = {t.name: t for t in fig.data if t.mode == "lines+markers" and t.xaxis == "x"}
    assert lines["weight/perm"].line.dash != lines["weight/orth"].line.dash
    for name, line in lines.items():
        ends = next(t for t in fig.data if t.name == f"{name} endpoints")
        assert ends.marker.symbol == line.marker.symbol  # no circle/square of their own


def test_iteration_figures_draw_one_line_per_series_in_both_panels():
    rounds = BUILDERS["round_barriers"]()
    legend = [t.name for t in rounds.data if t.showlegend]
    assert legend == ["permutations (perm)", "rotations (orth)"]
    assert len(rounds.data) == 4  # loss and accuracy panels
    orth_loss = next(t for t in rounds.data if t.name == "rotations (orth)" and t.xaxis == "x")
    assert list(orth_loss.x) == [0, 1, 2, 3] and orth_loss.y[0] == 1.0
    assert rounds.layout.yaxis.title.text == "test loss barrier (nats)"
    learned = BUILDERS["checkpoint_barriers"]()
    assert [t.name for t in learned.data if t.showlegend] == ["from the identity",
                                                              "from weight matching"]  # fmt: skip
    circuits = figure_checkpoint_barriers({**ITERATIONS, "space": "circuits"})
    assert circuits.layout.yaxis2.title.text == "test accuracy barrier (points, circuits space)"
    # the checkpoint each start returns is ringed, in both panels, with one legend entry
    chosen = [{**r, "selected": r["step"] == (20 if r["init"] == "identity" else 10)}
              for r in ITERATIONS["checkpoints"]]  # fmt: skip
    ringed = figure_checkpoint_barriers({**ITERATIONS, "checkpoints": chosen})
    rings = [t for t in ringed.data if t.name == RETURNED]
    assert len(rings) == 4 and sum(t.showlegend for t in rings) == 1
    assert [(t.x[0], t.y[0]) for t in rings if t.xaxis == "x"] == [(20, 3.0 / 21), (10, 1.0 / 11)]
    assert not any(t.name == RETURNED for t in learned.data)  # nothing said, nothing ringed
    with pytest.raises(MissingField, match="learned-matching checkpoint has no field 'init'"):
        figure_checkpoint_barriers({**ITERATIONS, "checkpoints": _rename_rows(
            ITERATIONS["checkpoints"], "init", "start")})  # fmt: skip


def test_widths_figure_draws_one_line_per_method_against_width() -> None:
    fig = plots.figure_widths(WIDTHS)
    lines = [t for t in fig.data if t.showlegend]
    assert [t.name for t in lines] == ["naive", "weight"]
    assert list(lines[1].x) == [8, 16, 32] and lines[1].y[-1] == 1.5
    assert fig.layout.xaxis.type == "log" and 64 in fig.layout.xaxis.tickvals


def test_the_objective_axis_ticks_a_few_rounds_not_every_integer():
    from landscape.plots.eigenangles import figure_objective

    fig = figure_objective([float(100 - i) for i in range(54)])
    ticks = range(int(fig.layout.xaxis.tick0 or 0), 54, int(fig.layout.xaxis.dtick))
    assert 3 <= len(ticks) <= 11
    assert figure_objective([3.0, 2.0, 1.0]).layout.xaxis.dtick == 1  # a short run: every round


def test_accuracy_barriers_are_drawn_in_percentage_points():
    matrix = figure_barrier_matrix(
        {"model": "m", "seeds": [0, 1], "method": "weight", "group": "perm", "space": "weights",
         "split": "test", "barrier_loss": [[0, 0.5], [0.5, 0]],
         "barrier_accuracy": [[0, 0.256], [0.256, 0]]})  # fmt: skip
    acc = next(t for t in matrix.data if "accuracy" in t.name)
    assert acc.z[0][1] == pytest.approx(25.6) and acc.text[0][1] == "25.6"
    assert "points" in acc.name


def test_the_missing_permutation_only_bar_of_a_rotation_says_why():
    fig = plots.figure_claims(CLAIMS)
    perm_only = next(t for t in fig.data if t.name == "transported, permutation only")
    at = [i for i, s in enumerate(CLAIMS["summary"]) if s["perm_only"] is None]
    assert at and all(perm_only.text[i] == "n/a" for i in at)  # its place is labelled
    assert "n/a: a rotation has no permutation part" in fig.layout.xaxis.title.text
    full = {**CLAIMS, "summary": [{**s, "perm_only": 0.3} for s in CLAIMS["summary"]]}
    assert "n/a" not in plots.figure_claims(full).layout.xaxis.title.text  # no note


@pytest.mark.parametrize("n", [1, 2, 3])
def test_triangles_tile_their_panels_and_keep_titles_off_the_corner_labels(n):
    from landscape.plots.triangle import CORNER_ROOM, HEXAGON, TRIANGLE_SIDE

    fig = plots.figure_triangles([_triangle("naive", 0.5 * (i + 1)) for i in range(n)])
    side = TRIANGLE_SIDE[n]
    plot_w = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r
    domains = [fig.layout["ternary" if i == 0 else f"ternary{i + 1}"].domain for i in range(n)]
    for d in domains:
        assert (d.x[1] - d.x[0]) * plot_w == pytest.approx(side)  # the triangle, no more
        assert d.y[1] < 1  # room above the apex for the A label, under the title
    for left, right in zip(domains, domains[1:], strict=False):
        assert (right.x[0] - left.x[1]) * plot_w == pytest.approx(CORNER_ROOM)  # B, C labels
    hexagons = [t for t in fig.data if getattr(t.marker, "symbol", None) == "hexagon"]
    assert all(t.marker.size == pytest.approx(HEXAGON * side / 4) for t in hexagons)  # tiles
    titles = fig.layout.annotations[:n]
    assert all(a.yanchor == "bottom" and a.y == 1 for a in titles)  # above the plot area


def test_lambda_is_described_one_way_on_every_figure():
    """Every λ axis reads the same (two figures described λ in two notations)."""
    from landscape.plots.theme import LAMBDA_TITLE

    titles = set()
    for build in BUILDERS.values():
        layout = build().layout
        for key in layout:
            if key.startswith("xaxis") and layout[key].title.text:
                titles.add(layout[key].title.text)
    assert {t for t in titles if t.startswith("λ")} == {LAMBDA_TITLE}


def test_accuracy_reads_in_percent_and_its_barrier_in_points_on_every_axis():
    """One unit per quantity: an accuracy axis in %, an accuracy barrier's in points (one axis
    said percentage points and another % for the same barrier)."""
    from landscape.plots.curves import figure_spawn
    from landscape.plots.interpolation import figure_merges

    curve = {"loss": [0.1, 0.3, 0.1], "accuracy": [0.9, 0.7, 0.9]}
    merges = {
        "lambdas": [0.0, 0.5, 1.0],
        "alignments": [
            {"method": "naive", "group": "", "line": curve, "operators": {"linear": curve}}
        ],
    }
    rows = [
        {"step": 10, "method": m, "group": "perm", "barrier_loss": 0.2, "barrier_accuracy": 0.05}
        for m in ("naive", "weight")
    ]
    builders = {
        **BUILDERS,
        "merges": lambda: figure_merges(merges),
        "spawn": lambda: figure_spawn({"rows": rows, "steps": 100, "children": 2}),
    }
    said = []
    for name, build in builders.items():
        layout = build().layout
        for key in layout:
            if key.startswith(("xaxis", "yaxis")) and layout[key].title.text:
                said.append((name, layout[key].title.text))
        bar = layout.coloraxis.colorbar.title.text
        if bar:
            said.append((name, bar))
    barriers = [(n, t) for n, t in said if "accuracy barrier" in t]
    accuracies = [(n, t) for n, t in said if "accuracy" in t and "accuracy barrier" not in t]
    assert {n for n, _ in barriers} >= {"widths", "spawn"}
    assert {n for n, _ in accuracies} >= {"interpolation", "merges"}
    assert [(n, t) for n, t in barriers if "(points" not in t or "%" in t] == []
    assert [(n, t) for n, t in accuracies if "(%)" not in t] == []
