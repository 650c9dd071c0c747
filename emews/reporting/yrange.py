"""Y ranges that survive real data: one diverged run (a loss of 1e17) must not flatten the rest.

:func:`robust` looks at every value a plot draws on its y axis and picks

- a **log** scale when the values are all positive and span more than :data:`LOG_DECADES` decades,
  none above :data:`LOG_MAX` (matplotlib's log ticks overflow near the largest double);
- else a **linear** range fitted to the bulk of the values (none beyond :data:`DRAW_MAX`) (the :data:`QUANTILE` and
  ``1 - QUANTILE`` quantiles, widened by :data:`FENCE` times their span on each side, never beyond
  the data): points outside are *clipped*, drawn as triangles on the axis edge
  (:func:`mark_clipped`) and counted in the caption (:meth:`YRange.note`), never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from matplotlib.axes import Axes
from matplotlib.transforms import blended_transform_factory

from emews.core.wording import counted

#: all-positive values spanning more decades than this are drawn on a log scale
LOG_DECADES = 3.0
#: the bulk of the values lies between these quantiles (the quartiles) ...
QUANTILE = 0.25
#: ... widened by this many times their span on each side (Tukey's far-out fence)
FENCE = 3.0
CLIPPED_COLOUR = "#d95f02"
#: the largest value a log axis shows: beyond it (1e280) matplotlib's log ticks overflow
#: (an OverflowError, or at 1e308 an axis of 1 to 10); such values are clipped instead
LOG_MAX = 1e200
#: the largest magnitude a linear axis shows: nearer the largest double (1.8e308), matplotlib's
#: colour bars, tick locators and contours overflow (warnings, or "arange: cannot compute length");
#: values beyond are clipped, drawn on the edge and counted
DRAW_MAX = 1e300


@dataclass(frozen=True)
class YRange:
    """How a y axis is drawn: its scale and, for a clipped linear axis, its limits."""

    scale: Literal["linear", "log"]
    lower: float | None = None
    upper: float | None = None
    #: values outside (lower, upper): below and above
    below: int = 0
    above: int = 0
    decades: float = 0.0

    @property
    def clipped(self) -> int:
        return self.below + self.above

    def apply(self, ax: Axes) -> None:
        ax.set_yscale(self.scale)
        if self.lower is not None and self.upper is not None:
            ax.set_ylim(self.lower, self.upper)

    def inside(self, y: np.ndarray) -> np.ndarray:
        """A mask of the values drawn inside the axis."""
        y = np.asarray(y, float)
        if self.lower is None or self.upper is None:
            return np.isfinite(y)
        return np.isfinite(y) & (y >= self.lower) & (y <= self.upper)

    def note(self) -> str:
        """A sentence for the caption (empty when the axis shows every value as it is)."""
        if self.scale == "log":
            return f" The y axis is logarithmic: the values span {self.decades:.0f} decades."
        if self.clipped:
            return (
                f" The y axis shows the bulk of the values; {counted(self.clipped, 'point')} "
                f"outside it ({self.above} above, {self.below} below) "
                "are the triangles on its edges."
            )
        return ""


def robust(values: np.ndarray | list[float]) -> YRange:
    """The y range for ``values`` (see the module docstring); NaN and infinities are ignored."""
    y = np.asarray(values, float)
    y = y[np.isfinite(y)]
    if len(y) == 0:
        return YRange("linear")
    lo, hi = float(y.min()), float(y.max())
    if lo > 0 and hi <= LOG_MAX:
        decades = float(np.log10(hi / lo))
        if decades > LOG_DECADES:
            return YRange("log", decades=decades)
    drawable = np.clip(y, -DRAW_MAX, DRAW_MAX)  # spans and quantiles of these cannot overflow
    lo, hi = float(drawable.min()), float(drawable.max())
    q_lo, q_hi = (float(v) for v in np.quantile(drawable, [QUANTILE, 1 - QUANTILE]))
    span = q_hi - q_lo
    if span <= 0:
        span = max(abs(q_hi), 1.0) * 0.1
    lower, upper = max(lo, q_lo - FENCE * span), min(hi, q_hi + FENCE * span)
    below, above = int((y < lower).sum()), int((y > upper).sum())
    if below + above == 0:
        return YRange("linear")
    pad = 0.05 * (upper - lower or max(1.0, abs(upper) * 1e-6))
    lower, upper = lower - pad, upper + pad
    return YRange("linear", lower, upper, below, above)


def mark_clipped(ax: Axes, rng: YRange, x: np.ndarray, y: np.ndarray, label: bool = True) -> None:
    """Draw the points of (``x``, ``y``) outside ``rng`` as triangles on the axis edge they left by."""
    if rng.lower is None or rng.upper is None:
        return
    x, y = np.asarray(x, float), np.asarray(y, float)
    edge = blended_transform_factory(ax.transData, ax.transAxes)
    for mask, at, marker in ((y > rng.upper, 0.98, "^"), (y < rng.lower, 0.02, "v")):
        mask = mask & np.isfinite(x)
        if mask.any():
            ax.scatter(
                x[mask],
                np.full(mask.sum(), at),
                transform=edge,
                marker=marker,
                s=30,
                color=CLIPPED_COLOUR,
                clip_on=False,
                zorder=5,
                label=f"off the axis ({rng.clipped})" if label else None,
            )
            label = False
