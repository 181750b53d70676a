"""A routed model turn over OpenAI-compatible endpoints: the piece a ``ToolLoop`` calls.

The composition, in one place, that every host streaming through routing has
to get right:

1. The route executor walks the plan and calls the **attempt function** once
   per attempt (same-endpoint retries, next provider, fallback model).
2. The attempt function opens the attempt on the turn's text stream
   (``begin_attempt()``) *first*, before anything can fail, so that a retry's
   first byte replaces the failed attempt's partial text instead of being
   appended to it.
3. It streams one completion
   ([`stream_chat_completion()`][juno_bind_trio.providers.openai.stream_chat_completion]) and turns
   whatever that raised into a classified [`AttemptFailure`][juno_bind_trio.routing.AttemptFailure],
   carrying the stream's ``produced_output`` so that routing stops only when the text reached a
   surface that cannot be retracted.
4. The turn owns the stream, not the attempt: the ``ToolLoop`` builds it per
   turn and finishes it however the turn ended, which is the one lifetime
   rule an attempt function cannot enforce.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, final

import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._validate import real_number, shown
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
    classify_openai_error,
    execute_route_plan,
)

from ._stream import RESERVED_REQUEST_OPTIONS, check_client, stream_chat_completion

if TYPE_CHECKING:
    import openai

__all__ = ["Classifier", "OpenAIChatModel"]

Classifier: TypeAlias = Callable[[Exception, Candidate, RouteCursor], ClassifiedError]
"""``(error, candidate, cursor) -> ClassifiedError``: the shape of
[`classify_openai_error()`][juno_bind_trio.routing.classify_openai_error]."""


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


def _check_plan(given: RoutePlan) -> RoutePlan:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, RoutePlan):
        raise TypeError(f"OpenAIChatModel: plan must be a RoutePlan, got {value!r}")
    return value


def _check_clients(given: Mapping[str, openai.AsyncOpenAI]) -> Mapping[str, openai.AsyncOpenAI]:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, Mapping):
        raise TypeError(
            f"OpenAIChatModel: clients must be a mapping of provider name to AsyncOpenAI, "
            f"got {value!r}"
        )
    for provider, client in value.items():
        check_client(f"OpenAIChatModel: clients[{provider!r}]", client)
    return dict(value)


def _check_seconds(name: str, value: object) -> float:
    seconds = real_number(value)
    if seconds is None or not seconds > 0:
        raise ValueError(
            f"OpenAIChatModel: {name} must be a positive number of seconds, got {shown(value)}"
        )
    return seconds


def _check_ttft(value: float) -> float:
    return _check_seconds("time_to_first_token", value)


def _check_inter(value: float) -> float:
    return _check_seconds("inter_chunk_timeout", value)


def checked_request_options(owner: str, value: object, *, or_none: bool = False) -> dict[str, Any]:
    """*value* as extra request options, or a clear error naming *owner*.

    A mapping of str keys, none of them an argument every request sets itself
    (``RESERVED_REQUEST_OPTIONS``). With *or_none*, ``None`` is accepted, as
    no options. Shared by ``OpenAIChatModel`` and the ``Agent``.
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


def _check_request_options(given: Mapping[str, Any]) -> Mapping[str, Any]:
    # Refused here, not at the first request: a reserved key would otherwise
    # fail every attempt of every turn, found in production.
    return types.MappingProxyType(checked_request_options("OpenAIChatModel", given))


def _check_callable(name: str, *, optional: bool) -> Callable[[Any, Any, Any], None]:
    def check(_instance: Any, _attribute: Any, value: Any) -> None:
        if optional and value is None:
            return
        if not callable(value):
            kind = "callable or None" if optional else "callable"
            raise TypeError(f"OpenAIChatModel: {name} must be {kind}, got {value!r}")

    return check


