"""Building blocks shared by the pages, one module per job:

- ``text``: untrusted text shown exactly as written (``plain``, ``literal``);
- ``layout``: a page's header, where its controls go, presentation mode;
- ``choices``: the sidebar's model and device, a model's seeds and kind, method/group labels,
  the pickers of several choices (``pick_many``);
- ``failures``: the one failure card and its fix, a result's warnings;
- ``needs``: stop a page whose data or checkpoints are missing, with the fix;
- ``long_runs``: progress with the time left, Cancel, a status box around a computation, a
  stored result read else computed in one (``read_else_run``);
- ``figures``: a figure with its downloads, registered for the export report;
- ``tables``: the symmetry table as the pages colour it.

The pages import from these modules; the names are also re-exported here.
"""

from app.components.choices import (
    device,
    has_circuits,
    has_heads,
    is_imported,
    model,
    pick_many,
    seed_format,
    seeds_of,
)
from app.components.failures import Fix, one_line, show_error, show_warnings
from app.components.figures import figure, report_button
from app.components.layout import controls, page_header, presentation, side_by_side
from app.components.long_runs import LongRun, duration, estimate, read_else_run, run_in_status
from app.components.needs import data_fix, need_data, need_seeds
from app.components.tables import results_table, styled_table
from app.components.text import literal, plain

__all__ = [
    "Fix",
    "LongRun",
    "controls",
    "data_fix",
    "device",
    "duration",
    "estimate",
    "figure",
    "has_circuits",
    "has_heads",
    "is_imported",
    "literal",
    "model",
    "need_data",
    "need_seeds",
    "one_line",
    "pick_many",
    "page_header",
    "plain",
    "presentation",
    "report_button",
    "read_else_run",
    "run_in_status",
    "seed_format",
    "seeds_of",
    "show_error",
    "show_warnings",
    "side_by_side",
    "results_table",
    "styled_table",
]
