"""One streamed chat completion over ``openai.AsyncOpenAI``, read the way routing needs it.

What the SDK gives and what a turn needs are different things. The SDK gives
a stream of chunks and raises on some failures; a turn needs an assistant
message it can act on, or an exception that says *which* failure happened,
so that routing can decide between "ask again", "ask someone else" and
"stop". The gaps this function closes:

* **Silence.** The SDK's read timeout is an idle limit per socket read and
  knows nothing about what the bytes mean. The stream is read inside a
  [`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] that is entered *before*
  the request is sent, so its first-token budget covers connecting and
  waiting for headers too, which is where a queued request spends its time.
* **Silent truncation.** A body that ends cleanly without ``[DONE]`` raises
  nothing in the SDK; the only trace is a missing finish reason. Every
  completion goes through
  [`detect_completion_defect()`][juno_bind_trio.completion.detect_completion_defect], so a cut-off,
  empty or filtered completion becomes a
  [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], which routing retries.
* **Tool calls in pieces.** Deltas are folded by a
  [`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator], which refuses
  contradictory pieces instead of gluing two calls together.
* **Live text.** Content deltas go to the turn's
  [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream], if it has one, as they
  arrive; reasoning deltas to its ``reasoning()`` and tool-call fragments to its
  ``tool_call_delta()``, which reach only a sink that shows them (see the
  stream's own notes on both).
* **Sockets.** The stream is always used in ``async with``: under Trio the
  SDK's finaliser cannot close an abandoned connection, so one left to the
  garbage collector leaks until then. A cancellation or a stall leaves the
  ``async with`` and closes the connection at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import anyio

from juno_bind_trio._blocking import check_model_request
from juno_bind_trio._options import RESERVED_REQUEST_OPTIONS
from juno_bind_trio._validate import error_kind
from juno_bind_trio.completion import (
    DEFAULT_INTER_CHUNK_TIMEOUT,
    DEFAULT_TIME_TO_FIRST_TOKEN,
    AssembledCompletion,
    StreamWatchdog,
    ToolCallAccumulator,
    TurnTextStream,
    detect_completion_defect,
)
from juno_bind_trio.loop import ModelTurnResult

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionChunk

__all__ = ["REASONING_FIELDS", "check_client", "stream_chat_completion"]

REASONING_FIELDS: Final = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible providers put reasoning text in a delta (the SDK keeps it in
``model_extra``), in the order they are looked for."""


def check_client(function: str, client: object) -> openai.AsyncOpenAI:
    """Refuse a client that is not an ``AsyncOpenAI`` with its own retries off."""
    import openai

    if not isinstance(client, openai.AsyncOpenAI):
        raise TypeError(f"{function}: client must be an openai.AsyncOpenAI, got {client!r}")
    if client.max_retries != 0:
        # The SDK retries 429s, 5xx and refused connections itself, honouring
        # retry-after for up to two minutes, before routing hears of them: a
        # dead provider would cost minutes before the fallback is even tried,
        # and the circuit breaker would never see the failures.
        raise ValueError(
            f"{function}: the client must be created with max_retries=0 so that routing, not "
            f"the SDK, decides what to retry; got max_retries={client.max_retries}"
        )
    return client


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


def _reasoning_of(delta: Any) -> str | None:
    extra = delta.model_extra
    if not extra:
        return None
    for field in REASONING_FIELDS:
        value = extra.get(field)
        if isinstance(value, str) and value:
            return value
    return None


