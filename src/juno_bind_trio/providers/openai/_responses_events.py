"""The Responses API's stream events, read as plain dicts into one turn.

Both ways of reading a stream end here (see ``_responses.py``): the lean
path hands over each event as the ``dict`` its JSON made, the SDK path the
``to_dict()`` of the pydantic event the SDK built. One reader for both keeps
them from drifting apart: whatever an event holds, the two paths make the
same turn of it, or raise the same exception.

Failures in the stream arrive as ordinary events and the SDK raises nothing
for them: an ``error`` event and ``response.failed`` are raised here as
``openai.APIError`` with the API's error object as the body, for
[`classify_responses_error()`][juno_bind_trio.providers.openai.classify_responses_error].
An event of the wrong shape (not an object, a delta that is not text, a count
that is not a number) is the endpoint's fault, raised as the SDK raises a
response it cannot read, ``APIResponseValidationError``: the next candidate.
An event type this package does not know only proves the stream alive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NoReturn, final

from juno_bind_trio.completion import StreamWatchdog, TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY
from juno_bind_trio.providers._lax import lax_count, lax_index
from juno_bind_trio.providers._reader import StreamReader, refuse_a_defect, wrong_shape

from ._responses_convert import RESPONSES_NAME

if TYPE_CHECKING:
    import httpx2

__all__ = ["ResponsesEventReader"]

_INCOMPLETE: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}
_REASONING_DELTAS: Final = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


@final
class ResponsesEventReader(StreamReader):
    """Events in (``feed()``, one ``dict`` each), a turn out (``result()``)."""

    __slots__ = (
        "_call_items",
        "_content",
        "_finish",
        "_kept",
        "_refusal",
        "_response",
        "_thoughts",
        "_usage",
    )

    def __init__(
        self,
        watchdog: StreamWatchdog,
        text_stream: TurnTextStream | None,
        response: httpx2.Response,
    ) -> None:
        super().__init__(watchdog, text_stream)
        self._response = response
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._thoughts: list[str] = []
        self._kept: list[dict[str, Any]] = []
        self._call_items: dict[str, str] = {}
        self._finish: str | None = None
        self._usage: tuple[int, int, int, int] = (0, 0, 0, 0)

    def feed(self, event: object) -> None:
        """Fold one event in; raise ``APIError`` for a failure event, ``APIResponseValidationError``
        for an event of the wrong shape."""
        try:
            self._feed(event)
        except (KeyError, TypeError, AttributeError) as error:
            self._refuse(event, error)

    def _feed(self, event: Any) -> None:
        kind = event["type"]
        if kind == "response.output_text.delta":
            text = _text(event["delta"])
            self._content.append(text)
            if self._observe is not None:
                self._observe(text)
            self._answer()
        elif kind == "response.function_call_arguments.delta":
            self._add_call(
                {
                    "index": lax_index(event["output_index"]),
                    "function": {"arguments": _text(event["delta"])},
                }
            )
            self._answer()
        elif kind in _REASONING_DELTAS:
            thought = _text(event["delta"])
            self._thoughts.append(thought)
            if self._reason is not None:
                self._reason(thought)
            self._thinking()
        elif kind == "response.output_item.added":
            item = event["item"]
            item_kind = item["type"]
            if item_kind == "function_call":
                call_id = item["call_id"]
                self._add_call(
                    {
                        "index": lax_index(event["output_index"]),
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": item["name"],
                            "arguments": _text(item.get("arguments") or ""),
                        },
                    }
                )
                item_id = item.get("id")
                if item_id:
                    self._call_items[_text(call_id)] = _text(item_id)
                self._answer()
            elif item_kind == "reasoning":
                self._thinking()
            else:
                self._alive()
        elif kind == "response.output_item.done":
            item = event["item"]
            if item["type"] == "reasoning":
                # Every field the API sent, as it sent it: the item goes back as it came.
                self._kept.append(dict(item))
            self._alive()
        elif kind == "response.refusal.delta":
            self._refusal.append(_text(event["delta"]))
            self._answer()
        elif kind == "response.completed":
            self._usage = _usage(event["response"].get("usage"))
            self._finish = "stop"
            self._alive()
        elif kind == "response.incomplete":
            response = event["response"]
            self._usage = _usage(response.get("usage"))
            details = response.get("incomplete_details")
            cause = details.get("reason") if details is not None else None
            self._finish = _INCOMPLETE.get(cause or "", "length")
            self._alive()
        elif kind == "response.failed":
            self._raise(event["response"].get("error"), "the response failed")
        elif kind == "error":
            failure = {
                "code": event.get("code"),
                "message": event.get("message"),
                "param": event.get("param"),
            }
            self._raise(failure, "error event mid-stream")
        else:
            self._alive()

    def _raise(self, error: object, fallback: str) -> NoReturn:
        import openai

        if error is None:
            body: dict[str, Any] = {"code": None, "message": fallback}
        elif isinstance(error, dict):
            body = dict(error)
        else:
            raise TypeError(f"an error that is not an object: {error!r}")
        message = body.get("message")
        if not isinstance(message, str) or not message:
            message = fallback
        raise openai.APIError(message, self._response.request, body=body)

    def _refuse(self, event: object, error: Exception) -> NoReturn:
        import openai

        raise openai.APIResponseValidationError(
            response=self._response, body=event, message=wrong_shape(event, error)
        ) from error

    def result(self, started: float) -> ModelTurnResult:
        """The turn the events made, or the defect that makes it unusable."""
        text_out = "".join(self._content) if self._content else None
        refusal_out = "".join(self._refusal) if self._refusal else None
        accumulator = self._accumulator
        assembled = accumulator.assembled()
        calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
        finish = self._finish
        if finish == "stop" and assembled:
            finish = "tool_calls"
        refuse_a_defect(text_out, assembled if calls is None else calls, finish, refusal_out)
        extra: dict[str, Any] = {}
        if self._kept:
            # The call items' ids tie each call to its reasoning item: kept with it.
            state: dict[str, Any] = {"provider": RESPONSES_NAME, "reasoning": self._kept}
            if self._call_items:
                state["calls"] = self._call_items
            extra[PROVIDER_STATE_KEY] = state
        input_tokens, output_tokens, cached, reasoned = self._usage
        return ModelTurnResult(
            content=text_out if text_out is not None else refusal_out,
            tool_calls=accumulator.tool_calls() if calls is None else calls,
            reasoning="".join(self._thoughts) if self._thoughts else None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            reasoning_tokens=reasoned,
            time_to_first_token=self._time_to_first_token(started),
            extra=extra,
        )


def _usage(usage: Any) -> tuple[int, int, int, int]:
    # (input, output, cached of the input, reasoning of the output).
    if usage is None:
        return 0, 0, 0, 0
    prompt = usage.get("input_tokens_details")
    completion = usage.get("output_tokens_details")
    cached = lax_count(prompt.get("cached_tokens") or 0) if prompt is not None else 0
    reasoned = lax_count(completion.get("reasoning_tokens") or 0) if completion is not None else 0
    return (
        lax_count(usage.get("input_tokens") or 0),
        lax_count(usage.get("output_tokens") or 0),
        cached,
        reasoned,
    )


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {type(value).__name__}")
