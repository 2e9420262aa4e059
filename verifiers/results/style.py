"""One look for every picture the project makes: training plots (vf-rl, vf-sft), report.html
and the hub's pages use these colours and this typography."""

from __future__ import annotations

from typing import Any

INK = "#1d2430"
MUTED = "#5b6573"
RULE = "#e3e6ea"
SERIES = ("#1f77b4", "#2ca02c", "#d62728", "#9467bd")  # reward/loss, held-out, third, fourth
FONT = ["DejaVu Sans", "sans-serif"]


def matplotlib_style(plt: Any) -> None:
    """Apply the project's look to matplotlib (the report's colours, light grid, no top/right)."""
    plt.rcParams.update(
        {
            "axes.prop_cycle": plt.cycler(color=list(SERIES)),
            "axes.edgecolor": MUTED,
            "axes.labelcolor": INK,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.color": RULE,
            "grid.alpha": 1.0,
            "xtick.color": MUTED,
            "ytick.color": MUTED,
            "text.color": INK,
            "font.family": FONT,
            "font.size": 9,
            "legend.frameon": False,
        }
    )


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend with this look, or None without
    matplotlib (plots are optional: the ``rl`` extra brings it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    matplotlib_style(plt)
    return plt


def save_figure(plt: Any, fig: Any, path: Any) -> Any:
    """Lay out, write (PNG, 100 dpi) and free ``fig``; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