async def stream_chat_completion(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
    text_stream: TurnTextStream | None = None,
    time_to_first_token: float = DEFAULT_TIME_TO_FIRST_TOKEN,
    inter_chunk_timeout: float = DEFAULT_INTER_CHUNK_TIMEOUT,
    request_options: Mapping[str, Any] | None = None,
) -> ModelTurnResult:
    """Stream one chat completion and return it as a
    [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult].

    One *attempt*: no routing, no retry. It raises what went wrong, for
    [`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error] to judge:
    the SDK's
    own exceptions (``APIConnectionError``, ``RateLimitError``, a mid-stream
    ``APIError``, ``json.JSONDecodeError`` for a garbled chunk, …),
    [`StreamStallError`][juno_bind_trio.StreamStallError] when a watchdog budget runs out,
    and [`CompletionDefectError`][juno_bind_trio.CompletionDefectError] (including
    [`ToolCallAssemblyError`][juno_bind_trio.ToolCallAssemblyError]) for a completion that
    arrived but cannot be used. Cancellation propagates untouched, and the
    connection is closed on the way out.

    :param client: an ``AsyncOpenAI`` created with ``max_retries=0`` (see
        [`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client]).
    :param text_stream: the turn's text stream; this function calls
        ``observe()`` for every content delta and nothing else. Opening the
        attempt (``begin_attempt()``) is the caller's job, because only the
        caller knows where an attempt starts.
    :param time_to_first_token: the watchdog's budget from sending the
        request to the first answer chunk, in seconds.
    :param inter_chunk_timeout: the watchdog's budget between chunks.
    :param request_options: more arguments for
        ``client.chat.completions.create`` (``temperature``,
        ``response_format``, ``extra_headers``, …).

    A refusal with no content is returned as the content: it is the model's
    answer, and the transcript has to carry it.
    """
    check_client("stream_chat_completion", client)
    if not isinstance(model, str) or not model:  # type: ignore[redundant-expr]
        raise error_kind(model, str)(
            f"stream_chat_completion: model must be a non-empty string, got {model!r}"
        )
    if text_stream is not None and not isinstance(text_stream, TurnTextStream):
        raise TypeError(
            f"stream_chat_completion: text_stream must be a TurnTextStream or None, "
            f"got {text_stream!r}"
        )
    options: dict[str, Any] = {}
    if request_options is not None:
        if not isinstance(request_options, Mapping):
            raise TypeError(
                f"stream_chat_completion: request_options must be a mapping, "
                f"got {request_options!r}"
            )
        clash = sorted(RESERVED_REQUEST_OPTIONS.intersection(request_options))
        if clash:
            raise ValueError(
                f"stream_chat_completion: request_options must not set {clash!r}; "
                "they are this function's own arguments"
            )
        options.update(request_options)
    options.setdefault("stream_options", {"include_usage": True})
    if tools:
        options["tools"] = list(tools)

    check_model_request("openai", model)
    observe = text_stream.observe if text_stream is not None else None
    reason = text_stream.reasoning if text_stream is not None else None
    # Each fragment also goes to the text stream, for a surface that shows
    # arguments as they arrive (it is a no-op for any other).
    accumulator = ToolCallAccumulator(
        on_delta=text_stream.tool_call_delta if text_stream is not None else None
    )
    content: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    # Fields of the server's own on the assistant message (reasoning_content):
    # carried into the transcript, as the server sent them.
    fields: dict[str, Any] = {}
    finish_reason: str | None = None
    input_tokens = output_tokens = cached = reasoned = 0
    started = anyio.current_time()

    with StreamWatchdog(time_to_first_token, inter_chunk_timeout) as watchdog:
        # **options defeats the SDK's overloads; stream=True always returns a stream.
        stream = cast(
            "openai.AsyncStream[ChatCompletionChunk]",
            await client.chat.completions.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                stream=True,
                **options,
            ),
        )
        # Bound once: this loop runs per chunk, and a long answer is thousands.
        answer, alive, thinking = watchdog.answer, watchdog.chunk, watchdog.reasoning
        add_text, add_calls = content.append, accumulator.extend
        async with stream:
            _refuse_a_body_that_is_not_a_stream(stream)
            async for chunk in stream:
                choices = chunk.choices
                if not choices:
                    usage = chunk.usage
                    if usage is not None:
                        input_tokens, output_tokens, cached, reasoned = _usage(usage)
                    alive()
                    continue
                choice = choices[0]
                delta = choice.delta
                text = delta.content
                answered = False
                if text:
                    add_text(text)
                    if observe is not None:
                        observe(text)
                    answered = True
                if delta.refusal:
                    refusal.append(delta.refusal)
                    answered = True
                if delta.tool_calls:
                    add_calls(delta.tool_calls)
                    answered = True
                # Providers put reasoning in fields the SDK does not model; a
                # chunk may carry reasoning and answer together.
                extra = delta.model_extra
                thought = _reasoning_of(delta) if extra else None
                if thought is not None:
                    reasoning.append(thought)
                    if reason is not None:
                        reason(thought)
                if extra:
                    _fold(fields, extra)
                if answered:
                    answer()
                elif thought is not None:
                    thinking()
                else:
                    alive()
                if choice.finish_reason is not None:
                    finish_reason = choice.finish_reason
                if chunk.usage is not None:
                    input_tokens, output_tokens, cached, reasoned = _usage(chunk.usage)

    first_answer_at = watchdog.statistics().first_answer_at
    text_out = "".join(content) if content else None
    refusal_out = "".join(refusal) if refusal else None
    assembled = accumulator.assembled()
    # Each finished call is built once, here: the defect check parses its
    # arguments, and the loop, the receipts and the tool read that parse.
    calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
    completion = AssembledCompletion(
        content=text_out,
        tool_calls=assembled if calls is None else calls,
        finish_reason=finish_reason,
        refusal=refusal_out,
    )
    defect = detect_completion_defect(completion)
    if defect is not None:
        raise defect.as_error()
    return ModelTurnResult(
        content=text_out if text_out is not None else refusal_out,
        tool_calls=accumulator.tool_calls() if calls is None else calls,
        extra=fields,
        reasoning="".join(reasoning) if reasoning else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached,
        reasoning_tokens=reasoned,
        time_to_first_token=None if first_answer_at is None else first_answer_at - started,
    )


def _usage(usage: Any) -> tuple[int, int, int, int]:
    # (input, output, cached of the input, reasoning of the output); a server
    # that leaves the details out (most compatible ones) reports none of either.
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    cached = (prompt.cached_tokens or 0) if prompt is not None else 0
    reasoned = (completion.reasoning_tokens or 0) if completion is not None else 0
    return usage.prompt_tokens, usage.completion_tokens, cached, reasoned


def _refuse_a_body_that_is_not_a_stream(stream: openai.AsyncStream[ChatCompletionChunk]) -> None:
    # An endpoint that is not an OpenAI-compatible API (a login page, a proxy's
    # error page) can answer 200 with HTML. The SDK would read it as an event
    # stream with no events, and the empty completion would look truncated and
    # be retried as a defect. Say what it is: the endpoint's fault, next candidate.
    import openai

    content_type = stream.response.headers.get("content-type", "")
    if content_type and "event-stream" not in content_type.lower():
        raise openai.APIResponseValidationError(
            response=stream.response,
            body=None,
            message=(
                f"the endpoint answered {stream.response.status_code} with Content-Type "
                f"{content_type.split(';')[0].strip()!r}, not an event stream: is the base URL "
                "an OpenAI-compatible API?"
            ),
        )
