"""[Agent][juno_bind_trio.agent.Agent]: a model, tools and instructions, run as one ToolLoop.

Everything the agent can check is checked when it is built, because a
wiring mistake found at the first model call is found in production: a tool
that cannot be a tool, two tools with one name, a model string that names
no provider, an output type that cannot be requested, a tool that strict
mode cannot express. Each raises there, naming the thing and the fix.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, Generic, Literal, TypeAlias, cast, final

import anyio
import sniffio

from juno_bind_trio._errors import SchemaError, UsageError
from juno_bind_trio._validate import shown
from juno_bind_trio.completion import DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES, TurnStreamSink
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.providers.openai._model import (
    candidate_option_clashes,
    checked_request_options,
)
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.run import DEFAULT_PER_TOOL_LIMIT, ChainRule, StopSignal
from juno_bind_trio.schema import SCHEMA_DIALECTS, SchemaDialect, sanitize_tool_schema
from juno_bind_trio.store._agent import DEFAULT_LEASE_TTL, StoreSpec, check_store
from juno_bind_trio.transcript import heal_transcript

from ._context import DepsT, RunContext
from ._limits import UsageLimits
from ._output import output_spec
from ._result import AgentResult, OutputT
from ._run import (
    AgentRun,
    ModelFn,
    ModelSource,
    RunSettings,
    _EventPipe,
    _RunCore,
    new_run_id,
    open_agent_run,
)
from ._tool import Tool, Toolset, collect_tools

__all__ = ["DEFAULT_MAX_ITERATIONS", "Agent"]

DEFAULT_MAX_ITERATIONS: Final = 20
"""Model calls an [Agent][juno_bind_trio.agent.Agent] run may make unless told otherwise."""

_OPENAI_PREFIX: Final = "openai:"
_NONE_TYPE: Final = type(None)


def _is_async_callable(value: object) -> bool:
    if inspect.iscoroutinefunction(value):
        return True
    call = getattr(value, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


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
) -> tuple[ModelSource, str]:
    """How each run gets its model, and a short description of it for ``repr``."""
    extra = _request_options(owner, request_options, response_format)
    if isinstance(model, str):
        name = model[len(_OPENAI_PREFIX) :] if model.startswith(_OPENAI_PREFIX) else ""
        if not name:
            raise ValueError(
                f"{owner}: a model string must be 'openai:<model-name>' (the client is built from "
                f"OPENAI_API_KEY and OPENAI_BASE_URL), got {model!r}; for another provider pass "
                "an OpenAIChatModel"
            )
        plan = RoutePlan([RouteStage(name, [Candidate("openai")])])

        @asynccontextmanager
        async def open_string_model() -> AsyncIterator[ModelFn]:
            async with open_openai_client() as client:
                yield OpenAIChatModel(plan=plan, clients={"openai": client}, request_options=extra)

        return open_string_model, model
    if isinstance(model, OpenAIChatModel):
        chat: OpenAIChatModel = model
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

        return given_model, repr(model)
    if callable(model):
        if request_options is not None:
            raise ValueError(
                f"{owner}: request_options are sent by an OpenAI model ('openai:<name>' or an "
                "OpenAIChatModel); a function model builds its own requests"
            )
        if not _is_async_callable(model):
            raise TypeError(
                f"{owner}: model must be 'openai:<name>', an OpenAIChatModel or an async "
                f"function (ModelTurn) -> ModelTurnResult; {model!r} is not async"
            )
        function = cast("ModelFn", model)

        @asynccontextmanager
        async def function_model() -> AsyncIterator[ModelFn]:
            yield function

        return function_model, getattr(model, "__name__", type(model).__name__)
    raise TypeError(
        f"{owner}: model must be 'openai:<name>', an OpenAIChatModel or an async function "
        f"(ModelTurn) -> ModelTurnResult, got {model!r}"
    )


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
    if isinstance(prompt, bytes | Mapping) or not isinstance(prompt, Sequence) or not prompt:
        raise TypeError(
            f"{owner}: prompt must be a str or a non-empty list of content parts "
            f"({{'type': 'text', 'text': ...}}, {{'type': 'image_url', ...}}), got {shown(prompt)}"
        )
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(prompt):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise TypeError(
                f"{owner}: prompt[{index}] must be a content part dict with a string 'type', "
                f"got {shown(part)}"
            )
        parts.append(dict(part))
    return parts


@final
class Agent(Generic[DepsT, OutputT]):
    """A model, its tools and instructions: ``await agent.run(prompt)`` runs one ToolLoop.

    ```python
    agent = Agent("openai:gpt-4o-mini", tools=[get_weather], instructions="Be brief.")
    result = await agent.run("Weather in Lisbon?")
    print(result.output)
    ```

    * *model*: ``"openai:<model-name>"`` (an ``AsyncOpenAI`` client from
      ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, opened and closed by each
      run); an [OpenAIChatModel][juno_bind_trio.providers.openai.OpenAIChatModel]
      (routed over its plan, with fallback; you own its clients); or any
      ``async (ModelTurn) -> ModelTurnResult`` (a scripted model for tests).
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
      *max_output_retries* times when it does not validate.
    * *deps_type*: the type of ``deps=`` the tools receive in their
      [RunContext][juno_bind_trio.agent.RunContext]; checked at each run when
      it is a class.
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

    :raises TypeError: a wrong type anywhere above, or a tool function that
        cannot be a tool.
    :raises ValueError: a bad model string, duplicate tool names, a bad count.
    :raises SchemaError: a tool (or the output type) that *strict* cannot express.
    """

    def __init__(
        self,
        model: str | OpenAIChatModel | ModelFn,
        *,
        tools: Iterable[Tool | Toolset | Any] = (),
        instructions: str
        | Callable[[DepsT], str]
        | Callable[[RunContext[DepsT]], Awaitable[str]]
        | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]
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
    ) -> None:
        owner = "Agent"
        _check_limits(owner, usage_limits)
        store = check_store(owner, store)
        given_owner: object = store_owner
        if given_owner is not None and (not isinstance(given_owner, str) or not given_owner):
            raise TypeError(
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
            raise TypeError(f"{owner}: name must be a non-empty str or None, got {name!r}")
        if text_sink is not None and not callable(getattr(text_sink, "emit", None)):
            raise TypeError(
                f"{owner}: text_sink must be a TurnStreamSink (with emit and retractable), "
                f"got {text_sink!r}"
            )
        if chain_rule is not None and not isinstance(chain_rule, ChainRule):
            raise TypeError(f"{owner}: chain_rule must be a ChainRule or None, got {chain_rule!r}")
        _positive(owner, "max_iterations", max_iterations)
        _positive(owner, "per_tool_limit", per_tool_limit)
        _positive(owner, "max_output_retries", max_output_retries, minimum=0)
        output = output_spec(owner, output_type, strict=strict)
        source, described = _model_source(owner, model, output.response_format, request_options)
        collected = collect_tools(owner, tools)
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
            instructions_awaited=_is_async_callable(instructions),
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
        pipe: _EventPipe | None,
        usage_limits: object = None,
    ) -> _RunCore[OutputT]:
        prompt = _check_prompt(owner, prompt)
        _check_limits(owner, usage_limits)
        history: list[dict[str, Any]] = []
        if message_history is not None:
            if isinstance(message_history, (str, bytes, Mapping)) or not isinstance(
                message_history, Sequence
            ):
                raise TypeError(
                    f"{owner}: message_history must be a list of messages (an earlier "
                    f"AgentResult.messages), got {message_history!r}"
                )
            history = heal_transcript(message_history).messages
        if stop is not None and not isinstance(getattr(stop, "cancel_called", None), bool):
            raise TypeError(
                f"{owner}: stop must be None or a CancelScope (anything with a bool "
                f"cancel_called), got {stop!r}"
            )
        if run_id is None:
            run_id = new_run_id()
        elif not isinstance(run_id, str) or not run_id:
            raise TypeError(f"{owner}: run_id must be a non-empty str or None, got {run_id!r}")
        if parent is not None and not isinstance(parent, RunContext):
            raise TypeError(
                f"{owner}: parent must be the RunContext of the tool starting this run, "
                f"got {parent!r}"
            )
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
        return _RunCore(
            self._settings,
            prompt=prompt,
            deps=deps,
            message_history=history,
            stop=cast("StopSignal | None", stop),
            run_id=run_id,
            parent=parent,
            pipe=pipe,
            usage_limits=cast("UsageLimits | None", usage_limits),
        )

    async def run(
        self,
        prompt: Prompt,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
        stop: StopSignal | None = None,
        run_id: str | None = None,
        parent: RunContext[Any] | None = None,
        usage_limits: UsageLimits | None = None,
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
    ) -> AgentResult[OutputT]:
        """[run][juno_bind_trio.agent.Agent.run] for scripts and notebooks: a loop of its own.

        On Trio unless *backend* is ``"asyncio"``. Inside a running event
        loop (a notebook's asyncio loop included), use ``await agent.run(...)``.

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
        )
        return anyio.run(core.run, backend=backend)

    def open_run(
        self,
        prompt: Prompt,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
        stop: StopSignal | None = None,
        run_id: str | None = None,
        parent: RunContext[Any] | None = None,
        usage_limits: UsageLimits | None = None,
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
        pipe = _EventPipe()
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
        )
        return open_agent_run(core, pipe)

    async def resume(
        self,
        run_id: str,
        *,
        deps: DepsT | None = None,
        usage_limits: UsageLimits | None = None,
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

        :raises UsageLimitExceeded: the resumed run reached a usage limit and
            stopped softly; the error carries the result so far.
        :raises UsageError: the agent has no store.
        :raises RunNotFoundError: no such run. :raises RunLeasedError: another
            worker holds it. :raises ValueError: the run already ended for good.
        :raises LeaseLostError: this worker lost the run's lease before its work
            was saved: the run is not finished; resume it again.
        """
        if self._settings.store is None:
            raise UsageError(
                "Agent.resume: this agent has no store; build it with Agent(store=...)"
            )
        given: object = run_id
        if not isinstance(given, str) or not given:
            raise TypeError(f"Agent.resume: run_id must be a non-empty str, got {run_id!r}")
        core = self._core(
            "Agent.resume",
            "",
            deps=deps,
            message_history=None,
            stop=None,
            run_id=run_id,
            parent=None,
            pipe=None,
            usage_limits=usage_limits,
        )
        core.resuming = True
        return await core.run()
