"""The trial screen's charts (textual-plotext): memory, and utilisation with power. Their own module:
plotext is imported only when a trial screen opens, not when the app starts."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from oomdoctor.report import units

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


# the usage chart's two lines, and the rich styles of the legend lines above it
USAGE_COLOURS = {"util": "blue", "power": "yellow"}
# Fewer rows than this and the chart is not drawn (the figures above it stay): three rows for the scale's
# 0 / half / top ticks, one for the time axis.
USAGE_MIN_ROWS = 4
Series = tuple[list[float], list[float]]  # times (s), values


def power_scale_top(most_w: float) -> float:
    """The power scale's top: the most drawn so far rounded up to 50 W (10 W below 100 W), so its ticks
    read as round figures (0 / 125 / 250 W)."""
    step = 50.0 if most_w > 100 else 10.0
    return max(step, math.ceil(most_w / step) * step)


class UsageChart(PlotextPlot):
    """The busiest GPU's utilisation (left scale, %) and power (right scale, W) over time, in one chart
    with two scales: the side column beside the memory chart is 30 cells wide and, at 80x24, about six rows
    tall under the memory legend, too few for two charts with a scale each. The time axis is the memory
    chart's (the same seconds), so it carries no labels of its own."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.util: Series = ([], [])
        self.power: Series = ([], [])

    @property
    def drawn(self) -> bool:
        """Whether the chart shows: a value to draw and the rows for its scale."""
        return bool(self.util[0] or self.power[0]) and self.size.height >= USAGE_MIN_ROWS

    def set_data(self, util: Series, power: Series, *, right_s: float) -> None:
        plt: Any = self.plt  # plotext's own hints type ``yside`` as a number; it takes "left" / "right"
        plt.clear_data()
        plt.clear_figure()
        self.util, self.power = util, power
        if util[0]:
            plt.plot(*util, marker="braille", color=USAGE_COLOURS["util"], yside="left")
            plt.ylim(0, 100, yside="left")
            plt.yticks([0, 50, 100], [units.percent(v) for v in (0, 50, 100)], yside="left")
        if power[0]:
            top = power_scale_top(max(power[1]))
            ticks = [0.0, top / 2, top]
            plt.plot(*power, marker="braille", color=USAGE_COLOURS["power"], yside="right")
            plt.ylim(0, top, yside="right")
            plt.yticks(ticks, [units.watts(v) for v in ticks], yside="right")
        plt.xlim(0, max(right_s, 1.0))
        plt.xticks([])
        plt.xaxes(True, False)
        plt.yaxes(bool(util[0]), bool(power[0]))
        self.refresh()

    def render(self) -> RenderResult:
        return super().render() if self.drawn else Text("")
