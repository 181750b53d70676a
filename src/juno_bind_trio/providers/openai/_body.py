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

One thing the walk did that the encoder after it does not: it made a ``dict``
of every ``Mapping`` it met, and the JSON encoder takes dicts only. A host's
transcript or tool schema may hold read-only views (``MappingProxyType``) or
its own mapping types, at the top or nested; ``_plain`` copies those into
dicts, and returns a value that is already plain JSON as it is, without a
copy (about 70 microseconds for 81 messages and five tools, against the 13 ms
of the walk it replaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["past_the_transform"]


def past_the_transform(arguments: Mapping[str, Any], built: Mapping[str, Any]) -> dict[str, Any]:
    """``create()``'s keyword arguments: *arguments* as given, with each of *built* (the
    messages or input items, the tools) sent in ``extra_body`` and an empty placeholder in
    its own argument.

    :raises TypeError: *arguments* has an ``extra_body`` that is not a mapping.
    """
    out = dict(arguments)
    extra = {key: _plain(value) for key, value in built.items()}
    for key in built:
        out[key] = []
    given = out.get("extra_body")
    if given is not None:
        if not isinstance(given, Mapping):
            raise TypeError(f"request_options: extra_body must be a mapping, got {given!r}")
        extra.update(given)
    out["extra_body"] = extra
    return out


# Values the JSON encoder writes as they are: nothing inside them to look at.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """*value* with every ``Mapping`` in it that is not a ``dict`` copied into one.

    The same object when there is none (the common case: the messages and tools this
    package builds are dicts and lists); otherwise a copy of the containers on the way
    to each one changed, the caller's own values untouched. Anything else (a tuple, a
    pydantic model, a datetime) is left to the SDK's encoder, which writes those.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        copied: dict[Any, Any] | None = None
        for key, item in value.items():
            plain = _plain(item)
            if plain is not item:
                if copied is None:
                    copied = dict(value)
                copied[key] = plain
        return value if copied is None else copied
    if kind is list or kind is tuple:
        changed: list[Any] | None = None
        for index, item in enumerate(value):
            plain = _plain(item)
            if plain is not item:
                if changed is None:
                    changed = list(value)
                changed[index] = plain
        return value if changed is None else changed
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):  # a subclass: written as a list, its items looked at
        items = [_plain(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
