"""The Messages API's stream events, read as plain dicts into one turn.

Both ways of reading a stream end here (see ``_adapter.py``): the lean path
hands over each event as the ``dict`` its JSON made, the SDK path the
``to_dict()`` of the pydantic event the SDK built. One reader for both is
what keeps them from drifting apart: whatever an event holds, odd or not,
the two paths make the same turn of it, or raise the same exception.

An event of the wrong shape (not an object, a delta without its text, a count
that is not a number) is the endpoint's fault, not the host's, so it is raised
as the SDK raises a response it cannot read, ``APIResponseValidationError``,
and routing moves to the next candidate. An event type or a block type this
package does not know (a later API version's) only proves the stream alive.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, final

from juno_bind_trio.completion import (
    AssembledCompletion,
    StreamWatchdog,
    ToolCallAccumulator,
    TurnTextStream,
    detect_completion_defect,
)
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY
from juno_bind_trio.providers._lax import lax_int

from ._convert import NAME, structured_content

if TYPE_CHECKING:
    import httpx2

__all__ = ["EventReader"]

_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


@final
class EventReader:
    """Events in (``feed()``, one ``dict`` each), a turn out (``result()``)."""

    __slots__ = (
        "_accumulator",
        "_add_call",
        "_alive",
        "_answer",
        "_cached_tokens",
        "_content",
        "_input_tokens",
        "_kept",
        "_observe",
        "_open_thinking",
        "_output_tokens",
        "_reason",
        "_response",
        "_stop_reason",
        "_stopped",
        "_thinking",
        "_thoughts",
        "_watchdog",
    )

    def __init__(
        self,
        watchdog: StreamWatchdog,
        text_stream: TurnTextStream | None,
        response: httpx2.Response,
    ) -> None:
        self._watchdog = watchdog
        self._response = response
        self._answer, self._alive, self._thinking = (
            watchdog.answer,
            watchdog.chunk,
            watchdog.reasoning,
        )
        self._observe = text_stream.observe if text_stream is not None else None
        self._reason = text_stream.reasoning if text_stream is not None else None
        # Each fragment also goes to the text stream, for a surface that shows
        # arguments as they arrive (a no-op for any other).
        self._accumulator = ToolCallAccumulator(
            on_delta=text_stream.tool_call_delta if text_stream is not None else None
        )
        self._add_call = self._accumulator.add
        self._content: list[str] = []
        self._thoughts: list[str] = []
        # Thinking blocks by content-block index while open, then in order.
        self._open_thinking: dict[object, dict[str, Any]] = {}
        self._kept: list[dict[str, Any]] = []
        self._stop_reason: str | None = None
        self._stopped = False
        self._input_tokens = self._cached_tokens = self._output_tokens = 0

    def feed(self, event: object) -> None:
        """Fold one event in; raise ``APIResponseValidationError`` for one of the wrong shape."""
        try:
            kind = event["type"]  # type: ignore[index]
            if kind == "content_block_delta":
                self._delta(event, event["delta"])  # type: ignore[index]
            elif kind == "content_block_start":
                self._start(event, event["content_block"])  # type: ignore[index]
            elif kind == "message_start":
                usage = event["message"]["usage"]  # type: ignore[index]
                cached = _count(usage.get("cache_read_input_tokens") or 0)
                created = _count(usage.get("cache_creation_input_tokens") or 0)
                self._cached_tokens = cached
                self._input_tokens = _count(usage["input_tokens"]) + cached + created
                self._output_tokens = _count(usage["output_tokens"])
                self._alive()
            elif kind == "message_delta":
                stop_reason = event["delta"].get("stop_reason")  # type: ignore[index]
                if stop_reason is not None:
                    self._stop_reason = _text(stop_reason)
                self._output_tokens = _count(event["usage"]["output_tokens"])  # type: ignore[index]
                self._alive()
            elif kind == "message_stop":
                self._stopped = True
                self._alive()
            else:  # content_block_stop, and events of later API versions
                self._alive()
        except (KeyError, TypeError, AttributeError) as error:
            self._refuse(event, error)

    def _delta(self, event: Any, delta: Any) -> None:
        delta_kind = delta["type"]
        if delta_kind == "text_delta":
            text = _text(delta["text"])
            self._content.append(text)
            if self._observe is not None:
                self._observe(text)
            self._answer()
        elif delta_kind == "input_json_delta":
            self._add_call(
                {
                    "index": _index(event["index"]),
                    "function": {"arguments": _text(delta["partial_json"])},
                }
            )
            self._answer()
        elif delta_kind == "thinking_delta":
            thought = _text(delta["thinking"])
            block = self._open_thinking.get(_index(event.get("index")))
            if block is not None:
                block["thinking"] += thought
            self._thoughts.append(thought)
            if self._reason is not None:
                self._reason(thought)
            self._thinking()
        elif delta_kind == "signature_delta":
            signature = _text(delta["signature"])
            block = self._open_thinking.get(_index(event.get("index")))
            if block is not None:
                block["signature"] += signature
            self._alive()
        else:
            self._alive()

    def _start(self, event: Any, block: Any) -> None:
        block_kind = block["type"]
        if block_kind == "tool_use":
            initial = block.get("input")
            self._add_call(
                {
                    "index": _index(event["index"]),
                    "id": block["id"],
                    "type": "function",
                    "function": {
                        "name": block["name"],
                        # Streamed input comes as deltas; a block that arrives
                        # whole carries it here.
                        "arguments": json.dumps(initial, separators=(",", ":")) if initial else "",
                    },
                }
            )
            self._answer()
        elif block_kind == "thinking":
            opened = {
                "type": "thinking",
                "thinking": _text(block["thinking"]),
                "signature": _text(block["signature"]),
            }
            self._open_thinking[_index(event.get("index"))] = opened
            self._kept.append(opened)
            self._thinking()
        elif block_kind == "redacted_thinking":
            self._kept.append({"type": "redacted_thinking", "data": _text(block["data"])})
            self._thinking()
        elif block_kind == "text":
            text = _text(block.get("text") or "")
            if text:
                self._content.append(text)
                if self._observe is not None:
                    self._observe(text)
                self._answer()
            else:
                self._alive()
        else:
            self._alive()

    def _refuse(self, event: object, error: Exception) -> None:
        import anthropic

        # Keys sorted: the SDK path's event has them in its model's order.
        shown = json.dumps(event, sort_keys=True, default=repr)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        raise anthropic.APIResponseValidationError(
            response=self._response,
            body=event,
            message=f"a stream event of the wrong shape ({type(error).__name__}: {error}): {shown}",
        ) from error

    def result(self, started: float, structured: str | None) -> ModelTurnResult:
        """The turn the events made, or the defect that makes it unusable."""
        first_answer_at = self._watchdog.statistics().first_answer_at
        text_out = "".join(self._content) if self._content else None
        # The body ended without `message_stop`: cut off, whatever it said before.
        stop_reason = self._stop_reason
        finish = None
        if self._stopped and stop_reason:
            finish = _FINISH.get(stop_reason, "stop")
        accumulator = self._accumulator
        assembled = accumulator.assembled()
        calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
        if structured is not None and calls is not None:
            answer_call = next((c for c in calls if c.name == structured), None)
            if answer_call is not None:
                # The structured answer: the tool's input is the content.
                text_out = structured_content(answer_call.arguments)
                calls = [c for c in calls if c is not answer_call]
                if finish == "tool_calls" and not calls:
                    finish = "stop"
        completion = AssembledCompletion(
            content=text_out,
            tool_calls=assembled if calls is None else calls,
            finish_reason=finish,
            refusal=None,
        )
        defect = detect_completion_defect(completion)
        if defect is not None:
            raise defect.as_error()
        extra: dict[str, Any] = {}
        if self._kept:
            extra[PROVIDER_STATE_KEY] = {"provider": NAME, "thinking": self._kept}
        return ModelTurnResult(
            content=text_out,
            tool_calls=accumulator.tool_calls() if calls is None else calls,
            reasoning="".join(self._thoughts) if self._thoughts else None,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            cached_tokens=self._cached_tokens,
            time_to_first_token=None if first_answer_at is None else first_answer_at - started,
            extra=extra,
        )


def _text(value: object) -> str:
    if value.__class__ is str:
        return value
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"expected a string, got {type(value).__name__}")


def _count(value: object) -> int:
    if value.__class__ is int:
        return value
    coerced = lax_int(value)
    if coerced is None:
        raise TypeError(f"expected a token count, got {value!r}")
    return coerced


def _index(value: object) -> object:
    if value.__class__ is int:
        return value
    coerced = lax_int(value)
    return value if coerced is None else coerced
