"""The JSON a lean request carries that this package built, sent past the SDK's transform.

The openai SDK's ``create`` walks its arguments against their ``TypedDict``
annotations before it sends them (``async_maybe_transform``), to rename the
keys that have a wire alias and to format the values that have a wire format
(dates, files). No field of the chat-completions messages, the Responses
input items or either API's tools has an alias or a format, so for the JSON
this package builds the walk changes nothing; but it is slow, and it runs in
one task step. Measured on this machine (openai 3.63): 0.55 ms for a request
with one message, 6.6 ms with 21, 0.3 ms more for five tools; the Responses
API's input, 0.38 ms for one item and 5.0 ms for 21. A run's every request
paid it, and a conversation of a few dozen messages held the event loop
longer than the 5 ms the harness allows itself.

The lean path sends those values as the request's ``extra_body`` instead,
the SDK's documented way to add JSON properties to a body as they are: it
merges them over the transformed arguments, key by key. Each keeps its place
in the body, because its own argument is passed too, as an empty list, which
the merge replaces. What the caller gave in ``request_options`` (``temperature``,
``response_format``, its own ``extra_body``) still goes through the SDK as it
always did, so the SDK's checks of those still apply, and a caller's own
``extra_body`` still has the last word. The ``"sdk"`` stream path sends
everything through the SDK's walk, as the SDK does; a test sends the same
requests both ways and compares the bodies the server received.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["past_the_transform"]


def past_the_transform(arguments: Mapping[str, Any], built: Mapping[str, Any]) -> dict[str, Any]:
    """``create()``'s keyword arguments: *arguments* as given, with each of *built* (the
    messages or input items, the tools) sent in ``extra_body`` and an empty placeholder in
    its own argument.

    :raises TypeError: *arguments* has an ``extra_body`` that is not a mapping.
    """
    out = dict(arguments)
    extra = dict(built)
    for key in built:
        out[key] = []
    given = out.get("extra_body")
    if given is not None:
        if not isinstance(given, Mapping):
            raise TypeError(f"request_options: extra_body must be a mapping, got {given!r}")
        extra.update(given)
    out["extra_body"] = extra
    return out
