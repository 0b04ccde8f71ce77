"""Home page: the schematic of the four nested levels of weight-space symmetry."""

from __future__ import annotations

import plotly.graph_objects as go

from landscape.plots.theme import LINE_WIDTH, PALETTE, apply_theme, font_size, presentable, rgba

SYMMETRY_LEVELS = (
    ("Permutations", "S_n: FFN units and heads<br>relabelled"),
    ("Signed permutations", "B_d: residual coordinates<br>relabelled and sign-flipped"),
    ("Rotations", "O(d): any rotation of the residual<br>stream (norm gains folded)"),
    ("Within-head maps", "GL(d_head): W_Q·M, W_K·M⁻ᵀ and<br>W_V·N, N⁻¹·W_O inside every head"),
)


@presentable
def figure_symmetry_levels() -> go.Figure:
    """The four nested levels of weight-space symmetry, as nested boxes (innermost smallest).

    A schematic for the home page: each level contains the previous ones, and aligning under a
    larger group can only lower the barrier found by exact matching.
    """
    fig = go.Figure()
    size = font_size()
    for i, (name, detail) in reversed(list(enumerate(SYMMETRY_LEVELS))):
        x0, x1 = 0.0, 0.40 + 0.20 * i
        y0, y1 = 0.0, 0.25 + 0.25 * i
        colour = PALETTE[i]
        fig.add_shape(
            type="rect", x0=x0, x1=x1, y0=y0, y1=y1,
            line={"color": colour, "width": LINE_WIDTH}, fillcolor=rgba(colour, 0.07),
            layer="above",
        )  # fmt: skip
        fig.add_annotation(
            x=x1 - 0.01, y=y1 - 0.015, xanchor="right", yanchor="top", showarrow=False,
            text=f"<b>{i + 1}. {name}</b><br><span style='font-size:0.8em'>{detail}</span>",
            align="right", font={"size": size, "color": "#222"},
        )  # fmt: skip
    fig.update_xaxes(visible=False, range=[-0.01, 1.01])
    fig.update_yaxes(visible=False, range=[-0.01, 1.01])
    fig.update_layout(height=360, showlegend=False)
    apply_theme(fig)
    fig.update_layout(margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig
