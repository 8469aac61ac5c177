"""Durations as delayq writes them: "250ms", "1.5s", "1h30m", "7d" (units ms s m h d, decimals
allowed), or a number of milliseconds, or a datetime.timedelta."""
from __future__ import annotations

import datetime
import re
from typing import Union

Duration = Union[str, int, float, datetime.timedelta]

_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def to_ms(value: Duration, what: str = "duration") -> int:
    """Milliseconds of ``value``; ValueError naming ``what`` when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a duration such as \"30s\", milliseconds or a timedelta, not a bool")
    if isinstance(value, datetime.timedelta):
        ms = round(value.total_seconds() * 1000)
    elif isinstance(value, (int, float)):
        ms = round(value)
    elif isinstance(value, str):
        text = value.strip()
        pos, total = 0, 0.0
        while pos < len(text):
            m = _PART.match(text, pos)
            if not m:
                raise ValueError(
                    f"{what} {value!r} is not a duration: write number+unit parts, units ms s m h d (\"250ms\", \"1h30m\")")
            total += float(m.group(1)) * _UNIT_MS[m.group(2)]
            pos = m.end()
        if not text:
            raise ValueError(f"{what} is empty: write a duration such as \"30s\"")
        ms = round(total)
    else:
        raise ValueError(f"{what} must be a duration such as \"30s\", milliseconds or a timedelta, not {type(value).__name__}")
    if ms < 0:
        raise ValueError(f"{what} {value!r} is negative")
    return int(ms)
