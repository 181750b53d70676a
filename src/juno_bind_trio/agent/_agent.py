"""[Agent][juno_bind_trio.agent.Agent]: a model, tools and instructions, run as one ToolLoop.

Everything the agent can check is checked when it is built, because a
wiring mistake found at the first model call is found in production: a tool
that cannot be a tool, two tools with one name, a model string that names
no provider, an output type that cannot be requested, a tool that strict
mode cannot express. Each raises there, naming the thing and the fix.
"""

from __future__ import annotations

import contextvars
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Self, TypeAlias, cast, final

import anyio
import anyio.lowlevel
import attrs
import sniffio

from juno_bind_trio._errors import SchemaError, UsageError
from juno_bind_trio._options import candidate_option_clashes, checked_request_options
from juno_bind_trio._validate import error_kind, is_async_callable, shown
from juno_bind_trio.completion import DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES, TurnStreamSink
from juno_bind_trio.providers import RoutedModel, StringModel
from juno_bind_trio.providers.openai import OpenAIChatAdapter, OpenAIChatModel
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.run import DEFAULT_PER_TOOL_LIMIT, ChainRule, StopSignal
from juno_bind_trio.schema import SCHEMA_DIALECTS, SchemaDialect, sanitize_tool_schema
from juno_bind_trio.store import DEFAULT_LEASE_TTL
from juno_bind_trio.transcript import heal_transcript

from ._approvals import Approve, Deny, read_decisions
from ._compaction import Compaction
from ._context import DepsT, RunContext
from ._guardrails import (
    GuardrailFunction,
    InputGuardrail,
    OutputGuardrail,
    check_input_guardrails,
    check_output_guardrails,
)
from ._handle import AgentRun, OpenRun
from ._handoff import Handoff, handoff_specs
from ._history import check_message_history
from ._limits import UsageLimits
from ._output_modes import (
    NativeOutput,
    PromptedOutput,
    ToolOutput,
    bind_output_tool,
    check_output_tool_names,
    output_plan,
)
from ._pipe import EventPipe
from ._prepare import PrepareToolsFn, check_prepare
from ._processors import HistoryProcessor, check_processors
from ._result import AgentResult, OutputT
from ._run import ModelFn, ModelSource, RunSettings, _RunCore, new_run_id
from ._store_session import StoreSpec, check_store
from ._tool import Tool, Toolset, check_tool_deps, collect_tools
from ._tool_guards import ToolGuard, check_tool_guards

if TYPE_CHECKING:
    from types import TracebackType

    import openai

__all__ = ["DEFAULT_MAX_ITERATIONS", "Agent"]

DEFAULT_MAX_ITERATIONS: Final = 20
"""Model calls an [Agent][juno_bind_trio.agent.Agent] run may make unless told otherwise."""

_OPENAI_PREFIX: Final = "openai:"
_NONE_TYPE: Final = type(None)
_MODEL_KINDS: Final = (
    "a model string ('openai:<name>', 'anthropic:<name>', ...) or a list of them, a "
    "RoutedModel, an OpenAIChatModel or an async function (ModelTurn) -> ModelTurnResult"
)


