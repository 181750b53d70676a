"""How long a response asks its caller to wait, read from its ``retry-after`` headers.

Every provider's classifier (the openai SDK's in ``juno_bind_trio.providers.openai``,
Anthropic's) reads the wait here and hands it to routing in its
[`ClassifiedError`][juno_bind_trio.routing.ClassifiedError].
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Mapping

from juno_bind_trio._validate import real_number, shown

__all__ = ["parse_retry_after"]


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds a response asks the caller to wait, or ``None`` when it does not say.

    Reads ``retry-after-ms`` first, then ``retry-after`` as seconds (a float is
    tolerated, as the SDK does) or as an HTTP date. A date is measured against
    the wall clock (*now*), because that is what it is written in; a date in
    the past means "no wait", ``0.0``. Negative, non-finite or unparsable
    values are ignored: a malformed hint must not stall or skip anything.

    :raises TypeError: *headers* is neither ``None`` nor a mapping, or *now*
        is not a clock returning finite seconds.
    """
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise TypeError(
            "parse_retry_after: headers must be a mapping of header names to values (or None), "
            f"got {shown(headers)}"
        )
    if not callable(now):
        raise TypeError(f"parse_retry_after: now must be a callable clock, got {shown(now)}")
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(header)
        # A value that is not text (a list, a number in a hand-built dict) is as
        # malformed as unparsable text, and ignored like it.
        if not isinstance(raw, str):
            continue
        try:
            seconds = float(raw) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    raw = headers.get("retry-after")
    if not isinstance(raw, str):
        return None
    try:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        when = email.utils.mktime_tz(parsed)
    except (TypeError, ValueError, OverflowError):
        return None
    current = real_number(now())
    if current is None or not math.isfinite(current):
        raise TypeError(
            f"parse_retry_after: now() must return the time in seconds, got {shown(current)}"
        )
    return max(0.0, float(when) - current)
