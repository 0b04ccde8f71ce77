"""How numbers are written for people, on the pages and in the terminal alike: four
significant digits, and a mean with its standard error to the error's precision."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["mean_pm", "number"]


def number(v: Any) -> str:
    """A number to four significant digits (an int as it is); a missing one as –."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)  # nan and inf are said, never hidden
        return "0" if v == 0 else f"{v:.4g}"
    return str(v)


def mean_pm(mean: float, sem: float, percent: bool = False) -> str:
    """``mean ± sem`` with the error to two significant digits and the mean to the same
    decimal place (``1.549 ± 0.012``, ``0.0116 ± 0.0015``); ``percent`` writes fractions as
    percentages. A zero, NaN or infinite error leaves the mean at four significant digits."""
    scale, unit = (100.0, "%") if percent else (1.0, "")
    m, e = scale * mean, scale * sem
    if not (math.isfinite(m) and math.isfinite(e)) or e <= 0:
        return f"{number(m)}{unit} ± {number(e)}{unit}"
    places = max(0, 1 - math.floor(math.log10(e)))
    return f"{m:.{places}f}{unit} ± {e:.{places}f}{unit}"
