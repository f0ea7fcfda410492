"""Medians and numbers as the timed benchmarks (event-cpu, bench-cm-setup-in-guest) print them.

Their tables hold figures as text: a median of an odd count is one of the figures, as it was
printed; of an even count the mean of the middle two, in the shortest form (at most six
significant digits, no trailing zeros); text that is no number counts as 0 and sorts first.
"""

from __future__ import annotations

import re
from typing import Iterable

_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def number(text: str) -> float:
    """TEXT's leading number; 0 when it has none ("-", "")."""
    m = _NUMBER.match(text)
    return float(m.group(0)) if m else 0.0


def is_number(text: str) -> bool:
    return _NUMBER.fullmatch(text.strip()) is not None if text.strip() else False


def shortest(x: float) -> str:
    """A computed figure: a whole number as one, else six significant digits."""
    if x == int(x) and abs(x) < 1e15:
        return "%d" % x
    return "%.6g" % x


def median(values: Iterable[str]) -> str:
    """The median of the figures (empty ones left out); "0" of none."""
    v = sorted((s for s in values if s != ""), key=lambda s: (is_number(s), number(s)))
    if not v:
        return "0"
    if len(v) % 2:
        return v[len(v) // 2]
    return shortest((number(v[len(v) // 2 - 1]) + number(v[len(v) // 2])) / 2)
