"""argparse types shared by the CLI's parsers (light: no numpy, so `wavern --help` stays quick)."""

from __future__ import annotations

import argparse
import math
from typing import Callable

__all__ = ["float_in"]


def float_in(lo: float, hi: float, *, above: bool = False) -> Callable[[str], float]:
    """A finite number in [lo, hi] (``above``: in (lo, hi]); NaN and infinities are refused."""
    def parse(s: str) -> float:
        try:
            x = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, found {s!r}") from None
        if not math.isfinite(x) or not (lo < x if above else lo <= x) or x > hi:
            raise argparse.ArgumentTypeError(f"{x} is outside {'(' if above else '['}{lo:g}, {hi:g}]")
        return x

    return parse
