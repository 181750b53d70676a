"""Request options: the keys every request sets itself, and the one check of a host's options.

Shared by every model that sends requests (the providers' models and the
``Agent``, which adds its output type's format to them), so each refuses the
same options with the same words. It sits below every subpackage: it knows a
route plan only by its shape (stages holding candidates with options).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from ._validate import shown

if TYPE_CHECKING:
    from juno_bind_trio.routing import RoutePlan

__all__ = [
    "OPENAI_CHAT_ONLY_OPTIONS",
    "RESERVED_REQUEST_OPTIONS",
    "candidate_option_clashes",
    "checked_request_options",
]

RESERVED_REQUEST_OPTIONS: Final = frozenset({"model", "messages", "tools", "stream", "n"})
"""Request options every adapter sets itself; a model refuses them in ``request_options``."""

OPENAI_CHAT_ONLY_OPTIONS: Final = frozenset(
    {
        "stream_options",
        "logprobs",
        "top_logprobs",
        "logit_bias",
        "user",
        "store",
        "modalities",
        "prediction",
        "reasoning_effort",
        "verbosity",
        "audio",
        "web_search_options",
    }
)
"""Options of the chat-completions wire no other provider's API has a word for.

A plan that falls back from OpenAI to another provider shares its request
options; each other adapter drops these (and its own further ones) rather
than refusing them.
"""


def checked_request_options(owner: str, value: object, *, or_none: bool = False) -> dict[str, Any]:
    """*value* as extra request options, or a clear error naming *owner*.

    A mapping of str keys, none of them an argument every request sets itself
    (``RESERVED_REQUEST_OPTIONS``), and an ``extra_body``, when given, a
    mapping (the SDKs merge it into the request's JSON). With *or_none*, ``None`` is accepted, as
    no options.
    """
    if value is None and or_none:
        return {}
    if not isinstance(value, Mapping):
        expected = "a mapping or None" if or_none else "a mapping"
        raise TypeError(f"{owner}: request_options must be {expected}, got {shown(value)}")
    options = dict(value)
    for key in options:
        if not isinstance(key, str):
            raise TypeError(f"{owner}: request_options keys must be strings, got {shown(key)}")
    extra_body = options.get("extra_body")
    if extra_body is not None and not isinstance(extra_body, Mapping):
        raise TypeError(
            f"{owner}: request_options['extra_body'] must be a mapping of JSON properties, "
            f"got {shown(extra_body)}"
        )
    clash = sorted(RESERVED_REQUEST_OPTIONS.intersection(options))
    if clash:
        raise ValueError(
            f"{owner}: request_options must not set {clash!r}: the model, the messages, the "
            "tools and the streaming of each request are the package's own"
        )
    return options


def candidate_option_clashes(
    plan: RoutePlan, keys: frozenset[str]
) -> Iterator[tuple[str, str, list[str]]]:
    """``(provider, model, keys set)`` for each candidate of *plan* whose options set any of *keys*.

    A candidate's options are merged over the request's for its attempts, so
    one that sets a key somebody else owns would silently replace it.
    """
    for stage in plan.stages:
        for candidate in stage.candidates:
            clash = sorted(keys.intersection(candidate.options))
            if clash:
                yield candidate.provider, stage.model, clash
