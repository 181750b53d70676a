"""OpenTelemetry spans and the ``juno_bind_trio`` logger: the package's one instrumentation seam.

Spans follow the OpenTelemetry semantic conventions for generative AI:

* ``invoke_agent``: one per run, of a [`ToolLoop`][juno_bind_trio.loop.ToolLoop]
  or of an [`Agent`][juno_bind_trio.agent.Agent] (then ``invoke_agent {name}``,
  one span: the Agent's loop records on the span its Agent opened);
* ``chat {model}``: one per model attempt (so a fallback turn has several);
* ``execute_tool {name}``: one per tool call, including calls that never ran.

Only ``opentelemetry-api`` is used, and only when it is importable. Until a
host installs a real tracer provider (an SDK one), ``tracer()`` answers
``None`` and every call site skips its tracing work after one cheap check:
the API's proxy and no-op providers are recognised by type, and the tracer of
a real provider is cached against that provider.

Context: spans are made current with the API's context (contextvars), each
attached and detached in a ``finally`` in one task, so nothing stays current
past its span on either backend. The run span is current for the run; a chat
span for its attempt, while the stream is consumed too (so a host's HTTP
client spans, or spans a provider makes, nest under that attempt); a tool span
for that one call, so a pool worker that claims a second call sees the
batch's context again, never the previous call's span. A sub-agent run
started inside a tool therefore parents under that tool's span.

Message content (prompts, completions, tool arguments and results) is off by
default; set ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` to
record it, as the conventions propose. The variable is read once per run,
when the run's span starts: a change takes effect at the next run, and a run
records content on all of its spans or on none. (A model turn or tool batch
traced outside any run reads it when that turn or batch starts.)
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, final

from juno_bind_trio._calls import assistant_message

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, Status, StatusCode

    _HAVE_API = True
except ImportError:  # pragma: no cover - the API is an optional dependency
    _HAVE_API = False

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "logger",
]

logger: Final = logging.getLogger("juno_bind_trio")
"""The package's logger: route decisions and cancellations at INFO, never WARNING on success."""

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` to record message content on spans (off by default)."""

_SCOPE: Final = "juno_bind_trio"
_cached_provider: object = None
_cached_tracer: Tracer | None = None
# A provider used instead of the global one (tests install one per test here,
# since the API lets the global provider be set only once per process).
_provider_override: Any = None


def tracer() -> Tracer | None:
    """The package's tracer, or ``None`` when no real tracer provider is installed."""
    if not _HAVE_API:  # pragma: no cover - the API is an optional dependency
        return None
    global _cached_provider, _cached_tracer
    provider = _provider_override or _otel_trace.get_tracer_provider()
    if provider is _cached_provider:
        return _cached_tracer
    if isinstance(provider, (ProxyTracerProvider, NoOpTracerProvider)):
        found: Tracer | None = None
    else:
        found = provider.get_tracer(_SCOPE)
    _cached_provider, _cached_tracer = provider, found
    return found


def capture_content() -> bool:
    """Whether message content goes on spans (the conventions' opt-in variable), read now.

    Read once per run, by ``run_span``; the spans of a run ask ``_run_captures()``.
    """
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def _as_json(value: object) -> str:
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _end(
    span: Span,
    attributes: Mapping[str, Any] | None = None,
    *,
    error: str | None = None,
    description: str | None = None,
    end_time: int | None = None,
    end: bool = True,
) -> None:
    """Write *attributes* on *span*, mark it failed when *error* is given, and end it.

    A failure is the conventions' ``error.type`` attribute with an ERROR status.
    With ``end=False`` the span stays open (its owner ends it later).
    """
    if attributes:
        span.set_attributes(attributes)
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, description))
    if end:
        span.end(end_time=end_time)


def _error_of(exc: BaseException) -> tuple[str, str | None]:
    """``(error.type, description)`` for what left a span: a cancellation is ``cancelled``."""
    if isinstance(exc, Exception):
        return type(exc).__qualname__, str(exc) or None
    return ("cancelled" if _is_cancel(exc) else type(exc).__qualname__), None


@contextmanager
def current(span: Span) -> Iterator[None]:
    """*span* is the current span for the body, and is not once the body is left."""
    token = _otel_context.attach(_otel_trace.set_span_in_context(span))
    try:
        yield
    finally:
        _otel_context.detach(token)


# --- the run span ---------------------------------------------------------------------------


@final
class _Held:
    """The run whose span is open in this context: its id, that span, whether the run
    records message content (read when the span started), and the agent speaking when
    the run has handoffs (``None`` otherwise). One object shared by every task of the
    run, so that a handoff made in one is seen by the spans the others start."""

    __slots__ = ("captures", "run_id", "span", "speaking")

    def __init__(self, run_id: str, span: Span, captures: bool) -> None:
        self.run_id = run_id
        self.span = span
        self.captures = captures
        self.speaking: str | None = None


# A loop that runs for a run which already has its span (the Agent's) records on it,
# never opens a second.
_RUN: ContextVar[_Held | None] = ContextVar("juno_bind_trio.run_span", default=None)


def _run_captures() -> bool:
    """Whether the run this context is in records message content; read now if in none."""
    held = _RUN.get()
    return capture_content() if held is None else held.captures


def run_speaking(agent: str | None) -> None:
    """The agent speaking in the run this context is in, from now on (a run with handoffs):
    its ``chat`` and ``execute_tool`` spans carry it as ``gen_ai.agent.name``, and the
    run's span as ``juno.agent.in_charge``. A no-op outside a traced run."""
    held = _RUN.get()
    if held is not None and agent is not None:
        held.speaking = agent
        held.span.set_attribute("juno.agent.in_charge", agent)


def _speaking(attributes: dict[str, Any]) -> dict[str, Any]:
    held = _RUN.get()
    if held is not None and held.speaking is not None:
        attributes["gen_ai.agent.name"] = held.speaking
    return attributes


@contextmanager
def run_span(run_id: str, *, agent: str | None = None) -> Iterator[Span | None]:
    """The run's ``invoke_agent`` span, current for the body; ``None`` when tracing is off.

    If this context already holds the span of run *run_id* (an Agent opened
    it around its loop), that span is yielded as it is and stays its opener's
    to end. Otherwise a span starts, named ``invoke_agent {agent}`` (plain
    ``invoke_agent`` for a loop with no agent); an exception leaving the body
    marks it failed (a cancellation as ``error.type = "cancelled"``) and is
    re-raised unchanged.
    """
    found = tracer()
    if found is None:
        yield None
        return
    held = _RUN.get()
    if held is not None and held.run_id == run_id:
        yield held.span
        return
    attributes: dict[str, str] = {"gen_ai.operation.name": "invoke_agent"}
    if agent is not None:
        attributes["gen_ai.agent.name"] = agent
    attributes["gen_ai.conversation.id"] = run_id
    span = found.start_span(
        "invoke_agent" if agent is None else f"invoke_agent {agent}",
        kind=_otel_trace.SpanKind.INTERNAL,
        attributes=attributes,
    )
    marker = _RUN.set(_Held(run_id, span, capture_content()))
    try:
        with current(span):
            yield span
    except BaseException as exc:
        error, description = _error_of(exc)
        _end(span, error=error, description=description, end=False)
        raise
    finally:
        _RUN.reset(marker)
        span.end()


def _is_cancel(exc: BaseException) -> bool:
    # trio.Cancelled, asyncio.CancelledError, or a group of them.
    name = type(exc).__name__
    if name in ("Cancelled", "CancelledError"):
        return True
    inner = getattr(exc, "exceptions", None)
    return isinstance(inner, tuple) and bool(inner) and all(_is_cancel(e) for e in inner)


def run_event(name: str, attributes: Mapping[str, str | int] | None = None) -> None:
    """An event on the span of the run this context is in; a no-op when there is none."""
    held = _RUN.get()
    if held is not None:
        held.span.add_event(name, attributes=dict(attributes or {}))


# --- model attempts ---------------------------------------------------------------------------


class AttemptSpans:
    """A turn's ``chat`` spans, one per attempt, ended once routing decided what came next.

    The route executor decides the action after the attempt function has
    returned, so a returned attempt's span stays open (its end time already
    taken) until ``settle()`` writes the action on it.
    """

    __slots__ = ("_capture", "_open", "_tracer")

    def __init__(self, found: Tracer) -> None:
        self._tracer = found
        self._capture = _run_captures()
        self._open: list[tuple[Span, int]] = []  # (span, end time in ns) per returned attempt

    def start(
        self,
        *,
        provider: str,
        model: str,
        attempt: int,
        messages: object,
        server: tuple[str, int] | None = None,
    ) -> Span:
        # gen_ai.provider.name is the API spoken (the conventions' well-known
        # value for the OpenAI API); which of the plan's endpoints answered is
        # juno.route.provider, and where it is, server.address / server.port.
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "juno.route.provider": provider,
            "juno.route.attempt": attempt,
        }
        if server is not None:
            attributes["server.address"], attributes["server.port"] = server
        span = self._tracer.start_span(
            f"chat {model}", kind=_otel_trace.SpanKind.CLIENT, attributes=_speaking(attributes)
        )
        if self._capture:
            span.set_attribute("gen_ai.input.messages", _as_json(messages))
        return span

    def succeeded(
        self,
        span: Span,
        *,
        content: str | None,
        tool_calls: Sequence[object],
        input_tokens: int,
        output_tokens: int,
        resets: int,
    ) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.response.finish_reasons": ("tool_calls",) if tool_calls else ("stop",),
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
        }
        if self._capture:
            # The message the loop appends for this turn, by the same builder.
            attributes["gen_ai.output.messages"] = _as_json(
                [assistant_message(content, tool_calls)]
            )
        self._returned(span, resets, attributes)

    def failed(
        self,
        span: Span,
        *,
        error_type: str,
        reason: str,
        verdict: str,
        produced_output: bool,
        resets: int,
    ) -> None:
        attributes = {"juno.route.verdict": verdict, "juno.route.produced_output": produced_output}
        self._returned(span, resets, attributes, error_type, reason or None)

    def _returned(
        self,
        span: Span,
        resets: int,
        attributes: Mapping[str, Any],
        error: str | None = None,
        description: str | None = None,
    ) -> None:
        # The attempt returned: its end time is now, its span ends in settle().
        if resets:
            span.add_event("juno.text_stream.reset", {"juno.text_stream.resets": resets})
        _end(span, attributes, error=error, description=description, end=False)
        self._open.append((span, time.time_ns()))

    @staticmethod
    def raised(span: Span, exc: BaseException) -> None:
        """The attempt raised (a cancellation, or an unclassified error): end it now."""
        _end(span, error=_error_of(exc)[0])

    def settle(self, attempts: Sequence[Any]) -> None:
        """Write routing's action on each returned attempt and end its span.

        *attempts* is the route's trail
        ([`AttemptRecord`][juno_bind_trio.routing.AttemptRecord]s, in order), one per
        attempt that returned.
        """
        opened = self._open
        for (span, ended), record in zip(opened, attempts, strict=False):
            action = record.action
            attributes: dict[str, str] = {}
            if action is not None:
                attributes["juno.route.action"] = action.name.lower()
                span.add_event("juno.route.decision", attributes | _adjusted(record))
            _end(span, attributes | _adjusted(record), end_time=ended)
        self._open = opened[len(attempts) :]
        self.abandon()

    def abandon(self) -> None:
        """End whatever is still open (the route raised), as it stands."""
        for span, ended in self._open:
            _end(span, end_time=ended)
        self._open = []


def _adjusted(record: Any) -> dict[str, str]:
    return {"juno.route.adjusted": record.adjusted} if record.adjusted else {}


# --- tool calls -------------------------------------------------------------------------------


class ToolSpans:
    """One batch's ``execute_tool`` spans, keyed by call id.

    ``start()`` opens a call's span and makes it current; the loop's
    ``finally`` detaches it in the same task (taking the call's end time), and
    the span is ended when the loop settles the call's answer, with its end
    state: ``finished``, ``failed`` (with its kind), ``interrupted`` or
    ``not_run``. A call that never started gets a span of its own then.
    """

    __slots__ = ("_capture", "_open", "_tracer")

    def __init__(self, found: Tracer) -> None:
        self._tracer = found
        self._capture = _run_captures()
        self._open: dict[str, tuple[Span, int | None]] = {}

    def _span(self, call_id: str, name: str) -> Span:
        return self._tracer.start_span(
            f"execute_tool {name}",
            kind=_otel_trace.SpanKind.INTERNAL,
            attributes=_speaking(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                }
            ),
        )

    def start(self, call_id: str, name: str, arguments: str) -> object:
        span = self._span(call_id, name)
        if self._capture:
            span.set_attribute("gen_ai.tool.call.arguments", arguments)
        self._open[call_id] = (span, None)
        return _otel_context.attach(_otel_trace.set_span_in_context(span))

    def stop(self, call_id: str, token: object) -> None:
        """The call's task left it (however): detach its context, keep its end time."""
        _otel_context.detach(token)  # type: ignore[arg-type]
        held = self._open.get(call_id)
        if held is not None:
            self._open[call_id] = (held[0], time.time_ns())

    def settle(
        self, call_id: str, name: str, state: str, kind: str | None, content: object
    ) -> None:
        """End the call's span with its end state (making one for a call that never ran)."""
        held = self._open.pop(call_id, None)
        span, ended = (self._span(call_id, name), None) if held is None else held
        attributes: dict[str, str] = {"juno.tool.end_state": state}
        if kind is not None:
            attributes["juno.tool.failure_kind"] = kind
        if self._capture and content is not None:
            attributes["gen_ai.tool.call.result"] = _as_json(content)
        failed = state in ("failed", "interrupted")
        _end(span, attributes, error=(kind or state) if failed else None, end_time=ended)
