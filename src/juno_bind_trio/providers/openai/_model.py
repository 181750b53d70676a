"""[`OpenAIChatModel`][juno_bind_trio.providers.openai.OpenAIChatModel]: a routed model over
OpenAI-compatible endpoints only, given as clients.

The routing itself (opening each attempt on the text stream first, merging a
candidate's options, classifying a failure with the stream's
``produced_output``, tracing) is [`RoutedModel`][juno_bind_trio.providers.RoutedModel]'s, shared
through ``providers._routed.Router``: this model is that router with an
[`OpenAIChatAdapter`][juno_bind_trio.providers.openai.OpenAIChatAdapter] per client, kept for the
hosts that build their routing from ``AsyncOpenAI`` clients.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from juno_bind_trio._options import checked_request_options
from juno_bind_trio._validate import real_number, shown
from juno_bind_trio.completion import (
    DEFAULT_INTER_CHUNK_TIMEOUT,
    DEFAULT_TIME_TO_FIRST_TOKEN,
    TurnTextStream,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.providers._routed import (
    Classifier,
    OnRoute,
    Router,
    check_model_settings,
)
from juno_bind_trio.routing import (
    AttemptFn,
    CircuitBreaker,
    RoutePlan,
    RouteResult,
)

from ._adapter import OpenAIChatAdapter
from ._classify import classify_openai_error
from ._stream import StreamPath, check_client, check_stream_path

if TYPE_CHECKING:
    import openai

__all__ = ["Classifier", "OpenAIChatModel"]


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


def _check_request_options(given: Mapping[str, Any]) -> Mapping[str, Any]:
    # Refused here, not at the first request: a reserved key would otherwise
    # fail every attempt of every turn, found in production.
    return types.MappingProxyType(checked_request_options("OpenAIChatModel", given))


def _check_stream_path(value: StreamPath) -> StreamPath:
    return check_stream_path("OpenAIChatModel", value)


def _check_gemini(given: Collection[str]) -> frozenset[str]:
    value: object = given  # checked at run time, whatever the type says
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise TypeError(
            f"OpenAIChatModel: gemini_compat_providers must be a collection of provider names, "
            f"got {value!r}"
        )
    names = frozenset(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(
                f"OpenAIChatModel: gemini_compat_providers holds {name!r}, not a provider name"
            )
    return names


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
        [`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error].
    * *on_route*: called with each turn's
        [`RouteResult`][juno_bind_trio.routing.RouteResult] (the whole attempt trail),
        synchronously, before the turn returns or raises.
    * *stream_path*: how each stream is read, ``"lean"`` (the default) or ``"sdk"``; see
        [`stream_chat_completion()`][juno_bind_trio.providers.openai.stream_chat_completion].
    * *gemini_compat_providers*: the providers (keys of *clients*) whose endpoint is the Gemini
        API's OpenAI-compatible one behind a proxy or gateway; a client whose base URL is the
        Gemini API's own host is recognised without it. Tool calls another provider made reach
        these endpoints with the stand-in thought signature the Gemini API documents (see
        [`OpenAIChatAdapter`][juno_bind_trio.providers.openai.OpenAIChatAdapter]).
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
    _stream_path: StreamPath = attrs.field(
        default="lean", alias="stream_path", converter=_check_stream_path
    )
    _gemini_compat_providers: frozenset[str] = attrs.field(
        default=frozenset(), alias="gemini_compat_providers", converter=_check_gemini
    )
    _router: Router = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        check_model_settings(
            "OpenAIChatModel",
            self._plan,
            self._clients,
            self._breaker,
            self._on_route,
            held="client",
        )
        unknown = sorted(self._gemini_compat_providers - set(self._clients))
        if unknown:
            raise ValueError(
                f"OpenAIChatModel: gemini_compat_providers names {unknown!r}, which clients has not"
            )
        classify = self._classify
        gemini = self._gemini_compat_providers
        self._router = Router(
            plan=self._plan,
            adapters={
                provider: OpenAIChatAdapter(
                    client,
                    classify=classify,
                    stream_path=self._stream_path,
                    gemini_compat=True if provider in gemini else None,
                )
                for provider, client in self._clients.items()
            },
            breaker=self._breaker,
            time_to_first_token=self._time_to_first_token,
            inter_chunk_timeout=self._inter_chunk_timeout,
            request_options=self._request_options,
            on_route=self._on_route,
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
            stream_path=self._stream_path,
            gemini_compat_providers=self._gemini_compat_providers,
        )
        derived._router = self._router.derive(derived._request_options)
        return derived

    @property
    def last_route(self) -> RouteResult[ModelTurnResult] | None:
        """The most recent turn's route result (its attempt trail), or ``None`` before any.

        Shared with the models derived from this one by
        [with_request_options][juno_bind_trio.providers.openai.OpenAIChatModel.with_request_options]
        (an ``Agent`` with an ``output_type`` derives one): the most recent turn of any of them.
        """
        return self._router.last_route[0]

    def attempt_function(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        text_stream: TurnTextStream | None = None,
    ) -> AttemptFn[ModelTurnResult]:
        """The attempt function for one turn, for a caller driving ``execute_route_plan`` itself."""
        return self._router.attempt_function("OpenAIChatModel", messages, tools, text_stream, None)

    async def route(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        text_stream: TurnTextStream | None = None,
    ) -> RouteResult[ModelTurnResult]:
        """Route one turn over the plan and return the whole result, failed or not."""
        return await self._router.route("OpenAIChatModel", messages, tools, text_stream)

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        """One ``ToolLoop`` model turn: route it, return the value or raise the route's error.

        The error of a failed route is the propagated failure's own exception,
        or [`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError] /
        [`NoViableEndpointError`][juno_bind_trio.NoViableEndpointError].
        """
        result = await self.route(turn.messages, tools=turn.tools, text_stream=turn.text_stream)
        return result.unwrap()
