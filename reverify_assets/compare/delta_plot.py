"""A histogram of the per-task mean reward change, as a small PNG: numbers in, bytes out.

matplotlib is imported inside the function (it costs a second to import, and only the comparison asset
draws), and the figure is drawn on its own Agg canvas, never through pyplot's global state, so it is safe
in any process and thread.
"""

from __future__ import annotations

import io

import numpy as np

WIDTH_IN, HEIGHT_IN, DPI = 6.4, 3.0, 100  # 640 × 300 pixels: a few tens of kB
# Up to this many distinct values (4 rollouts a task with pass/fail rewards give 9) each gets its own bar;
# beyond it the values are binned.
MAX_DISTINCT_BARS = 41
BINS = 40
WORSE, SAME, BETTER = "#c0392b", "#7f8c8d", "#27ae60"


def task_delta_histogram(task_deltas: np.ndarray, *, title: str) -> bytes:
    """PNG bytes: how many tasks moved by how much (candidate − baseline, each task's mean over its rows)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    deltas = np.asarray(task_deltas, dtype=np.float64)
    if deltas.size == 0:
        axes.text(0.5, 0.5, "no compared rows", ha="center", va="center", transform=axes.transAxes)
        axes.set_axis_off()
    else:
        _draw_bars(axes, deltas)
        worse, better = int(np.count_nonzero(deltas < 0)), int(np.count_nonzero(deltas > 0))
        same = deltas.size - worse - better
        mean = float(deltas.mean())
        axes.axvline(mean, color="black", linestyle="--", linewidth=1, label=f"mean {mean:+.4f}")
        axes.set_xlabel("mean reward change per task (candidate − baseline)")
        axes.set_ylabel("tasks")
        axes.legend(loc="upper right", fontsize=8, frameon=False)
        title = f"{title}\n{deltas.size} tasks: {worse} worse, {same} unchanged, {better} better"
    axes.set_title(title, fontsize=9)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})  # no version stamp: same numbers, same bytes
    return buffer.getvalue()


def _draw_bars(axes: object, deltas: np.ndarray) -> None:
    values, counts = np.unique(deltas, return_counts=True)
    if values.size <= MAX_DISTINCT_BARS:
        gap = float(np.diff(values).min()) if values.size > 1 else 0.1
        centers, heights, width = values, counts, 0.8 * gap
    else:
        heights, edges = np.histogram(deltas, bins=BINS)
        centers, width = (edges[:-1] + edges[1:]) / 2, 0.9 * float(edges[1] - edges[0])
    colours = [WORSE if c < 0 else BETTER if c > 0 else SAME for c in centers]
    bars = axes.bar(centers, heights, width=width, color=colours)  # type: ignore[attr-defined]
    if len(centers) <= 15:
        axes.bar_label(bars, fontsize=7, padding=1)  # type: ignore[attr-defined]
    axes.margins(y=0.15)  # type: ignore[attr-defined]
