"""A routed model turn over any providers: the piece a ``ToolLoop`` calls.

The composition, in one place, that every host streaming through routing has
to get right, whichever provider serves the attempt:

1. The route executor walks the plan and calls the **attempt function** once
   per attempt (same-endpoint retries, next provider, fallback model). Each
   candidate's ``provider`` names the [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter]
   that serves it, so one plan can fall back from Anthropic to OpenAI mid-stream.
2. The attempt function opens the attempt on the turn's text stream
   (``begin_attempt()``) *first*, before anything can fail, so that a retry's
   first byte replaces the failed attempt's partial text (and reasoning)
   instead of being appended to it, whichever provider the retry goes to.
3. It hands the adapter the transcript with every *other* provider's state
   removed (a signature means nothing to a provider that did not sign it, and
   a wire that does not know the field refuses it), streams one turn, and
   turns whatever that raised into the adapter's classified
   [`AttemptFailure`][juno_bind_trio.routing.AttemptFailure], carrying the stream's
   ``produced_output`` so that routing stops only when the text reached a
   surface that cannot be retracted.
4. The turn owns the stream, not the attempt: the ``ToolLoop`` builds it per
   turn and finishes it however the turn ended, which is the one lifetime
   rule an attempt function cannot enforce.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias, final

import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._blocking import check_model_request
from juno_bind_trio._options import (
    RESERVED_REQUEST_OPTIONS,
    candidate_option_clashes,
    checked_request_options,
)
from juno_bind_trio._validate import error_kind, real_number, shown
from juno_bind_trio.completion import (
    DEFAULT_INTER_CHUNK_TIMEOUT,
    DEFAULT_TIME_TO_FIRST_TOKEN,
    TurnTextStream,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.routing import (
    AttemptFailure,
    AttemptFn,
    AttemptSuccess,
    Candidate,
    CircuitBreaker,
    ClassifiedError,
    RouteCursor,
    RoutePlan,
    RouteResult,
    execute_route_plan,
)

from ._adapter import PROVIDER_STATE_KEY, ProviderAdapter, ProviderRequest

__all__ = [
    "Classifier",
    "OnRoute",
    "RoutedModel",
    "Router",
    "messages_for",
]

Classifier: TypeAlias = Callable[[Exception, Candidate, RouteCursor], ClassifiedError]
"""``(error, candidate, cursor) -> ClassifiedError``: the shape of
[`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error]."""

OnRoute: TypeAlias = Callable[[RouteResult[ModelTurnResult]], None]


def _log_route(result: RouteResult[ModelTurnResult]) -> None:
    # Route decisions at INFO (never WARNING: a fallback that answered is a success).
    log = _tracing.logger
    if not log.isEnabledFor(20):  # logging.INFO
        return
    for record in result.attempts:
        if record.action is None:
            continue
        error = record.error
        log.info(
            "route: %s from %s failed (%s): %s%s",
            record.cursor.model,
            record.candidate.provider,
            type(error).__qualname__,
            record.action.name.lower(),
            f" ({record.adjusted})" if record.adjusted else "",
        )
    log.info("route: %s after %d attempt(s)", result.status, len(result.attempts))


def messages_for(name: str, messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """*messages* as adapter *name* may see them: its own provider state kept, anyone else's gone.

    The transcript itself is not touched; a message that loses its state is a
    copy, and a transcript with no foreign state is returned as it is.
    """
    given: object = messages
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise TypeError(f"messages_for: messages must be a sequence of dicts, got {shown(given)}")
    named: object = name
    if not isinstance(named, str) or not named:
        raise error_kind(named, str)(
            f"messages_for: name must be a non-empty str, got {shown(name)}"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"messages_for: messages[{index}] must be a dict, got {shown(message)}")
    if not any(PROVIDER_STATE_KEY in message for message in messages):
        return messages
    out: list[Mapping[str, Any]] = []
    for message in messages:
        state = message.get(PROVIDER_STATE_KEY, _ABSENT)
        foreign = not (isinstance(state, Mapping) and state.get("provider") == name)
        if state is not _ABSENT and foreign:
            message = {k: v for k, v in message.items() if k != PROVIDER_STATE_KEY}
        out.append(message)
    return out


_ABSENT: Any = object()


@final
@attrs.define(eq=False, kw_only=True)
class Router:
    """The routing core shared by ``RoutedModel`` and ``OpenAIChatModel``: checked by them."""

    plan: RoutePlan
    adapters: Mapping[str, ProviderAdapter]
    breaker: CircuitBreaker | None
    time_to_first_token: float
    inter_chunk_timeout: float
    request_options: Mapping[str, Any]
    on_route: OnRoute | None
    # One cell shared with every model derived by with_request_options: an
    # Agent derives its own, and the host reads last_route on the one it built.
    last_route: list[RouteResult[ModelTurnResult] | None] = attrs.field(factory=lambda: [None])

    def derive(self, request_options: Mapping[str, Any]) -> Router:
        """This router with other request options, sharing its ``last_route`` cell."""
        return attrs.evolve(self, request_options=MappingProxyType(dict(request_options)))

    def attempt_function(
        self,
        owner: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        text_stream: TurnTextStream | None,
        spans: _tracing.AttemptSpans | None,
    ) -> AttemptFn[ModelTurnResult]:
        if text_stream is not None and not isinstance(text_stream, TurnTextStream):
            raise TypeError(
                f"{owner}.attempt_function: text_stream must be a TurnTextStream or None, "
                f"got {text_stream!r}"
            )

        async def attempt(
            candidate: Candidate, cursor: RouteCursor
        ) -> AttemptSuccess[ModelTurnResult] | AttemptFailure:
            # First, before anything can fail: this is what arms the reset that
            # wipes the previous attempt's partial text on this one's first byte.
            if text_stream is not None:
                text_stream.begin_attempt()
            adapter = self.adapters[candidate.provider]
            # testing.block_model_requests: every adapter's request is refused here.
            check_model_request(adapter.name, cursor.model)
            options = self.request_options
            if candidate.options:
                options = {**options, **candidate.options}
            request = ProviderRequest(
                model=cursor.model,
                messages=messages_for(adapter.name, messages),
                tools=tools,
                options=options,
                text_stream=text_stream,
                time_to_first_token=self.time_to_first_token,
                inter_chunk_timeout=self.inter_chunk_timeout,
            )
            if spans is not None:
                return await self._traced_attempt(spans, adapter, candidate, cursor, request)
            try:
                value = await adapter.stream_turn(request)
            except Exception as exc:  # cancellation is a BaseException and passes
                return _failure(adapter, exc, candidate, cursor, text_stream)
            return AttemptSuccess(value)

        return attempt

    async def _traced_attempt(
        self,
        spans: _tracing.AttemptSpans,
        adapter: ProviderAdapter,
        candidate: Candidate,
        cursor: RouteCursor,
        request: ProviderRequest,
    ) -> AttemptSuccess[ModelTurnResult] | AttemptFailure:
        # The same attempt as the untraced path, with its chat span around it,
        # current while the attempt runs (the stream is consumed in this task):
        # spans of a host's HTTP client instrumentation nest under the attempt.
        text_stream = request.text_stream
        resets = text_stream.reset_count if text_stream is not None else 0
        span = spans.start(
            provider=candidate.provider,
            model=cursor.model,
            attempt=cursor.attempt,
            messages=request.messages,
            server=adapter.server,
        )
        with _tracing.current(span):
            try:
                value = await adapter.stream_turn(request)
            except Exception as exc:
                try:
                    failure = _failure(adapter, exc, candidate, cursor, text_stream)
                except BaseException as raised:
                    spans.raised(span, raised)
                    raise
                verdict = failure.error
                spans.failed(
                    span,
                    error_type=type(verdict.cause).__qualname__,
                    reason=verdict.reason,
                    verdict=verdict.action.name.lower(),
                    produced_output=failure.produced_output,
                    resets=(text_stream.reset_count if text_stream is not None else 0) - resets,
                )
                return failure
            except BaseException as exc:
                spans.raised(span, exc)
                raise
        spans.succeeded(
            span,
            content=value.content,
            tool_calls=value.tool_calls,
            input_tokens=value.input_tokens,
            output_tokens=value.output_tokens,
            resets=(text_stream.reset_count if text_stream is not None else 0) - resets,
        )
        return AttemptSuccess(value)

    async def route(
        self,
        owner: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        text_stream: TurnTextStream | None,
    ) -> RouteResult[ModelTurnResult]:
        found = _tracing.tracer()
        spans = None if found is None else _tracing.AttemptSpans(found)
        attempt = self.attempt_function(owner, messages, tools, text_stream, spans)
        try:
            result = await execute_route_plan(self.plan, attempt, breaker=self.breaker)
        except BaseException:
            if spans is not None:
                spans.abandon()
            raise
        if spans is not None:
            spans.settle(result.attempts)
        if len(result.attempts) > 1 or not result.ok:
            _log_route(result)
        self.last_route[0] = result
        if self.on_route is not None:
            self.on_route(result)
        return result


def _failure(
    adapter: ProviderAdapter,
    exc: Exception,
    candidate: Candidate,
    cursor: RouteCursor,
    text_stream: TurnTextStream | None,
) -> AttemptFailure:
    # What an attempt that raised becomes, traced or not: the verdict on its
    # exception, and whether the reader was already shown its text. Reasoning
    # does not count: a retractable reader withdraws it with the text, and a
    # permanent one that rendered it said so when the stream latched.
    produced = text_stream.produced_output if text_stream is not None else False
    return AttemptFailure(adapter.classify(exc, candidate, cursor), produced_output=produced)


# --- the public model --------------------------------------------------------------------


def _check_seconds(owner: str, name: str, value: object) -> float:
    seconds = real_number(value)
    if seconds is None or not seconds > 0:
        raise ValueError(
            f"{owner}: {name} must be a positive number of seconds, got {shown(value)}"
        )
    return seconds


def check_model_settings(
    owner: str,
    plan: object,
    providers: Mapping[str, object],
    breaker: object,
    on_route: object,
    *,
    held: str = "adapter",
) -> RoutePlan:
    """The checks a routed model makes at construction, whoever builds it (*owner* names it)."""
    if not isinstance(plan, RoutePlan):
        raise TypeError(f"{owner}: plan must be a RoutePlan, got {plan!r}")
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise TypeError(f"{owner}: breaker must be a CircuitBreaker or None, got {breaker!r}")
    if on_route is not None and not callable(on_route):
        raise TypeError(f"{owner}: on_route must be callable or None, got {on_route!r}")
    # Found at start-up, not on the first 503 that reaches the second stage.
    named = {c.provider for stage in plan.stages for c in stage.candidates}
    missing = sorted(named - set(providers))
    if missing:
        raise ValueError(
            f"{owner}: no {held} for provider(s) {missing!r} named in the plan; "
            f"{held}s has {sorted(providers)!r}"
        )
    for provider, model, clash in candidate_option_clashes(plan, RESERVED_REQUEST_OPTIONS):
        raise ValueError(
            f"{owner}: the options of candidate {provider!r} for "
            f"{model!r} set {clash!r}, which every request sets itself"
        )
    for stage in plan.stages:
        for candidate in stage.candidates:
            # Merged over the request's options for this candidate's attempts: the
            # same check as a model's own request_options, not a TypeError from
            # inside the first request this candidate sends.
            extra_body = candidate.options.get("extra_body")
            if extra_body is not None and not isinstance(extra_body, Mapping):
                raise TypeError(
                    f"{owner}: the options of candidate {candidate.provider!r} for "
                    f"{stage.model!r} set extra_body to {shown(extra_body)}; it must be a "
                    "mapping of JSON properties or None"
                )
    return plan


def _check_adapters(given: object) -> dict[str, ProviderAdapter]:
    if not isinstance(given, Mapping):
        raise TypeError(
            f"RoutedModel: adapters must be a mapping of provider name to ProviderAdapter, "
            f"got {shown(given)}"
        )
    adapters: dict[str, ProviderAdapter] = {}
    for provider, adapter in given.items():
        if not isinstance(provider, str) or not provider:
            raise error_kind(provider, str)(
                f"RoutedModel: adapters' keys must be provider names, got {shown(provider)}"
            )
        if not isinstance(adapter, ProviderAdapter):
            raise TypeError(
                f"RoutedModel: adapters[{provider!r}] must be a ProviderAdapter (name, server, "
                f"stream_turn, classify), got {shown(adapter)}"
            )
        adapters[provider] = adapter
    return adapters


@final
class RoutedModel:
    """Routes each model turn over a plan whose candidates name provider adapters.

    ```python
    model = RoutedModel(
        plan=RoutePlan([
            RouteStage("claude-sonnet-4-5", [Candidate("anthropic")]),
            RouteStage("gpt-4o-mini", [Candidate("openai")]),
        ]),
        adapters={"anthropic": AnthropicAdapter(claude), "openai": OpenAIChatAdapter(gpt)},
    )
    loop = ToolLoop(call_model=model, ...)
    ```

    * *plan*: the [`RoutePlan`][juno_bind_trio.routing.RoutePlan]; every ``Candidate.provider``
      it names must be a key of *adapters*.
    * *adapters*: a [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter] per provider
      name. They wrap clients the model does not own: close them where you opened them.
    * *breaker*: an optional [`CircuitBreaker`][juno_bind_trio.routing.CircuitBreaker] shared by
      every turn that routes through these endpoints.
    * *time_to_first_token*, *inter_chunk_timeout*: the stream watchdog's budgets.
    * *request_options*: options for every attempt (``temperature``,
      ``max_tokens``, ``response_format``, ...), each adapter reading what its
      wire knows; a candidate's ``options`` are merged over them for its
      attempts. ``model``, ``messages``, ``tools``, ``stream`` and ``n`` are refused.
    * *on_route*: called with each turn's [`RouteResult`][juno_bind_trio.routing.RouteResult],
      synchronously, before the turn returns or raises.

    A failure mid-stream falls back like any other: the reader's text stream is
    reset on the fallback's first byte, whichever provider sends it, and the
    transcript the fallback sees has no state of the provider that failed.
    """

    __slots__ = ("_adapters", "_router")

    def __init__(
        self,
        *,
        plan: RoutePlan,
        adapters: Mapping[str, ProviderAdapter],
        breaker: CircuitBreaker | None = None,
        time_to_first_token: float = DEFAULT_TIME_TO_FIRST_TOKEN,
        inter_chunk_timeout: float = DEFAULT_INTER_CHUNK_TIMEOUT,
        request_options: Mapping[str, Any] | None = None,
        on_route: OnRoute | None = None,
    ) -> None:
        owner = "RoutedModel"
        checked = _check_adapters(adapters)
        self._adapters = MappingProxyType(checked)
        self._router = Router(
            plan=check_model_settings(owner, plan, checked, breaker, on_route),
            adapters=self._adapters,
            breaker=breaker,
            time_to_first_token=_check_seconds(owner, "time_to_first_token", time_to_first_token),
            inter_chunk_timeout=_check_seconds(owner, "inter_chunk_timeout", inter_chunk_timeout),
            request_options=MappingProxyType(
                checked_request_options(owner, request_options, or_none=True)
            ),
            on_route=on_route,
        )

    def __repr__(self) -> str:
        named = {name: adapter.name for name, adapter in self._adapters.items()}
        return f"<RoutedModel stages={len(self._router.plan.stages)} adapters={named!r}>"

    @property
    def plan(self) -> RoutePlan:
        """The route plan every turn walks."""
        return self._router.plan

    @property
    def adapters(self) -> Mapping[str, ProviderAdapter]:
        """The adapter of each provider name (read-only)."""
        return self._adapters

    @property
    def request_options(self) -> Mapping[str, Any]:
        """The options of every attempt (read-only)."""
        return self._router.request_options

    @property
    def last_route(self) -> RouteResult[ModelTurnResult] | None:
        """The most recent turn's route result (of this model or one derived from it)."""
        return self._router.last_route[0]

    def with_request_options(self, **options: Any) -> RoutedModel:
        """A new model like this one whose requests also carry *options* (merged over its own).

        Everything else is shared: the plan, the adapters, the breaker, the
        timeouts, ``on_route`` and ``last_route``.
        """
        added = checked_request_options("RoutedModel.with_request_options", options)
        derived = object.__new__(RoutedModel)
        derived._adapters = self._adapters
        derived._router = self._router.derive({**self._router.request_options, **added})
        return derived

    def attempt_function(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        text_stream: TurnTextStream | None = None,
    ) -> AttemptFn[ModelTurnResult]:
        """The attempt function for one turn, for a caller driving ``execute_route_plan`` itself."""
        return self._router.attempt_function("RoutedModel", messages, tools, text_stream, None)

    async def route(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        text_stream: TurnTextStream | None = None,
    ) -> RouteResult[ModelTurnResult]:
        """Route one turn over the plan and return the whole result, failed or not."""
        return await self._router.route("RoutedModel", messages, tools, text_stream)

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        """One ``ToolLoop`` model turn: route it, return the value or raise the route's error."""
        result = await self.route(turn.messages, tools=turn.tools, text_stream=turn.text_stream)
        return result.unwrap()
