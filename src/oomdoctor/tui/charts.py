"""The trial screen's memory chart (textual-plotext). Its own module: plotext is imported only when a
trial screen opens, not when the app starts."""

from __future__ import annotations

from textual_plotext import PlotextPlot

MARK_NAMES = (
    "longest_batch",
    "update",
    "eval",
    "save",
)  # what the memory chart marks, in the order they come
# plotext colour names, and the rich styles of the legend beside the chart that explains them
LINE_COLOURS = {"gpu": "green", "limit": "red", "estimate": "yellow", "peak": "cyan", "mark": "magenta"}


class MemoryChart(PlotextPlot):
    """Memory over time, one line per GPU, in GiB against the card's limit, with the peak, the estimate's
    line and where the first update, validation and save happened. Drawn by plotext (textual-plotext), a
    maintained plotting widget, rather than by hand."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        self.limit_gib: float | None = None
        self.estimate_gib: float | None = None
        self.peak_gib: float | None = None
        self.marks: dict[str, float] = {}

    def set_data(
        self,
        series: dict[str, tuple[list[float], list[float]]],
        *,
        limit_gib: float | None,
        estimate_gib: float | None,
        peak_gib: float | None,
        marks: dict[str, float],
    ) -> None:
        """Lines only, no words: plotext lays text out one cell a character, so the legend (in the user's
        language, Chinese included) is drawn beside the chart by the screen, in the same colours."""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        times = [x for xs, _ in series.values() for x in xs]
        right = max(max(times, default=0.0), 1.0)  # at least a second wide: ticks stay readable
        top = max([v for _, ys in series.values() for v in ys] + [limit_gib or 0, estimate_gib or 0, 0.5])
        for xs, ys in series.values():
            if xs:
                plt.plot(xs, ys, marker="braille", color=LINE_COLOURS["gpu"])
        for value, name in ((limit_gib, "limit"), (estimate_gib, "estimate"), (peak_gib, "peak")):
            if value:
                plt.hline(value, color=LINE_COLOURS[name])
        for name in MARK_NAMES:
            if name in marks:
                plt.vline(marks[name], color=LINE_COLOURS["mark"])
        plt.ylim(0, top * 1.05)
        plt.xlim(0, right)
        self.series, self.limit_gib, self.estimate_gib, self.peak_gib = (
            series,
            limit_gib,
            estimate_gib,
            peak_gib,
        )
        self.marks = dict(marks)
        self.refresh()
