"""[Agent][juno_bind_trio.agent.Agent]: a model, tools and instructions, run as one ToolLoop.

What its constructor checks is in `_agent_args.py` (everything it can check is
checked when it is built); what each run checks, in `_agent_runs.py`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, Self, cast, final

import anyio.lowlevel

from juno_bind_trio.completion import DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES, TurnStreamSink
from juno_bind_trio.providers import RoutedModel
from juno_bind_trio.providers.openai import OpenAIChatModel
from juno_bind_trio.run import DEFAULT_PER_TOOL_LIMIT, ChainRule, StopSignal
from juno_bind_trio.schema import SchemaDialect
from juno_bind_trio.store import DEFAULT_LEASE_TTL

from ._agent_args import agent_settings
from ._agent_runs import UNSET as _UNSET
from ._agent_runs import Override as _Override
from ._agent_runs import (
    Prompt,
    check_resume,
    check_run_sync,
    override_settings,
    run_core,
    run_in_own_loop,
)
from ._agent_runs import Unset as _Unset
from ._approval_types import Approve, Deny
from ._compaction import Compaction
from ._context import DepsT, RunContext
from ._guardrails import GuardrailFunction, InputGuardrail, OutputGuardrail
from ._handle import AgentRun, OpenRun
from ._handoff import Handoff, HandoffTarget
from ._limits import UsageLimits
from ._output_modes import NativeOutput, PromptedOutput, ToolOutput
from ._pipe import EventPipe
from ._prepare import PrepareToolsFn
from ._processors import HistoryProcessor
from ._result import AgentResult, OutputT
from ._run import ModelFn, RunSettings, _RunCore
from ._store_session import StoreSpec
from ._tool import Tool, Toolset
from ._tool_guards import ToolGuard

if TYPE_CHECKING:
    from types import TracebackType

    import openai

__all__ = ["DEFAULT_MAX_ITERATIONS", "Agent"]

DEFAULT_MAX_ITERATIONS: Final = 20
"""Model calls an [Agent][juno_bind_trio.agent.Agent] run may make unless told otherwise."""

_NONE_TYPE: Final = type(None)
# What a method's locals() holds besides its arguments (and run_sync's loop backend).
_NOT_ARGS: Final = frozenset({"self", "__class__", "backend"})


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
        # What override() builds its stand-in agent from.
        self._arguments: dict[str, Any] = {k: v for k, v in locals().items() if k not in _NOT_ARGS}
        self._overrides: contextvars.ContextVar[_Override | None] = contextvars.ContextVar(
            "juno_bind_trio.agent.override", default=None
        )
        self._settings, self._model_described, self._owned = agent_settings(
            "Agent", **self._arguments
        )
        self._deps_type: Any = deps_type
        self._output_type: Any = output_type

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
        await (anyio.lowlevel.checkpoint() if self._owned is None else self._owned.prepare())

    async def aclose(self) -> None:
        """Close the client this agent opened in the current event loop, if any.

        Closes its connections now; a later run opens a new client. Call it
        once the runs using the agent have ended. A client passed as
        ``client=`` is yours and is left open. Without it, the client is
        closed anyway when the event loop ends, with no warning.
        """
        await (anyio.lowlevel.checkpoint() if self._owned is None else self._owned.aclose())

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
        Without *model*, the runs use the agent's own model and its one client.
        """
        settings = override_settings(self._settings, self._arguments, model=model, tools=tools)
        token = self._overrides.set(_Override(settings, deps))
        try:
            yield
        finally:
            self._overrides.reset(token)

    # --- running ------------------------------------------------------------------

    def _core(self, owner: str, given: Mapping[str, Any], **fixed: Any) -> _RunCore[OutputT]:
        # *given*: the calling method's locals() before anything else, its arguments by
        # name (self aside, and run_sync's backend, the loop's); run_core checks each.
        arguments = {key: value for key, value in given.items() if key not in _NOT_ARGS}
        return run_core(
            owner,
            agent_settings=self._settings,
            overrides=self._overrides,
            deps_type=self._deps_type,
            **arguments,
            **fixed,
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
        * *approvals*, *results*, *errors*: decisions, by call id, for the calls
          waiting at the end of *message_history* (``AgentResult.pending``):
          ``True`` / [Approve][juno_bind_trio.agent.Approve] runs the call,
          ``False`` / [Deny][juno_bind_trio.agent.Deny] answers it as a failure
          of kind ``"authz"``; *results* / *errors* answer an external call. No
          *prompt* is needed; an undecided call stays waiting. With a store, use
          [resume][juno_bind_trio.agent.Agent.resume] (this is a ``UsageError``).
        * *conversation*: a conversation's id (``"thread-42"``), with a
          *store*: the run starts from that conversation's history (a new id
          starts a new one), and its messages are added to it when it ends,
          so a chat keeps going without the host keeping ``message_history``.
          One run at a time per conversation: a second is refused with
          [ConversationBusy][juno_bind_trio.ConversationBusy] while the first
          goes. A run that fails or is cancelled leaves the conversation as it
          was. With decisions and no *prompt*, the stored run whose calls wait
          at its end is resumed (as [resume][juno_bind_trio.agent.Agent.resume]).
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
        core = self._core("Agent.run", locals())
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
        check_run_sync(backend)
        # Built (and so checked) before the loop starts, so a bad argument is a
        # plain error here; the same core then runs, so nothing is done twice
        # (a synchronous `instructions` function is called once).
        core = self._core("Agent.run_sync", locals())
        return run_in_own_loop(core, self._owned, backend)

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
        run itself is raised when the block exits. Decisions on a *conversation*
        find the stored run they continue as the block is entered: ``run.run_id``
        is that run's from the start, and a refusal (``UsageError``) is raised
        there, before any event.
        """
        core = self._core("Agent.open_run", locals(), pipe=EventPipe())
        return OpenRun(core, cast("EventPipe", core.pipe))

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

        Loads the run from the agent's store, heals its transcript, and answers
        the calls its last turn left unanswered by their receipts: one that
        finished from its receipt, not run again; one never started runs now;
        an interrupted call to a non-repeatable tool is answered interrupted
        and never run again, unless the tool declares ``uses_idempotency_key``.
        Then the run goes on as [run][juno_bind_trio.agent.Agent.run] would.

        * *usage_limits*: this resume's [UsageLimits][juno_bind_trio.agent.UsageLimits],
          counted from zero, not counting the calls of the turn it stopped in.
        * *approvals*, *results*, *errors*: decisions for the calls the
          suspended run waits on (``AgentResult.pending``), by call id, as for
          [run][juno_bind_trio.agent.Agent.run]; written to the store, with
          *principal* and the time, before the run is claimed, so they hold
          from then on (after a crash during an approved call, a plain
          ``resume`` answers it ``"interrupted"``, never runs it again unless
          it is repeatable). An id that waits for nothing, a decision of the
          wrong sort, or a run cancelled meanwhile is a ``UsageError`` naming
          it, nothing written; an undecided call keeps waiting (``"suspended"``).

        :raises UsageLimitExceeded: the resumed run reached a usage limit and
            stopped softly; the error carries the result so far.
        :raises UsageError: the agent has no store.
        :raises RunNotFoundError: no such run. :raises RunLeasedError: another
            worker holds it. :raises ValueError: the run already ended for good.
        :raises LeaseLostError: this worker lost the run's lease before its work
            was saved: the run is not finished; resume it again.
        """
        check_resume(self._settings, run_id)
        core = self._core("Agent.resume", locals(), prompt="")
        core.resuming = True
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
        """[resume][juno_bind_trio.agent.Agent.resume], streamed as ``open_run`` is."""
        check_resume(self._settings, run_id, "Agent.open_resume")
        core = self._core("Agent.open_resume", locals(), prompt="", pipe=EventPipe())
        core.resuming = True
        return OpenRun(core, cast("EventPipe", core.pipe))


HandoffTarget.register(Agent)  # what a Handoff accepts (_handoff.py cannot import Agent)