@final
@attrs.define(eq=False, kw_only=True, repr=False)
class OpenAIChatModel:
    """Routes each model turn over OpenAI-compatible endpoints; a ``ToolLoop``'s ``call_model``.

    ``OpenAIChatModel(plan=..., clients={"provider-a": client_a, ...})``, then
    ``ToolLoop(call_model=model, ...)``.

    * *plan*: the [`RoutePlan`][juno_bind_trio.routing.RoutePlan]: which
        models, from which providers, in which order.
    * *clients*: an ``AsyncOpenAI`` per ``Candidate.provider`` named in
        the plan, each created with ``max_retries=0`` (for example by
        [`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client]). The model
        does not own them: close them where you opened them.
    * *breaker*: an optional [`CircuitBreaker`][juno_bind_trio.routing.CircuitBreaker]
        shared by every turn that routes through these endpoints.
    * *time_to_first_token*: the stream watchdog's first-token budget.
    * *inter_chunk_timeout*: the stream watchdog's inter-chunk budget.
    * *request_options*: extra ``chat.completions.create`` arguments for
        every attempt (``temperature``, ``response_format``, ``extra_headers``,
        …). A candidate's ``options`` are merged over them for that
        candidate's attempts. The arguments the package sets itself
        (``model``, ``messages``, ``tools``, ``stream``, ``n``) are refused
        with a ``ValueError``. To add options to a model you already have, use
        [with_request_options][juno_bind_trio.providers.openai.OpenAIChatModel.with_request_options].
    * *classify*: the error classifier; by default
        [`classify_openai_error()`][juno_bind_trio.routing.classify_openai_error].
    * *on_route*: called with each turn's
        [`RouteResult`][juno_bind_trio.routing.RouteResult] (the whole attempt trail),
        synchronously, before the turn returns or raises.
    """

    _plan: RoutePlan = attrs.field(alias="plan", converter=_check_plan)
    _clients: Mapping[str, openai.AsyncOpenAI] = attrs.field(
        alias="clients", converter=_check_clients
    )
    _breaker: CircuitBreaker | None = attrs.field(default=None, alias="breaker")
    _time_to_first_token: float = attrs.field(
        default=DEFAULT_TIME_TO_FIRST_TOKEN,
        alias="time_to_first_token",
        converter=_check_ttft,
    )
    _inter_chunk_timeout: float = attrs.field(
        default=DEFAULT_INTER_CHUNK_TIMEOUT,
        alias="inter_chunk_timeout",
        converter=_check_inter,
    )
    _request_options: Mapping[str, Any] = attrs.field(
        factory=dict, alias="request_options", converter=_check_request_options
    )
    _classify: Classifier = attrs.field(
        default=classify_openai_error,
        alias="classify",
        validator=_check_callable("classify", optional=False),
    )
    _on_route: OnRoute | None = attrs.field(
        default=None, alias="on_route", validator=_check_callable("on_route", optional=True)
    )
    # One cell shared with every model derived by with_request_options: an
    # Agent derives its own, and the host reads last_route on the one it built.
    _last_route: list[RouteResult[ModelTurnResult] | None] = attrs.field(
        factory=lambda: [None], init=False
    )

    def __attrs_post_init__(self) -> None:
        if self._breaker is not None and not isinstance(self._breaker, CircuitBreaker):
            raise TypeError(
                f"OpenAIChatModel: breaker must be a CircuitBreaker or None, got {self._breaker!r}"
            )
        # Found at start-up, not on the first 503 that reaches the second stage.
        missing = sorted(
            {
                candidate.provider
                for stage in self._plan.stages
                for candidate in stage.candidates
                if candidate.provider not in self._clients
            }
        )
        if missing:
            raise ValueError(
                f"OpenAIChatModel: no client for provider(s) {missing!r} named in the plan; "
                f"clients has {sorted(self._clients)!r}"
            )
        for provider, model, clash in candidate_option_clashes(
            self._plan, RESERVED_REQUEST_OPTIONS
        ):
            raise ValueError(
                f"OpenAIChatModel: the options of candidate {provider!r} for "
                f"{model!r} set {clash!r}, which every request sets itself"
            )

    def __repr__(self) -> str:
        return (
            f"<OpenAIChatModel stages={len(self._plan.stages)} providers={sorted(self._clients)!r}>"
        )

    @property
    def plan(self) -> RoutePlan:
        """The route plan every turn walks."""
        return self._plan

    @property
    def request_options(self) -> Mapping[str, Any]:
        """The extra ``chat.completions.create`` arguments of every attempt (read-only)."""
        return self._request_options

    def with_request_options(self, **options: Any) -> OpenAIChatModel:
        """A new model like this one whose requests also carry *options*.

        ```python
        json_model = model.with_request_options(
            response_format={"type": "json_object"}, temperature=0
        )
        ```

        *options* are merged over this model's own ``request_options`` (a
        key given here wins); a candidate's ``options`` still win over both
        for that candidate's attempts. Everything else is shared with this
        model: the plan, the clients (still yours to close), the circuit
        breaker, the timeouts, the classifier, ``on_route`` and
        ``last_route`` (the most recent turn of either). This model's
        options are unchanged.

        The arguments the package sets itself (``model``, ``messages``,
        ``tools``, ``stream``, ``n``) raise ``ValueError``: pass tools
        through the loop's ``build_tools``, and models through the plan.
        """
        owner = "OpenAIChatModel.with_request_options"
        added = checked_request_options(owner, options)
        derived = OpenAIChatModel(
            plan=self._plan,
            clients=self._clients,
            breaker=self._breaker,
            time_to_first_token=self._time_to_first_token,
            inter_chunk_timeout=self._inter_chunk_timeout,
            request_options={**self._request_options, **added},
            classify=self._classify,
            on_route=self._on_route,
        )
        derived._last_route = self._last_route
        return derived

    @property
    def last_route(self) -> RouteResult[ModelTurnResult] | None:
        """The most recent turn's route result (its attempt trail), or ``None`` before any.

        Shared with the models derived from this one by
        [with_request_options][juno_bind_trio.providers.openai.OpenAIChatModel.with_request_options]
        (an ``Agent`` with an ``output_type`` derives one): the most recent turn of any of them.
        """
        return self._last_route[0]

    def attempt_function(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        text_stream: TurnTextStream | None = None,
    ) -> AttemptFn[ModelTurnResult]:
        """The attempt function for one turn, for a caller driving ``execute_route_plan`` itself."""
        return self._attempt_function(messages, tools, text_stream, None)

    def _attempt_function(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        text_stream: TurnTextStream | None,
        spans: _tracing.AttemptSpans | None,
    ) -> AttemptFn[ModelTurnResult]:
        if text_stream is not None and not isinstance(text_stream, TurnTextStream):
            raise TypeError(
                "OpenAIChatModel.attempt_function: text_stream must be a TurnTextStream or None, "
                f"got {text_stream!r}"
            )

        async def attempt(
            candidate: Candidate, cursor: RouteCursor
        ) -> AttemptSuccess[ModelTurnResult] | AttemptFailure:
            # First, before anything can fail: this is what arms the reset that
            # wipes the previous attempt's partial text on this one's first byte.
            if text_stream is not None:
                text_stream.begin_attempt()
            options = self._request_options
            if candidate.options:
                options = {**options, **candidate.options}
            if spans is not None:
                return await self._traced_attempt(
                    spans, candidate, cursor, messages, tools, text_stream, options
                )
            try:
                value = await self._stream(candidate, cursor, messages, tools, text_stream, options)
            except Exception as exc:  # cancellation is a BaseException and passes
                produced = text_stream.produced_output if text_stream is not None else False
                verdict = self._classify(exc, candidate, cursor)
                return AttemptFailure(verdict, produced_output=produced)
            return AttemptSuccess(value)

        return attempt

    def _stream(
        self,
        candidate: Candidate,
        cursor: RouteCursor,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        text_stream: TurnTextStream | None,
        options: Mapping[str, Any],
    ) -> Awaitable[ModelTurnResult]:
        # One attempt's request and stream, traced or not.
        return stream_chat_completion(
            self._clients[candidate.provider],
            model=cursor.model,
            messages=messages,
            tools=tools,
            text_stream=text_stream,
            time_to_first_token=self._time_to_first_token,
            inter_chunk_timeout=self._inter_chunk_timeout,
            request_options=options,
        )

    async def _traced_attempt(
        self,
        spans: _tracing.AttemptSpans,
        candidate: Candidate,
        cursor: RouteCursor,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        text_stream: TurnTextStream | None,
        options: Mapping[str, Any],
    ) -> AttemptSuccess[ModelTurnResult] | AttemptFailure:
        # The same attempt as the untraced path, with its chat span around it,
        # current while the attempt runs (the stream is consumed in this task):
        # spans of a host's HTTP client instrumentation nest under the attempt.
        resets = text_stream.reset_count if text_stream is not None else 0
        span = spans.start(
            provider=candidate.provider,
            model=cursor.model,
            attempt=cursor.attempt,
            messages=messages,
            server=_server_of(self._clients[candidate.provider]),
        )
        with _tracing.current(span):
            try:
                value = await self._stream(candidate, cursor, messages, tools, text_stream, options)
            except Exception as exc:
                produced = text_stream.produced_output if text_stream is not None else False
                try:
                    failure = AttemptFailure(
                        self._classify(exc, candidate, cursor), produced_output=produced
                    )
                except BaseException as raised:
                    spans.raised(span, raised)
                    raise
                verdict = failure.error
                spans.failed(
                    span,
                    error_type=type(verdict.cause).__qualname__,
                    reason=verdict.reason,
                    verdict=verdict.action.name.lower(),
                    produced_output=produced,
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
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        text_stream: TurnTextStream | None = None,
    ) -> RouteResult[ModelTurnResult]:
        """Route one turn over the plan and return the whole result, failed or not."""
        found = _tracing.tracer()
        spans = None if found is None else _tracing.AttemptSpans(found)
        attempt = self._attempt_function(messages, tools, text_stream, spans)
        try:
            result = await execute_route_plan(self._plan, attempt, breaker=self._breaker)
        except BaseException:
            if spans is not None:
                spans.abandon()
            raise
        if spans is not None:
            spans.settle(result.attempts)
        if len(result.attempts) > 1 or not result.ok:
            _log_route(result)
        self._last_route[0] = result
        if self._on_route is not None:
            self._on_route(result)
        return result

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        """One ``ToolLoop`` model turn: route it, return the value or raise the route's error.

        The error of a failed route is the propagated failure's own exception,
        or [`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError] /
        [`NoViableEndpointError`][juno_bind_trio.NoViableEndpointError].
        """
        result = await self.route(turn.messages, tools=turn.tools, text_stream=turn.text_stream)
        return result.unwrap()


def _server_of(client: openai.AsyncOpenAI) -> tuple[str, int] | None:
    """The host and port *client* sends to, for a span's ``server.*`` attributes."""
    url = client.base_url
    if not url.host:
        return None
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    return url.host, port
