"""The figures that ship as data: the README's interpolation figure (``assets/readme``) and the
app's Home curves (``assets/home``), both of ``mlp-digits``, naive against aligned."""

from __future__ import annotations

import json
from pathlib import Path

from landscape.store.paths import assets_root

# The curves of the README figure and of the app's Home page: naive against aligned, (label,
# method, group), on the test split of mlp-digits.
LMC_SERIES = (("naive", "naive", "perm"),
              ("weight matching, permutations", "weight", "perm"),
              ("weight matching, rotations", "weight", "orth"),
              ("learned matching, rotations", "learned", "orth"))  # fmt: skip
# Home draws one pair on a λ grid of step 0.05, read from this file (no model is loaded there).
HOME_MODEL, HOME_SEEDS, HOME_POINTS = "mlp-digits", (0, 1), 21


def home_curves_path() -> Path:
    return assets_root() / "home" / f"lmc-{HOME_MODEL}.json"


def readme_figure(out: Path, pairs: int = 3) -> Path:
    """The README's figure: mlp-digits interpolation curves, naive against aligned (test split)."""
    from landscape.experiments import barrier, pairs_for
    from landscape.plots import figure_interpolation
    from landscape.plots.export import to_png

    series = []
    for label, method, group in LMC_SERIES:
        results = [barrier("mlp-digits", p, method, group) for p in pairs_for("mlp-digits", pairs)]
        series.append({"label": label, "results": results})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(to_png(figure_interpolation(series), scale=1.5))
    return out


def home_curves(out: Path) -> Path:
    """The app's Home page curves: the barrier result of every :data:`LMC_SERIES` for the shipped
    pair ``HOME_SEEDS`` of ``HOME_MODEL`` on ``HOME_POINTS`` values of λ (test split), as JSON, so
    that Home draws at once on any machine."""
    from landscape.experiments import barrier

    series = [{"label": label, "result": barrier(HOME_MODEL, HOME_SEEDS, method, group,
                                                 points=HOME_POINTS)}
              for label, method, group in LMC_SERIES]  # fmt: skip
    doc = {"model": HOME_MODEL, "seeds": list(HOME_SEEDS), "points": HOME_POINTS,
           "split": "test", "series": series}  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out
