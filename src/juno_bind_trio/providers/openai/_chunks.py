"""Reading streamed chat-completion chunks, as plain ``dict`` values, into one model turn.

Both stream paths of ``_stream.py`` end here: the lean one hands over each
chunk as ``json.loads`` made it, the SDK one each ``ChatCompletionChunk`` as
``to_dict()`` gives it back (the fields the server sent, those the SDK does
not model included). One reader for both is what makes the paths agree: a
chunk means the same thing whoever split the stream.

A chunk of the wrong shape (not an object, ``choices`` not a list, a
content that is not a string, ...) raises ``openai.APIResponseValidationError``:
the endpoint is not speaking the protocol, and routing tries the next one.
(The SDK itself does not validate stream chunks; reading its models, such a
chunk used to escape as an ``AttributeError`` or ``TypeError``, which routing
took for a bug of the host's.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn, final

from juno_bind_trio.completion import StreamWatchdog, TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._reader import StreamReader, refuse_a_defect

if TYPE_CHECKING:
    import httpx2

__all__ = ["REASONING_FIELDS", "ChunkReader"]

REASONING_FIELDS: Final = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible providers put reasoning text in a delta (the SDK keeps it in
``model_extra``), in the order they are looked for."""

# The delta fields the SDK models (``ChoiceDelta``); any other key is a
# provider's own (``reasoning_content``), carried into the transcript.
_DELTA_FIELDS: Final = frozenset({"content", "function_call", "refusal", "role", "tool_calls"})


def _fold(held: dict[str, Any], fields: Mapping[str, Any]) -> None:
    # As the tool-call accumulator folds a call's own fields: a string or a list
    # continues what was held, any other value replaces it, None is absence.
    for key, value in fields.items():
        if value is None:
            continue
        before = held.get(key)
        if isinstance(before, str) and isinstance(value, str):
            held[key] = before + value
        elif isinstance(before, list) and isinstance(value, list):
            held[key] = [*before, *value]
        else:
            held[key] = value


def _reasoning_of(extra: Mapping[str, Any]) -> str | None:
    for field in REASONING_FIELDS:
        value = extra.get(field)
        if isinstance(value, str) and value:
            return value
    return None


def _count(value: object) -> int:
    return value if value.__class__ is int else 0


@final
class ChunkReader(StreamReader):
    """Folds one attempt's chunks into a
    [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult], feeding the text stream and
    the watchdog as they arrive.

    ``feed(chunk)`` per chunk, ``result(started)`` at the end of the stream.
    *response* is the HTTP response the chunks come in (the error a misshapen
    chunk raises carries it).
    """

    __slots__ = (
        "_content",
        "_fields",
        "_finish_reason",
        "_reasoning",
        "_refusal",
        "_response",
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
        self._reasoning: list[str] = []
        # Fields of the server's own on the assistant message (reasoning_content):
        # carried into the transcript, as the server sent them.
        self._fields: dict[str, Any] = {}
        self._finish_reason: str | None = None
        self._usage = (0, 0, 0, 0)

    def feed(self, chunk: object) -> None:
        """Fold one chunk in."""
        if chunk.__class__ is not dict:
            self._malformed("is not a JSON object", chunk, chunk)
        get = chunk.get
        choices = get("choices")
        if not choices:
            usage = get("usage")
            if usage is not None:
                self._usage = self._read_usage(usage)
            self._alive()
            return
        if choices.__class__ is not list:
            self._malformed("has choices that are not a list", choices, chunk)
        choice = choices[0]
        if choice.__class__ is not dict:
            self._malformed("has a choice that is not an object", choice, chunk)
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        elif delta.__class__ is not dict:
            self._malformed("has a delta that is not an object", delta, chunk)
        answered = False
        text = delta.get("content")
        if text:
            if text.__class__ is not str:
                self._malformed("has content that is not a string", text, chunk)
            self._content.append(text)
            observe = self._observe
            if observe is not None:
                observe(text)
            answered = True
        refusal = delta.get("refusal")
        if refusal:
            if refusal.__class__ is not str:
                self._malformed("has a refusal that is not a string", refusal, chunk)
            self._refusal.append(refusal)
            answered = True
        calls = delta.get("tool_calls")
        if calls:
            if calls.__class__ is not list:
                self._malformed("has tool_calls that are not a list", calls, chunk)
            self._accumulator.extend(calls)
            answered = True
        # Providers put reasoning in fields the SDK does not model; a chunk may
        # carry reasoning and answer together.
        thought = None
        if not _DELTA_FIELDS.issuperset(delta):
            extra = {k: v for k, v in delta.items() if k not in _DELTA_FIELDS}
            thought = _reasoning_of(extra)
            if thought is not None:
                self._reasoning.append(thought)
                reason = self._reason
                if reason is not None:
                    reason(thought)
            _fold(self._fields, extra)
        if answered:
            self._answer()
        elif thought is not None:
            self._thinking()
        else:
            self._alive()
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None:
            if finish_reason.__class__ is not str:
                self._malformed("has a finish_reason that is not a string", finish_reason, chunk)
            self._finish_reason = finish_reason
        usage = get("usage")
        if usage is not None:
            self._usage = self._read_usage(usage)

    def result(self, started: float) -> ModelTurnResult:
        """The turn the stream made, or the defect that makes it unusable.

        :raises CompletionDefectError: truncated, empty, filtered, or a tool
            call that cannot be assembled or parsed.
        """
        accumulator = self._accumulator
        content, refusal = self._content, self._refusal
        text_out = "".join(content) if content else None
        refusal_out = "".join(refusal) if refusal else None
        assembled = accumulator.assembled()
        # Each finished call is built once, here: the defect check parses its
        # arguments, and the loop, the receipts and the tool read that parse.
        calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
        refuse_a_defect(
            text_out, assembled if calls is None else calls, self._finish_reason, refusal_out
        )
        input_tokens, output_tokens, cached, reasoned = self._usage
        return ModelTurnResult(
            content=text_out if text_out is not None else refusal_out,
            tool_calls=accumulator.tool_calls() if calls is None else calls,
            extra=self._fields,
            reasoning="".join(self._reasoning) if self._reasoning else None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            reasoning_tokens=reasoned,
            time_to_first_token=self._time_to_first_token(started),
        )

    def _read_usage(self, usage: object) -> tuple[int, int, int, int]:
        # (input, output, cached of the input, reasoning of the output); a server
        # that leaves the details out (most compatible ones) reports none of either.
        if usage.__class__ is not dict:
            self._malformed("has a usage that is not an object", usage, usage)
        get = usage.get
        prompt = get("prompt_tokens_details")
        completion = get("completion_tokens_details")
        cached = _count(prompt.get("cached_tokens")) if prompt.__class__ is dict else 0
        reasoned = _count(completion.get("reasoning_tokens")) if completion.__class__ is dict else 0
        return _count(get("prompt_tokens")), _count(get("completion_tokens")), cached, reasoned

    def _malformed(self, what: str, value: object, chunk: object) -> NoReturn:
        import openai

        shown = repr(value)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        raise openai.APIResponseValidationError(
            response=self._response, body=chunk, message=f"a stream chunk {what}: {shown}"
        )
