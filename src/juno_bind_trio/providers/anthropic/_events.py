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

from juno_bind_trio.completion import StreamWatchdog, TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY
from juno_bind_trio.providers._lax import lax_count, lax_index
from juno_bind_trio.providers._reader import StreamReader, refuse_a_defect, wrong_shape

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
class EventReader(StreamReader):
    """Events in (``feed()``, one ``dict`` each), a turn out (``result()``)."""

    __slots__ = (
        "_cached_tokens",
        "_content",
        "_input_tokens",
        "_kept",
        "_open_thinking",
        "_output_tokens",
        "_response",
        "_stop_reason",
        "_stopped",
        "_thoughts",
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
                cached = lax_count(usage.get("cache_read_input_tokens") or 0)
                created = lax_count(usage.get("cache_creation_input_tokens") or 0)
                self._cached_tokens = cached
                self._input_tokens = lax_count(usage["input_tokens"]) + cached + created
                self._output_tokens = lax_count(usage["output_tokens"])
                self._alive()
            elif kind == "message_delta":
                stop_reason = event["delta"].get("stop_reason")  # type: ignore[index]
                if stop_reason is not None:
                    self._stop_reason = _text(stop_reason)
                self._output_tokens = lax_count(event["usage"]["output_tokens"])  # type: ignore[index]
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
                    "index": lax_index(event["index"]),
                    "function": {"arguments": _text(delta["partial_json"])},
                }
            )
            self._answer()
        elif delta_kind == "thinking_delta":
            thought = _text(delta["thinking"])
            block = self._open_thinking.get(lax_index(event.get("index")))
            if block is not None:
                block["thinking"] += thought
            self._thoughts.append(thought)
            if self._reason is not None:
                self._reason(thought)
            self._thinking()
        elif delta_kind == "signature_delta":
            signature = _text(delta["signature"])
            block = self._open_thinking.get(lax_index(event.get("index")))
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
                    "index": lax_index(event["index"]),
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
            self._open_thinking[lax_index(event.get("index"))] = opened
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

        raise anthropic.APIResponseValidationError(
            response=self._response, body=event, message=wrong_shape(event, error)
        ) from error

    def result(self, started: float, structured: str | None) -> ModelTurnResult:
        """The turn the events made, or the defect that makes it unusable."""
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
        refuse_a_defect(text_out, assembled if calls is None else calls, finish, None)
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
            time_to_first_token=self._time_to_first_token(started),
            extra=extra,
        )


def _text(value: object) -> str:
    if value.__class__ is str:
        return value
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"expected a string, got {type(value).__name__}")