def _request_options(
    owner: str, given: object, response_format: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The agent's request options, checked as the model checks its own, with the output
    type's format added."""
    options = checked_request_options(owner, given, or_none=True)
    if response_format is not None and "response_format" in options:
        raise ValueError(
            f"{owner}: request_options sets response_format, which output_type sets; leave one out"
        )
    if response_format is not None:
        options["response_format"] = response_format
    return options


def _model_source(
    owner: str,
    model: object,
    response_format: Mapping[str, Any] | None,
    request_options: object = None,
    *,
    base_url: object = None,
    api_key: object = None,
    client: object = None,
    answer_format: Mapping[str, Any] | None = None,
) -> tuple[ModelSource, str, StringModel | None]:
    """How each run gets its model, a short description of it for ``repr``, and the
    client the agent owns (a model string without ``client=``), if any."""
    extra = _request_options(owner, request_options, response_format)
    endpoint = {"base_url": base_url, "api_key": api_key, "client": client}
    given = [name for name, value in endpoint.items() if value is not None]
    strings = isinstance(model, str | list | tuple)
    if given and not strings:
        why = (
            f"a {type(model).__name__} brings its own clients"
            if isinstance(model, OpenAIChatModel | RoutedModel)
            else "a function model calls no endpoint"
        )
        raise ValueError(
            f"{owner}: {'/'.join(given)} configure the client of a model string; {why}"
        )
    if strings and client is None:
        owned = StringModel(
            cast("str | list[str]", model),
            request_options=extra,
            base_url=cast("str | None", base_url),
            api_key=cast("str | None", api_key),
            owner=owner,
        )

        @asynccontextmanager
        async def string_model() -> AsyncIterator[ModelFn]:
            yield await owned.model()

        return string_model, owned.description, owned
    if strings:
        if not (isinstance(model, str) and model.startswith(_OPENAI_PREFIX)):
            raise ValueError(
                f"{owner}: client= is an AsyncOpenAI for an 'openai:<name>' model; {model!r} "
                "opens its own clients (from base_url=/api_key= or the environment)"
            )
        if base_url is not None or api_key is not None:
            raise ValueError(
                f"{owner}: pass client= or base_url=/api_key=, not both (the client "
                "already has its endpoint and key)"
            )
        name = model[len(_OPENAI_PREFIX) :]
        if not name.strip():
            raise ValueError(
                f"{owner}: a model string must be 'openai:<model-name>', got {model!r}"
            )
        try:
            adapter = OpenAIChatAdapter(cast("openai.AsyncOpenAI", client))
        except (TypeError, ValueError) as exc:
            raise type(exc)(str(exc).replace("OpenAIChatAdapter", owner, 1)) from None
        shared = RoutedModel(
            plan=RoutePlan([RouteStage(name, [Candidate("openai")])]),
            adapters={"openai": adapter},
            request_options=extra,
        )

        @asynccontextmanager
        async def shared_client_model() -> AsyncIterator[ModelFn]:
            yield shared

        return shared_client_model, model, None
    if isinstance(model, OpenAIChatModel | RoutedModel):
        chat: OpenAIChatModel | RoutedModel = model
        if response_format is not None:
            # A candidate's options win over the model's for its attempts: one
            # with its own format would silently replace the output type's.
            for provider, stage_model, _ in candidate_option_clashes(
                model.plan, frozenset({"response_format"})
            ):
                raise ValueError(
                    f"{owner}: the plan's candidate {provider!r} for {stage_model!r} sets "
                    "response_format in its options, which output_type sets; remove it there"
                )
        if extra:
            # The host's own options stay; the output type's format is added.
            chat = model.with_request_options(**extra)

        @asynccontextmanager
        async def given_model() -> AsyncIterator[ModelFn]:
            yield chat

        return given_model, repr(model), None
    if callable(model):
        if request_options is not None:
            raise ValueError(
                f"{owner}: request_options are sent by an OpenAI model ('openai:<name>' or an "
                "OpenAIChatModel); a function model builds its own requests"
            )
        if not is_async_callable(model):
            raise TypeError(f"{owner}: model must be {_MODEL_KINDS}; {model!r} is not async")
        # A model object that can answer in a format (testing.TestModel) is told
        # the output type's: a function model otherwise never sees it.
        bind = getattr(model, "with_output_format", None)
        if answer_format is not None and callable(bind):
            model = bind(answer_format)
        function = cast("ModelFn", model)

        @asynccontextmanager
        async def function_model() -> AsyncIterator[ModelFn]:
            yield function

        return function_model, getattr(model, "__name__", type(model).__name__), None
    raise TypeError(f"{owner}: model must be {_MODEL_KINDS}, got {model!r}")


def _check_limits(owner: str, limits: object) -> None:
    if limits is not None and not isinstance(limits, UsageLimits):
        raise TypeError(f"{owner}: usage_limits must be a UsageLimits or None, got {limits!r}")


def _positive(owner: str, name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        word = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise (TypeError if not isinstance(value, int) or isinstance(value, bool) else ValueError)(
            f"{owner}: {name} must be {word}, got {value!r}"
        )
    return value


Prompt: TypeAlias = str | Sequence[Mapping[str, Any]]
"""What `Agent.run` takes as the user's message: text, or a list of content parts."""


def _check_prompt(owner: str, prompt: object) -> str | list[dict[str, Any]]:
    """A text prompt, or a list of content parts (text, images) copied for the transcript."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Mapping) and "role" in prompt:
        raise TypeError(
            f"{owner}: prompt must be a str or a list of content parts, got a chat message "
            f"({shown(prompt)}); did you mean `message_history=`? Pass the earlier messages "
            "as message_history= and the new user message as the prompt"
        )
    if isinstance(prompt, bytes | Mapping) or not isinstance(prompt, Sequence) or not prompt:
        wrong_type = isinstance(prompt, bytes | Mapping) or not isinstance(prompt, Sequence)
        raise (TypeError if wrong_type else ValueError)(
            f"{owner}: prompt must be a str or a non-empty list of content parts "
            f"({{'type': 'text', 'text': ...}}, {{'type': 'image_url', ...}}), got {shown(prompt)}"
        )
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(prompt):
        if isinstance(part, Mapping) and "role" in part and "type" not in part:
            raise TypeError(
                f"{owner}: prompt[{index}] is a chat message ({shown(part)}), not a content "
                "part; did you mean `message_history=`? Pass the earlier messages as "
                "message_history= and the new user message as the prompt"
            )
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise TypeError(
                f"{owner}: prompt[{index}] must be a content part dict with a string 'type', "
                f"got {shown(part)}"
            )
        parts.append(dict(part))
    return parts


def _with_extra_tools(owner: str, settings: RunSettings, given: object) -> RunSettings:
    """*settings* with one run's own tools added (``extra_tools=``): a frontend's tools, say.

    Checked as the constructor checks ``tools=``: a name the agent's tools (or
    its output tools) already use is refused, naming it."""
    added = collect_tools(f"{owner}: extra_tools", cast("Iterable[object]", given))
    static = dict(settings.static_tools)
    new: list[Tool] = []
    for item in added:
        if isinstance(item, Tool):
            if item.name in static or item.name in settings.output.tool_names:
                raise ValueError(
                    f"{owner}: extra_tools: a tool named {item.name!r} is already one of the "
                    "agent's tools; rename one"
                )
            static[item.name] = item
            new.append(item)
    return attrs.evolve(
        settings,
        tools=(*settings.tools, *added),
        static_tools=static,
        static_tool_dicts=(*settings.static_tool_dicts, *(settings.tool_dict(t) for t in new)),
    )


@final
class _Unset:
    """The value of an argument left out of ``Agent.override``."""

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Final = _Unset()


@attrs.frozen
class _Override:
    settings: RunSettings
    deps: object


@final
class Agent(Generic[DepsT, OutputT]):
    """A model, its tools and instructions: ``await agent.run(prompt)`` runs one ToolLoop.

    ```python
    agent = Agent("openai:gpt-4o-mini", tools=[get_weather], instructions="Be brief.")
    result = await agent.run("Weather in Lisbon?")
    print(result.output)
    ```

    * *model*: a model string, ``"openai:<model-name>"``,
      ``"anthropic:<model>"``, ``"openai-responses:<model>"``,
      ``"google:<model>"`` or ``"bedrock:<model id>"``; a list of them, a
      fallback plan (``["anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini"]``:
      the first, then the next if it fails, mid-stream included); a
      [RoutedModel][juno_bind_trio.providers.RoutedModel] or an
      [OpenAIChatModel][juno_bind_trio.providers.openai.OpenAIChatModel]
      (routed over its plan, with fallback; you own its clients); or any
      ``async (ModelTurn) -> ModelTurnResult`` (a scripted model for tests).
      Each provider's string reads its key and endpoint from that SDK's own
      variables (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``;
      ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``; ``GEMINI_API_KEY`` /
      ``GOOGLE_GEMINI_BASE_URL``; the AWS variables and
      ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``) unless *base_url* / *api_key*
      say otherwise (for one provider), and the agent owns its clients as
      below.
    * *base_url*, *api_key*: for a model string, the OpenAI-compatible
      endpoint and its key (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` by
      default, read when the client is opened). The agent then owns one
      ``AsyncOpenAI`` per event loop, opened by its first run there (or by
      [prepare][juno_bind_trio.agent.Agent.prepare]), shared by every later
      run, and closed by [aclose][juno_bind_trio.agent.Agent.aclose], by
      leaving ``async with agent:``, or when that event loop ends. The SDK is
      imported here, when the agent is built, never inside a run's deadline.
      A missing key is a [UsageError][juno_bind_trio.UsageError] at the first
      run, naming ``OPENAI_API_KEY``.
    * *client*: for a model string, an ``AsyncOpenAI`` of yours (created
      with ``max_retries=0``; an ``AsyncAzureOpenAI`` too) that the agent
      uses instead and never closes: share one between agents, or configure
      it as you like.
    * *tools*: [Tool][juno_bind_trio.agent.Tool]s, plain functions (made
      into tools with [tool][juno_bind_trio.agent.tool]) and
      [Toolset][juno_bind_trio.agent.Toolset]s (read at each run's start).
    * *instructions*: the system message, first in the transcript; or a
      function of the run's ``deps`` returning it, called at the start of
      each run (``lambda deps: f"The user is {deps.name}."``); or an async
      function of the run's [RunContext][juno_bind_trio.agent.RunContext],
      awaited at the start of each run (to read a database, say).
    * *output_type*: ``str`` (the default: the final text), or a pydantic
      model, dataclass, TypedDict or any type pydantic validates: requested
      through ``response_format`` and validated, re-asked up to
      *max_output_retries* times when it does not validate. Or a mode of one:
      [ToolOutput][juno_bind_trio.agent.ToolOutput] (a final-answer tool),
      [NativeOutput][juno_bind_trio.agent.NativeOutput] (what a plain type
      is), [PromptedOutput][juno_bind_trio.agent.PromptedOutput] (the schema
      in the instructions); a list or union of types (``[Invoice, Refusal]``,
      ``Invoice | str``); or an output function, called with the validated
      value, its return the run's output (it may raise
      [ModelRetry][juno_bind_trio.ModelRetry] to ask again).
    * *deps_type*: the type of ``deps=`` the tools receive in their
      [RunContext][juno_bind_trio.agent.RunContext]; checked at each run when
      it is a class, and here against every tool's ``RunContext[X]`` (a tool
      asking for ``X`` on an agent whose *deps_type* is not ``X`` or a
      subclass, or that has none, is a ``TypeError`` naming the tool).
    * *name*: the agent's name in run lineage (sub-agent cycle checks).
    * *max_iterations*: model calls per run; *per_tool_limit*: concurrent
      calls per tool name.
    * *usage_limits*: every run's [UsageLimits][juno_bind_trio.agent.UsageLimits]
      (requests, tokens, tool calls); a run that reaches one stops softly and
      raises [UsageLimitExceeded][juno_bind_trio.UsageLimitExceeded].
    * *request_options*: extra ``chat.completions.create`` arguments for
      every request of an OpenAI model (``temperature``, ``seed``,
      ``extra_headers``, …), merged over an
      [OpenAIChatModel][juno_bind_trio.providers.openai.OpenAIChatModel]'s
      own. ``model``, ``messages``, ``tools``, ``stream`` and ``n`` are the
      package's own and refused; so is ``response_format`` with an
      *output_type* (which sets it), and any options with a function model.
    * *strict*: request OpenAI strict mode for every tool (and the output
      format); a tool that strict mode cannot express is refused here, with
      the JSON pointer of the part that cannot be.
    * *schema_dialect*: the dialect tool schemas are rewritten into
      (``"openai_strict"`` when *strict*, else ``"openai"``; ``"gemini"`` for
      a Gemini endpoint behind an OpenAI-compatible API).
    * *text_sink*: a [TurnStreamSink][juno_bind_trio.completion.TurnStreamSink]
      every turn's text is streamed to (also during ``open_run``).
    * *chain_rule*: the limits for sub-agent runs started with ``parent=``.
    * *store*: keep every run in a run store ([juno_bind_trio.store][]): a
      SQLite file's path (opened by each run), or a
      [RunStore][juno_bind_trio.store.RunStore] you opened. Each run is then
      saved as it goes and can be [resumed][juno_bind_trio.agent.Agent.resume]
      after a crash, on any worker, with no effect repeated. *store_owner*
      names this worker in the run's lease (default ``host:pid:machine``,
      this process: once it is gone, a process of the same machine resumes
      its runs at once);
      *lease_ttl*: seconds before another worker may take over a run whose
      worker stopped renewing its lease.
    * *handoffs*: agents (each with a *name*) or
      [Handoff][juno_bind_trio.agent.Handoff]s this agent may hand its run
      to: the model is offered a ``transfer_to_<name>`` tool for each, and a
      call of it continues the *same* run under that agent (its instructions,
      tools, output type and model; not a sub-agent run), after the rest of
      the call's batch is answered. The run-wide settings stay this agent's:
      *max_iterations*, *usage_limits*, *store*, *text_sink*,
      *per_tool_limit*, counted across every agent of the run. A run resumed
      from a store goes on under the agent in charge, found by name among the
      agents these handoffs reach. See docs/how-to/handoffs.md.
    * *input_guardrails*: checks of each run's input
      ([input_guardrail][juno_bind_trio.agent.input_guardrail], or plain
      functions of ``(ctx, messages)``), run beside the run's first model
      request: the first to trip cancels it and the run raises
      [GuardrailTripped][juno_bind_trio.GuardrailTripped].
    * *output_guardrails*: checks of the final output
      ([output_guardrail][juno_bind_trio.agent.output_guardrail]) before the
      run returns it: a trip withdraws the streamed answer and raises, or asks again.
    * *tool_guards*: [ToolGuard][juno_bind_trio.agent.ToolGuard]s around every
      tool call (before a tool's own ``guards=``): ``before`` may refuse a
      call (kind ``"authz"``), ``after`` may replace its result.
    * *prepare_tools*: ``(ctx, definitions) -> definitions``, sync or async:
      before each model request, after each tool's own *prepare* (see
      [tool][juno_bind_trio.agent.tool]), the
      [ToolDefinition][juno_bind_trio.agent.ToolDefinition]s of the step;
      what it returns (some of them, changed or not, in any order) is what
      the model is offered. A call to a tool not offered at its step is
      answered ``"not_found"``.
    * *history_processors*: functions of ``(messages)`` or
      ``(ctx, messages)``, sync or async, applied in order to the messages
      of every model request; the request is sent what the last returns
      (``AgentResult.messages`` keeps the whole transcript). Each result is
      checked: one that parts a tool call from its answer, or drops the last
      user message, raises [UsageError][juno_bind_trio.UsageError] naming the
      processor, and nothing is sent. Ready-made:
      [keep_last_turns][juno_bind_trio.agent.keep_last_turns],
      [drop_old_tool_results][juno_bind_trio.agent.drop_old_tool_results].
    * *compaction*: a [Compaction][juno_bind_trio.agent.Compaction]: when a
      run's context grows past its trigger, the turns before the last few
      are summarized through a model call and replaced by the summary, in
      the transcript the run keeps (a ``"compacting"``
      [RunStatusEvent][juno_bind_trio.agent.RunStatusEvent] in ``open_run``).

    :raises TypeError: a wrong type anywhere above, or a tool function that
        cannot be a tool.
    :raises ValueError: a bad model string, duplicate tool names, a bad count.
    :raises SchemaError: a tool (or the output type) that *strict* cannot express.
    """

    def __init__(
        self,
        model: str | Sequence[str] | OpenAIChatModel | RoutedModel | ModelFn,
        *,
        tools: Iterable[Tool | Toolset | Any] = (),
        instructions: str
        | Callable[[DepsT], str]
        | Callable[[RunContext[DepsT]], Awaitable[str]]
        | None = None,
        output_type: type[OutputT]
        | ToolOutput[OutputT]
        | NativeOutput[OutputT]
        | PromptedOutput[OutputT]
        | Callable[..., Awaitable[OutputT]]
        | Callable[..., OutputT]
        | Sequence[Any] = str,  # type: ignore[assignment]
        deps_type: type[DepsT] = _NONE_TYPE,  # type: ignore[assignment]
        name: str | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        per_tool_limit: int = DEFAULT_PER_TOOL_LIMIT,
        strict: bool = False,
        schema_dialect: SchemaDialect | None = None,
        text_sink: TurnStreamSink | None = None,
        chain_rule: ChainRule | None = None,
        max_output_retries: int = DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES,
        request_options: Mapping[str, Any] | None = None,
        store: StoreSpec | None = None,
        store_owner: str | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        usage_limits: UsageLimits | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        handoffs: Iterable[Agent[Any, Any] | Handoff] = (),
        # guardrails (#32): see _guardrails
        input_guardrails: Iterable[InputGuardrail | GuardrailFunction] = (),
        output_guardrails: Iterable[OutputGuardrail | GuardrailFunction] = (),
        tool_guards: Iterable[ToolGuard] = (),
        # #33: the tools of each step.
        prepare_tools: PrepareToolsFn | None = None,
        # #33: what each request is sent.
        history_processors: Sequence[HistoryProcessor] | None = None,
        # #33: old turns summarized.
        compaction: Compaction | None = None,
    ) -> None:
        owner = "Agent"
        # What override() builds its stand-in agent from.
        self._arguments: dict[str, Any] = {
            key: value
            for key, value in locals().items()
            if key not in ("self", "__class__", "owner")
        }
        self._overrides: contextvars.ContextVar[_Override | None] = contextvars.ContextVar(
            "juno_bind_trio.agent.override", default=None
        )
        _check_limits(owner, usage_limits)
        store = check_store(owner, store)
        given_owner: object = store_owner
        if given_owner is not None and (not isinstance(given_owner, str) or not given_owner):
            raise error_kind(given_owner, str)(
                f"{owner}: store_owner must be a non-empty str or None, got {store_owner!r}"
            )
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int | float):
            raise TypeError(f"{owner}: lease_ttl must be a positive number, got {lease_ttl!r}")
        if not 0 < lease_ttl < float("inf"):
            raise ValueError(f"{owner}: lease_ttl must be a positive number, got {lease_ttl!r}")
        if not isinstance(strict, bool):
            raise TypeError(f"{owner}: strict must be a bool, got {strict!r}")
        if schema_dialect is None:
            schema_dialect = "openai_strict" if strict else "openai"
        elif schema_dialect not in SCHEMA_DIALECTS:
            raise ValueError(
                f"{owner}: schema_dialect must be one of {', '.join(SCHEMA_DIALECTS)}, "
                f"got {schema_dialect!r}"
            )
        elif strict and schema_dialect != "openai_strict":
            raise ValueError(
                f"{owner}: strict=True asks for OpenAI strict mode, which schema_dialect "
                f"{schema_dialect!r} contradicts; leave schema_dialect out"
            )
        given_instructions: object = instructions  # checked at run time, whatever the type says
        if (
            given_instructions is not None
            and not isinstance(given_instructions, str)
            and not callable(given_instructions)
        ):
            raise TypeError(
                f"{owner}: instructions must be a str, a synchronous function of the run's "
                f"deps returning one, an async function of the run's RunContext returning "
                f"one, or None, got {instructions!r}"
            )
        given_name: object = name
        if given_name is not None and (not isinstance(given_name, str) or not given_name):
            raise error_kind(given_name, str)(
                f"{owner}: name must be a non-empty str or None, got {name!r}"
            )
        if text_sink is not None and not callable(getattr(text_sink, "emit", None)):
            raise TypeError(
                f"{owner}: text_sink must be a TurnStreamSink (with emit and retractable), "
                f"got {text_sink!r}"
            )
        if chain_rule is not None and not isinstance(chain_rule, ChainRule):
            raise TypeError(f"{owner}: chain_rule must be a ChainRule or None, got {chain_rule!r}")
        check_prepare(owner, "prepare_tools", prepare_tools)
        processors = check_processors(owner, history_processors)
        if compaction is not None and not isinstance(compaction, Compaction):
            raise TypeError(
                f"{owner}: compaction must be a Compaction or None, got {shown(compaction)}"
            )
        _positive(owner, "max_iterations", max_iterations)
        _positive(owner, "per_tool_limit", per_tool_limit)
        _positive(owner, "max_output_retries", max_output_retries, minimum=0)
        output = output_plan(owner, output_type, strict=strict)
        model = bind_output_tool(model, output)
        source, described, owned = _model_source(
            owner,
            model,
            output.response_format,
            request_options,
            base_url=base_url,
            api_key=api_key,
            client=client,
            answer_format=output.full_format,
        )
        self._owned = owned
        collected = collect_tools(owner, tools)
        # #32: the agents this one may hand the run to, each a transfer_to_<name> tool.
        handing = handoff_specs(owner, handoffs, name)
        dialect: SchemaDialect = schema_dialect

        def tool_dict(each: Tool) -> dict[str, Any]:
            try:
                schema = sanitize_tool_schema(each.parameters, dialect=dialect).schema
            except SchemaError as exc:
                raise SchemaError(
                    f"{owner}: tool {each.name!r} cannot be expressed in the {dialect!r} dialect "
                    f"at {exc.pointer or '(root)'}: {exc}",
                    exc.pointer,
                ) from None
            entry = each.to_openai_tool(schema)
            if dialect == "openai_strict":
                entry["function"]["strict"] = True
            return entry

        static: dict[str, Tool] = {}
        for item in collected:
            if isinstance(item, Tool):
                if item.name in static:
                    raise ValueError(
                        f"{owner}: two tools are named {item.name!r}; rename one "
                        "(tool(fn, name=...))"
                    )
                static[item.name] = item
        for spec in handing:
            if spec.tool.name in static:
                raise ValueError(
                    f"{owner}: the handoff to {spec.target_name!r} is a tool named "
                    f"{spec.tool.name!r}, as a tool of the agent is; rename one "
                    "(Handoff(agent, name=...))"
                )
            static[spec.tool.name] = spec.tool
        check_output_tool_names(owner, output, list(static))
        # A tool's RunContext[X] the agent's deps cannot give: refused now, not at its call.
        check_tool_deps(owner, static.values(), deps_type)
        self._model_described = described
        self._deps_type: Any = deps_type
        self._output_type: Any = output_type
        self._settings = RunSettings(
            name=name,
            model=source,
            tools=tuple(collected),
            static_tools=static,
            static_tool_dicts=tuple(tool_dict(t) for t in static.values()),
            tool_dict=tool_dict,
            instructions=instructions,
            instructions_awaited=is_async_callable(instructions),
            output=output,
            max_iterations=max_iterations,
            per_tool_limit=per_tool_limit,
            max_output_retries=max_output_retries,
            text_sink=text_sink,
            chain_rule=chain_rule,
            store=store,
            store_owner=store_owner,
            lease_ttl=float(lease_ttl),
            usage_limits=usage_limits,
            handoffs=handing,
            input_guardrails=check_input_guardrails(owner, input_guardrails),
            output_guardrails=check_output_guardrails(owner, output_guardrails),
            tool_guards=check_tool_guards(owner, tool_guards),
            dialect=dialect,
            prepare_tools=prepare_tools,
            history_processors=processors,
            compaction=compaction,
        )

    def __repr__(self) -> str:
        name = self._settings.name
        shown = f" name={name!r}" if name else ""
        return f"<Agent{shown} model={self._model_described} tools={len(self._settings.tools)}>"

    @property
    def name(self) -> str | None:
        """The agent's name in run lineage, if given."""
        return self._settings.name

    @property
    def handoffs(self) -> Sequence[Handoff]:
        """The agents this one may hand its runs to, as [Handoff][juno_bind_trio.agent.Handoff]s."""
        return tuple(spec.handoff for spec in self._settings.handoffs)

    def _settings_now(self) -> RunSettings:
        # What a run of this agent starting now uses: an override block's, or its own.
        replaced = self._overrides.get()
        return self._settings if replaced is None else replaced.settings

    @property
    def tools(self) -> Sequence[Tool | Toolset]:
        """The tools and toolsets the agent was given, in order."""
        return self._settings.tools

    @property
    def store(self) -> StoreSpec | None:
        """The run store the agent keeps its runs in (a path or a RunStore), or ``None``."""
        store: StoreSpec | None = self._settings.store
        return store

    @property
    def output_type(self) -> type[OutputT]:
        """What ``AgentResult.output`` holds."""
        return cast("type[OutputT]", self._output_type)

    # --- the client's life -----------------------------------------------------------

    async def prepare(self) -> None:
        """Open the client the first run would open, now, outside any run's deadline.

        For an agent built from a model string without ``client=``: each
        provider's client for the current event loop is opened (reading the
        SDK's environment, ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` and the
        like, now), so a missing key is reported here and the first run starts
        at once (see [StringModel][juno_bind_trio.providers.StringModel]). Calling it again, or
        for any other agent, does nothing. ``async with agent:`` calls it.

        :raises UsageError: no API key (``OPENAI_API_KEY`` unset and no
            *api_key*, or another provider's), or a base URL that is not an
            http(s) URL.
        """
        if self._owned is None:
            await anyio.lowlevel.checkpoint()
            return
        await self._owned.prepare()

    async def aclose(self) -> None:
        """Close the client this agent opened in the current event loop, if any.

        Closes its connections now; a later run opens a new client. Call it
        once the runs using the agent have ended. A client passed as
        ``client=`` is yours and is left open. Without it, the client is
        closed anyway when the event loop ends, with no warning.
        """
        if self._owned is None:
            await anyio.lowlevel.checkpoint()
            return
        await self._owned.aclose()

    async def __aenter__(self) -> Self:
        """``async with agent:`` [prepares][juno_bind_trio.agent.Agent.prepare] it and
        [closes][juno_bind_trio.agent.Agent.aclose] its client on the way out."""
        await self.prepare()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    @contextmanager
    def override(
        self,
        *,
        model: str | OpenAIChatModel | ModelFn | _Unset = _UNSET,
        deps: DepsT | _Unset = _UNSET,
        tools: Iterable[Tool | Toolset | Any] | _Unset = _UNSET,
    ) -> Iterator[None]:
        """Runs of this agent started inside the block use *model*, *deps*, *tools* instead.

        For tests of code that builds its agents itself:

        ```python
        with support_agent.override(model=TestModel()):
            await handle_ticket(ticket)  # runs support_agent inside
        ```

        Only what is given is replaced; everything else is the agent's own.
        The block applies to the task that entered it and to tasks started
        from inside it (a context variable): runs started elsewhere meanwhile,
        concurrent ones included, are untouched, and a run already going keeps
        what it started with. Blocks nest; the innermost wins. *model* is any
        model the constructor takes except a model string without a client of
        yours (the block could not close the client it would open): a function
        model, ``testing.TestModel`` / ``FunctionModel``, or an
        ``OpenAIChatModel``. Checked as the constructor checks them, on entry.
        """
        owner = "Agent.override"
        changes: dict[str, Any] = {}
        if not isinstance(model, _Unset):
            if isinstance(model, str):
                raise TypeError(
                    f"{owner}: model {model!r} is a model string, which would open a client "
                    "this block cannot close; pass a model object (testing.TestModel, "
                    "testing.FunctionModel, an async function, an OpenAIChatModel)"
                )
            changes["model"] = model
            for key in ("base_url", "api_key", "client"):
                changes[key] = None
        if not isinstance(tools, _Unset):
            changes["tools"] = tools
        settings = self._settings
        if changes:
            stand_in = Agent(**{**self._arguments, **changes})
            settings = stand_in._settings
        token = self._overrides.set(_Override(settings, deps))
        try:
            yield
        finally:
            self._overrides.reset(token)

    # --- running ------------------------------------------------------------------

    def _core(
        self,
        owner: str,
        prompt: object,
        *,
        deps: object,
        message_history: object,
        stop: object,
        run_id: object,
        parent: object,
        pipe: EventPipe | None,
        usage_limits: object = None,
        decisions: object = None,
        conversation: object = None,
        extra_tools: object = None,
    ) -> _RunCore[OutputT]:
        decided = read_decisions(owner, *decisions) if isinstance(decisions, tuple) else None
        if conversation is not None:
            self._check_conversation(owner, conversation, message_history)
        # No prompt: a run continuing the waiting calls its message_history (or its
        # conversation) ends with.
        if prompt is not None or (message_history is None and not (conversation and decided)):
            prompt = _check_prompt(owner, prompt)
        _check_limits(owner, usage_limits)
        history: list[dict[str, Any]] = []
        if message_history is not None:
            # Every message checked (naming message_history[i]) before the healing
            # and before any request.
            history = heal_transcript(check_message_history(owner, message_history)).messages
        if stop is not None and not isinstance(getattr(stop, "cancel_called", None), bool):
            raise TypeError(
                f"{owner}: stop must be None or a CancelScope (anything with a bool "
                f"cancel_called), got {stop!r}"
            )
        if run_id is None:
            run_id = new_run_id()
        elif not isinstance(run_id, str) or not run_id:
            raise error_kind(run_id, str)(
                f"{owner}: run_id must be a non-empty str or None, got {run_id!r}"
            )
        if parent is not None and not isinstance(parent, RunContext):
            raise TypeError(
                f"{owner}: parent must be the RunContext of the tool starting this run, "
                f"got {parent!r}"
            )
        replaced = self._overrides.get()
        if replaced is not None and replaced.deps is not _UNSET:
            deps = replaced.deps
        deps_type = self._deps_type
        if (
            isinstance(deps_type, type)
            and deps_type is not type(None)
            and not isinstance(deps, deps_type)
        ):
            raise TypeError(
                f"{owner}: deps must be a {deps_type.__name__} (the agent's deps_type), "
                f"got {deps!r}"
            )
        settings = self._settings
        if replaced is not None:
            settings = replaced.settings
        if extra_tools is not None:
            settings = _with_extra_tools(owner, settings, extra_tools)
        return _RunCore(
            settings,
            prompt=prompt,
            deps=deps,
            message_history=history,
            stop=cast("StopSignal | None", stop),
            run_id=run_id,
            parent=parent,
            pipe=pipe,
            usage_limits=cast("UsageLimits | None", usage_limits),
            decisions=decided,
            conversation=cast("str | None", conversation),
        )

    def _check_conversation(self, owner: str, conversation: object, history: object) -> None:
        if not isinstance(conversation, str) or not conversation:
            raise error_kind(conversation, str)(
                f"{owner}: conversation must be a non-empty str (the conversation's id) or "
                f"None, got {conversation!r:.80}"
            )
        if self._settings.store is None:
            raise UsageError(
                f"{owner}: conversation={conversation!r} keeps its history in the agent's "
                "store, and this agent has none; build it with Agent(store=...), or keep "
                "the history yourself and pass it as message_history="
            )
        if history is not None:
            raise ValueError(
                f"{owner}: conversation= and message_history= both give the run its "
                "history; pass one (the conversation's history is the store's)"
            )

    async def run(
        self,
        prompt: Prompt | None = None,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
        stop: StopSignal | None = None,
        run_id: str | None = None,
        parent: RunContext[Any] | None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, bool | Approve | Deny] | None = None,
        results: Mapping[str, object] | None = None,
        errors: Mapping[str, str] | None = None,
        conversation: str | None = None,
        extra_tools: Sequence[Tool | Toolset | Callable[..., Any]] | None = None,
    ) -> AgentResult[OutputT]:
        """Run to the end: the model, the tools it asks for, again, until it answers.

        * *prompt*: the user's message: text, or a list of content parts
          in the chat completions form (``{"type": "text", "text": ...}``,
          ``{"type": "image_url", "image_url": {"url": ...}}``) for a model
          that reads images.
        * *deps*: handed to every tool as ``ctx.deps``.
        * *message_history*: an earlier ``AgentResult.messages`` to go on
          from; healed first (every tool call answered exactly once).
        * *stop*: a soft stop (a cancel scope the run only reads): calls in
          flight finish, nothing new is claimed, the run ends ``"stopped"``.
          Cancel the scope around ``run`` for a hard stop.
        * *run_id*: this run's id (random by default); the turn ids and the
          tools' idempotency keys derive from it.
        * *parent*: inside a tool, its ``ctx``: this run is a sub-agent of
          that run. Admitted by the agent's *chain_rule* (depth, cycles,
          concurrency); a refusal raises
          [ToolFailureError][juno_bind_trio.ToolFailureError] of kind
          ``"conflict"``, which the calling tool may let reach its model.
        * *usage_limits*: this run's [UsageLimits][juno_bind_trio.agent.UsageLimits],
          instead of the agent's.
        * *approvals*, *results*, *errors*: decisions for the calls a suspended
          run left waiting (``AgentResult.pending``), by call id, when
          *message_history* is that run's ``messages``: ``True`` /
          [Approve][juno_bind_trio.agent.Approve] runs the call, ``False`` /
          [Deny][juno_bind_trio.agent.Deny] answers it as a failure of kind
          ``"authz"``; *results* and *errors* answer an external tool's
          calls. No *prompt* is needed then; a call left undecided stays
          waiting. With a store, a run's waiting calls are the stored run's:
          continue it with [resume][juno_bind_trio.agent.Agent.resume] (this
          form is a [UsageError][juno_bind_trio.UsageError] naming it).
        * *conversation*: a conversation's id (``"thread-42"``), with a
          *store*: the run starts from that conversation's history (a new id
          starts a new one), and its messages are added to it when it ends,
          so a chat keeps going without the host keeping ``message_history``.
          One run at a time per conversation: a second is refused with
          [ConversationBusy][juno_bind_trio.ConversationBusy] while the first
          goes. A run that fails or is cancelled leaves the conversation as it
          was. With *approvals* / *results* / *errors* and no *prompt*, the run
          whose calls wait at the conversation's end is resumed from the store
          (its ``run_id``; as [resume][juno_bind_trio.agent.Agent.resume] does).
        * *extra_tools*: tools for this run only, next to the agent's (an
          [ExternalTool][juno_bind_trio.agent.ExternalTool] a frontend runs,
          say); a name the agent's tools already use is a ``ValueError``.

        :raises UsageLimitExceeded: the run reached a usage limit and stopped
            softly; the error carries the result so far.
        :raises StructuredOutputError: no answer matched *output_type* within the re-asks.
        :raises LeaseLostError: with a *store*, this worker lost the run's lease
            before its work was saved: the run is not finished; resume it.
        :raises Exception: what the model raised (routing's errors, for an
            OpenAI model), or a [UsageError][juno_bind_trio.UsageError] a tool raised.
        """
        core = self._core(
            "Agent.run",
            prompt,
            deps=deps,
            message_history=message_history,
            stop=stop,
            run_id=run_id,
            parent=parent,
            pipe=None,
            usage_limits=usage_limits,
            decisions=(approvals, results, errors, None),
            conversation=conversation,
            extra_tools=extra_tools,
        )
        return await core.run()

    def run_sync(
        self,
        prompt: Prompt,
        *,
        backend: Literal["trio", "asyncio"] = "trio",
        deps: DepsT | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
        run_id: str | None = None,
        usage_limits: UsageLimits | None = None,
        conversation: str | None = None,
    ) -> AgentResult[OutputT]:
        """[run][juno_bind_trio.agent.Agent.run] for scripts and notebooks: a loop of its own.

        On Trio unless *backend* is ``"asyncio"``. Inside a running event
        loop (a notebook's asyncio loop included), use ``await agent.run(...)``.

        Each call is an event loop of its own, and the SDK's client cannot
        outlive the loop it ran on: an agent built from a model string opens
        its client for the call and closes it before returning, so calling
        ``run_sync`` again (on either backend) opens a fresh one.

        :raises UsageError: called from inside a running event loop.
        """
        if backend not in ("trio", "asyncio"):
            raise ValueError(
                f"Agent.run_sync: backend must be 'trio' or 'asyncio', got {backend!r}"
            )
        try:
            running = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            running = None
        if running is not None:
            raise UsageError(
                f"Agent.run_sync: called inside a running {running} event loop; "
                "use `await agent.run(...)` there"
            )
        # Built (and so checked) before the loop starts, so a bad argument is a
        # plain error here; the same core then runs, so nothing is done twice
        # (a synchronous `instructions` function is called once).
        core = self._core(
            "Agent.run_sync",
            prompt,
            deps=deps,
            message_history=message_history,
            stop=None,
            run_id=run_id,
            parent=None,
            pipe=None,
            usage_limits=usage_limits,
            conversation=conversation,
        )
        owned = self._owned
        if owned is None:
            return anyio.run(core.run, backend=backend)

        async def run_and_close() -> AgentResult[OutputT]:
            try:
                return await core.run()
            finally:
                await owned.aclose()

        return anyio.run(run_and_close, backend=backend)

    def open_run(
        self,
        prompt: Prompt | None = None,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
        stop: StopSignal | None = None,
        run_id: str | None = None,
        parent: RunContext[Any] | None = None,
        usage_limits: UsageLimits | None = None,
        conversation: str | None = None,
        extra_tools: Sequence[Tool | Toolset | Callable[..., Any]] | None = None,
        approvals: Mapping[str, bool | Approve | Deny] | None = None,
        results: Mapping[str, object] | None = None,
        errors: Mapping[str, str] | None = None,
    ) -> AbstractAsyncContextManager[AgentRun[OutputT]]:
        """Start a run in the background and stream what happens: ``async with ... as run``.

        ```python
        async with agent.open_run("Plan my week") as run:
            async for event in run:
                show(event, run.text)
        result = run.result
        ```

        The events arrive in the order they happened, as one typed union
        ([AgentEvent][juno_bind_trio.agent.AgentEvent]): the turn text
        stream's text and reset events, tool calls started and ended
        (finished, failed, not run, interrupted), turns ended, and last the
        run ended. Arguments as for [run][juno_bind_trio.agent.Agent.run].

        Leaving the block before the run ended (a ``break``, an exception, a
        cancel around it) cancels the run: every tool call of the last
        assistant message is answered, nothing queued starts. An error of the
        run itself is raised when the block exits.
        """
        pipe = EventPipe()
        core = self._core(
            "Agent.open_run",
            prompt,
            deps=deps,
            message_history=message_history,
            stop=stop,
            run_id=run_id,
            parent=parent,
            pipe=pipe,
            usage_limits=usage_limits,
            decisions=(approvals, results, errors, None),
            conversation=conversation,
            extra_tools=extra_tools,
        )
        return OpenRun(core, pipe)

    async def resume(
        self,
        run_id: str,
        *,
        deps: DepsT | None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, bool | Approve | Deny] | None = None,
        results: Mapping[str, object] | None = None,
        errors: Mapping[str, str] | None = None,
        principal: str | None = None,
    ) -> AgentResult[OutputT]:
        """Continue a stored run from where it stopped, on this worker.

        Loads the run from the agent's store, heals its transcript, and
        answers the calls its last turn left unanswered by their receipts: a
        call that finished is answered from its receipt and not run again; a
        call that never started runs now; an interrupted call to a
        non-repeatable tool is answered as interrupted ("check its effect
        before repeating it") and never run again, unless the tool declares
        ``uses_idempotency_key``. Then the run goes on as
        [run][juno_bind_trio.agent.Agent.run] would.

        * *usage_limits*: this resume's [UsageLimits][juno_bind_trio.agent.UsageLimits],
          instead of the agent's. They count from zero, what this resume
          spends: the store keeps no usage of the run before it. The calls
          of the turn the run stopped in were asked for before the resume,
          so answering them (from receipts, or by running them) is not
          counted against ``tool_calls_limit``.
        * *approvals*, *results*, *errors*: decisions for the calls the
          suspended run waits on (``AgentResult.pending``,
          ``RunStore.pending_calls``), by call id, as for
          [run][juno_bind_trio.agent.Agent.run]. They are written to the store
          (with *principal*, who decided, and the time) before the run is
          claimed, so they hold from then on: a later plain ``resume`` never
          needs them again (after a crash while an approved call ran, it
          answers that call ``"interrupted"`` rather than run it again,
          unless the tool is repeatable). An id that waits for nothing
          (unknown, already decided, past its deadline), a decision of the
          wrong sort, or a run cancelled while it waited raises
          [UsageError][juno_bind_trio.UsageError] naming it, and nothing is
          written. A call left undecided keeps waiting: the run ends
          ``"suspended"`` again, its ``pending`` listing what still waits
          (``RunStore.list_waiting`` and ``python -m juno_bind_trio.store DB
          waiting`` list such runs).

        :raises UsageLimitExceeded: the resumed run reached a usage limit and
            stopped softly; the error carries the result so far.
        :raises UsageError: the agent has no store.
        :raises RunNotFoundError: no such run. :raises RunLeasedError: another
            worker holds it. :raises ValueError: the run already ended for good.
        :raises LeaseLostError: this worker lost the run's lease before its work
            was saved: the run is not finished; resume it again.
        """
        core = self._resume_core(
            "Agent.resume", run_id, deps, usage_limits, (approvals, results, errors, principal)
        )
        return await core.run()

    def open_resume(
        self,
        run_id: str,
        *,
        deps: DepsT | None = None,
        usage_limits: UsageLimits | None = None,
        approvals: Mapping[str, bool | Approve | Deny] | None = None,
        results: Mapping[str, object] | None = None,
        errors: Mapping[str, str] | None = None,
        principal: str | None = None,
    ) -> AbstractAsyncContextManager[AgentRun[OutputT]]:
        """[resume][juno_bind_trio.agent.Agent.resume], streamed: ``async with ... as run``.

        The stored run goes on, on this worker, exactly as ``resume`` continues
        it (the decisions written to the store before the claim, each approved
        call run once under its receipt), and its events arrive as
        [open_run][juno_bind_trio.agent.Agent.open_run]'s do. The web view
        continues a stored run that waits for a decision this way.
        """
        pipe = EventPipe()
        core = self._resume_core(
            "Agent.open_resume",
            run_id,
            deps,
            usage_limits,
            (approvals, results, errors, principal),
            pipe=pipe,
        )
        return OpenRun(core, pipe)

    def _resume_core(
        self,
        owner: str,
        run_id: object,
        deps: object,
        usage_limits: object,
        decisions: tuple[object, object, object, object],
        *,
        pipe: EventPipe | None = None,
    ) -> _RunCore[OutputT]:
        if self._settings.store is None:
            raise UsageError(f"{owner}: this agent has no store; build it with Agent(store=...)")
        if not isinstance(run_id, str) or not run_id:
            raise error_kind(run_id, str)(
                f"{owner}: run_id must be a non-empty str, got {run_id!r}"
            )
        core = self._core(
            owner,
            "",
            deps=deps,
            message_history=None,
            stop=None,
            run_id=run_id,
            parent=None,
            pipe=pipe,
            usage_limits=usage_limits,
            decisions=decisions,
        )
        core.resuming = True
        return core
