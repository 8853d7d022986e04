"""Figures over rounds: each cell keeps every round's value, and shows its median with its spread
(the lowest and highest round). A target is met only when the whole spread is on its right side;
a spread that straddles it is "within noise"."""
import statistics


class Sample:
    """A figure's values, one per round (None: that round failed)."""

    def __init__(self, values=None):
        self.values = list(values or [])

    def add(self, value):
        self.values.append(value)

    @property
    def good(self):
        return [v for v in self.values if v is not None]

    @property
    def failed(self):
        return len(self.good) < len(self.values) or not self.values

    @property
    def median(self):
        return statistics.median(self.good) if self.good else None

    @property
    def low(self):
        return min(self.good) if self.good else None

    @property
    def high(self):
        return max(self.good) if self.good else None

    def show(self, digits=2, unit=""):
        """median (low–high), or FAILED."""
        if self.failed:
            return "FAILED"
        if len(self.good) == 1:
            return f"{self.median:,.{digits}f}{unit}"
        return (f"{self.median:,.{digits}f}{unit} ({self.low:,.{digits}f}–"
                f"{self.high:,.{digits}f})")


def ratios(ours, theirs):
    """Round by round, ours ÷ theirs: the cells of one round ran side by side, so their ratio
    takes out what drifted between rounds."""
    return Sample(None if a is None or b is None or b == 0 else a / b
                  for a, b in zip(ours.values, theirs.values))


def verdict(sample, target, better="lower"):
    """met, within noise or missed: met only when every round is on the target's right side."""
    if sample.failed:
        return "failed"
    if better == "lower":
        return "met" if sample.high <= target else "missed" if sample.low > target else \
            "within noise"
    return "met" if sample.low >= target else "missed" if sample.high < target else \
        "within noise"


def table(header, rows):
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
