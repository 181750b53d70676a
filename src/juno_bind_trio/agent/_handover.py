"""A run's handoffs as it runs: the switch to the target, and the record in the transcript.

The run (``_RunCore``) holds one ``Handover`` when its agent has handoffs;
the core calls it at five points, and nothing else of the core knows what a
handoff is: a handoff call's dispatch (``refuse_second``, ``accept``), the
persist port (``saver``: the switch is made there, at the end of the
handoff's iteration and before it is saved, so the stored transcript never
holds a handoff half made), each model call (``model``: the agent in
charge's), a run's start (``take_charge``: a resumed run's agent in charge, or
that of the history a run continues; ``finish_open_turn``),
and the loop's end (``loop_ended``). See ``_handoff`` for the design. A run
with handoffs always wires the loop's serial-call and would-end ports, and looks
its tools up when asked: the agent in charge may come to need them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio._transfers import (
    LastHandoff,
    all_handoffs,
    in_charge,
    last_handoff,
    switched_content,
    transfer_content,
)
from juno_bind_trio.run import ChainLink, ChainRef
from juno_bind_trio.transcript import heal_transcript

from ._compaction import compaction_ports
from ._context import run_context
from ._events import HandoffEvent
from ._guardrails import guarded_first_request
from ._handoff import HandoffSpec, Transfer, reachable
from ._steps import step_tools
from ._tool import run_tools

if TYPE_CHECKING:
    from ._run import ModelFn, ModelSource, RunSettings
    from ._session import RunSession

__all__ = [
    "Handover",
    "LastHandoff",
    "accepted",
    "agent_in_charge",
    "all_handoffs",
    "compaction_in_charge",
    "last_handoff",
    "loop_ended",
    "persist_port",
    "run_models",
    "take_charge",
    "transfer_content",
]


@final
@attrs.frozen
class _Pending:
    """A handoff answered, its switch to be made before the iteration is saved."""

    spec: HandoffSpec
    call_id: str
    target: RunSettings


@final
class Handover:
    """One run's handoffs: who is in charge, the switch waiting, each agent's model."""

    def __init__(self, core: Any) -> None:
        self.core: Any = core  # the run (_run._RunCore)
        self.pending: _Pending | None = None
        # Each agent's model, opened at its first turn for the rest of the run.
        self.models: dict[ModelSource, ModelFn] = {}
        self.exits: contextlib.AsyncExitStack | None = None
        # The agent whose model is the run's own (``core.model``, its first request beside
        # the input guardrails): the starting agent, or a continued history's agent in charge.
        self.starter: RunSettings = core.settings

    def opened(self, model: ModelFn, exits: contextlib.AsyncExitStack) -> None:
        """The run's own model is open; targets' models are opened on *exits*."""
        self.models[self.core.settings.model] = model
        self.exits = exits
        _tracing.run_speaking(self.core.agent.name)  # its spans say who speaks

    async def model(self) -> ModelFn:
        """The model of the agent in charge (a target's opened at its first turn)."""
        settings: RunSettings = self.core.agent
        own: ModelFn | None = self.core.model
        if settings is self.starter and own is not None:
            return own  # the run's own (its first request beside the guardrails)
        return await self._model_of(settings)

    async def _model_of(self, settings: RunSettings) -> ModelFn:
        found = self.models.get(settings.model)
        if found is not None:
            return found
        assert self.exits is not None
        opened: ModelFn = await self.exits.enter_async_context(settings.model())
        self.models[settings.model] = opened
        return opened

    # --- the handoff call ------------------------------------------------------------

    def refuse_second(self, call_id: str, name: str) -> None:
        """Refuse a handoff call that is not its turn's first (by call order, not by which
        finishes first: the same turn always hands off to the same agent, on resume too)."""
        names = [spec.tool.name for spec in self.core.agent.handoffs]
        if name not in names:
            return
        winner = winning_call(self.core.state.messages, call_id, names)
        if winner is not None and winner != call_id:
            raise ToolFailureError(
                "not_run",
                f"not run: an earlier call in this turn ({winner}) hands the run off "
                "already; one handoff per turn",
            )

    def accept(self, transfer: Transfer, call_id: str) -> str:
        """A valid handoff call: its answer, the switch waiting for the batch's end; or,
        for a call that is not its turn's first handoff, a ``not_run`` refusal."""
        spec = transfer.spec
        self.refuse_second(call_id, spec.tool.name)
        self.pending = _Pending(spec, call_id, spec.settings())
        return transfer_content(self.core.agent.name, spec.target_name)

    def saver(self, session: RunSession) -> Callable[[], Awaitable[None]] | None:
        """The loop's persist port: the switch waiting, if any, then the session's save."""
        save = session.save_session

        async def switch_then_save() -> None:
            if self.pending is not None:
                await self.switch()
            if save is not None:
                await save()

        return switch_then_save

    async def loop_ended(self, reason: str) -> None:
        """A run that stopped right after a handoff's batch: the target is in charge of
        what it leaves. A suspended one keeps the agent that made the waiting calls
        until they are answered."""
        if self.pending is not None and reason != "suspended":
            await self.switch()

    # --- the switch --------------------------------------------------------------------

    async def switch(self) -> None:
        """Make the handoff: the target's instructions, the filtered history, its tools.

        The handoff turn (the assistant message with the call, and every
        answer after it) is kept; what comes before it, but the system
        message, is what the target's *input_filter* sees.
        """
        core = self.core
        pending = self.pending
        assert pending is not None
        target = pending.target
        tools, tool_dicts = run_tools(target, core.deps)
        text = await self.instructions_of(target)
        messages: list[dict[str, Any]] = core.state.messages
        turn = _turn_of(messages, pending.call_id)
        old = core.instructions_text
        head = int(
            old is not None
            and turn > 0
            and messages[0].get("role") == "system"
            and messages[0].get("content") == old
        )
        history = messages[head:turn]
        kept = [
            # The answer now says the switch is made: a resumed run does not make it twice.
            {**message, "content": switched_content(message["content"])}
            if message.get("role") == "tool" and message.get("tool_call_id") == pending.call_id
            else message
            for message in messages[turn:]
        ]
        flt = pending.spec.input_filter
        if flt is not None:
            history = _filtered(flt, history, pending.spec.target_name)
        rebuilt = ([{"role": "system", "content": text}] if text is not None else []) + history
        from_end = len(messages) - core.new_start
        messages[:] = rebuilt + kept
        core.new_start = max(len(messages) - from_end, 1 if text is not None else 0)
        from_agent = core.agent.name
        self._put_in_charge(target, tools, tool_dicts)
        core.instructions_text = text
        self.pending = None
        _tracing.run_event(
            "juno.run.handoff",
            {
                "juno.handoff.from": from_agent or "",
                "juno.handoff.to": target.name or "",
                "juno.handoff.call_id": pending.call_id,
            },
        )
        if core.emit is not None:
            core.emit(HandoffEvent(from_agent, pending.spec.target_name, pending.call_id))

    def _put_in_charge(
        self,
        settings: RunSettings,
        tools: Mapping[str, Any],
        tool_dicts: tuple[dict[str, Any], ...],
    ) -> None:
        core = self.core
        core.agent = settings
        core.tools = tools
        core.tool_dicts = tool_dicts
        core.gate.tools = tools
        core.step_tools = step_tools(core)  # its prepares, over its tools
        core.offered = None
        # The run's lineage names the agent speaking: a sub-agent run one of its
        # tools starts descends from it.
        links = core.chain.links
        core.chain = ChainRef((*links[:-1], ChainLink(links[-1].run_id, settings.name)))
        _tracing.run_speaking(settings.name)

    async def instructions_of(self, settings: RunSettings) -> str | None:
        core = self.core
        instructions = settings.instructions
        if settings.instructions_awaited:
            assert callable(instructions)
            text = await instructions(run_context(core, core.iteration))
        elif callable(instructions):
            text = instructions(core.deps)
        else:
            text = instructions
        if text is not None and not isinstance(text, str):
            raise TypeError(
                f"Agent {settings.name!r}: instructions must return a str, got {text!r}"
            )
        return text

    # --- a resumed run ---------------------------------------------------------------

    def take_charge(self) -> None:
        """A resumed run: the agent in charge, read from the handoffs its transcript records.

        The target of the last handoff once its switch is made; before that
        (a crash or a suspension in the handoff's batch), the agent that
        handed off, which answers the rest of that batch first.
        """
        core = self.core
        messages = core.state.messages
        last = last_handoff(messages)
        settings: RunSettings = core.settings
        if last is not None:
            name = last.to_agent if last.switched else last.from_agent
            settings = find_settings(core.settings, name, "Agent.resume")
            self._put_in_charge(settings, *run_tools(settings, core.deps))
        first = messages[0] if messages else {}
        content = first.get("content")
        if settings.instructions is not None and first.get("role") == "system":
            core.instructions_text = content if isinstance(content, str) else None

    async def finish_open_turn(self) -> None:
        """A resumed run whose open turn held a handoff: the switch, before the loop."""
        if self.pending is None:
            last = last_handoff(self.core.state.messages)
            if last is None or last.switched:
                return
            agent = self.core.agent
            spec = spec_named(agent, last.tool_name)
            if spec is None:
                raise UsageError(
                    f"Agent.resume: the stored run was handed to {last.to_agent!r} by a call "
                    f"to {last.tool_name!r}, which agent {agent.name!r} has no handoff for"
                )
            self.pending = _Pending(spec, last.call_id, spec.settings())
        await self.switch()

    def in_charge_of(self, history: Sequence[Mapping[str, Any]]) -> RunSettings:
        """The settings of the agent in charge at the end of *history* (a run's
        ``message_history``, a conversation's): the starting agent's when it records
        no handoff, else found by name in its handoff graph, as for a resume."""
        core = self.core
        last = last_handoff(history)
        if last is None:
            return core.settings  # type: ignore[no-any-return]
        name = last.to_agent if last.switched else last.from_agent
        return find_settings(core.settings, name, "Agent.run")

    async def continue_history(self) -> Handover | None:
        """A run started on a history (``message_history=``, a conversation's) that
        records handoffs: it goes on under the agent in charge at the history's end.

        That agent's instructions head the transcript already (the run computed
        them, and only them, before it started: ``_run._take_instructions``); here
        its tools, guards and output type become the run's, and its model (with
        its input guardrails) makes the run's first request. Returns the handover
        when the history's last handoff is not switched yet (a suspended run's
        waiting calls), so that ``finish_open_turn`` makes it.
        """
        core = self.core
        history = core.state.messages[: core.new_start]
        last = last_handoff(history)
        if last is None:
            return None
        settings = self.in_charge_of(history)
        if settings is not core.agent:
            self._put_in_charge(settings, *run_tools(settings, core.deps))
            self.starter = settings
            core.model = guarded_first_request(await self._model_of(settings), core)
        return None if last.switched else self

    def record(self) -> tuple[HandoffEvent, ...]:
        """The handoffs the transcript records, for ``AgentResult.handoffs``."""
        return tuple(
            HandoffEvent(each.from_agent, each.to_agent, each.call_id)
            for each in all_handoffs(self.core.state.messages)
        )


def _turn_of(messages: Sequence[Mapping[str, Any]], call_id: str) -> int:
    """The index of the assistant message holding call *call_id* (the handoff turn)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant" and any(
            call.get("id") == call_id for call in message.get("tool_calls") or ()
        ):
            return index
    return len(messages)


def _filtered(
    flt: Callable[[list[dict[str, Any]]], Sequence[Mapping[str, Any]]],
    history: list[dict[str, Any]],
    target: str,
) -> list[dict[str, Any]]:
    """A handoff's input_filter applied to a copy of the history, its return checked."""
    returned: object = flt([dict(message) for message in history])
    if isinstance(returned, str | bytes | Mapping) or not isinstance(returned, Sequence):
        raise UsageError(
            f"Handoff to {target!r}: input_filter must return a list of messages, got "
            f"{returned!r:.80}"
        )
    kept: list[dict[str, Any]] = []
    for index, message in enumerate(returned):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise UsageError(
                f"Handoff to {target!r}: input_filter returned {message!r:.80} at [{index}], "
                "not a chat message"
            )
        kept.append(dict(message))
    # A filter that dropped a tool call's answer (or kept an answer without its call)
    # would leave a transcript a provider refuses: healed, as any history is.
    return heal_transcript(kept).messages


def find_settings(root: RunSettings, name: str | None, owner: str) -> RunSettings:
    """The settings of the agent named *name* in *root*'s handoff graph (*root* included;
    ``None`` is the root, unnamed)."""
    if name is None or name == root.name:
        return root
    for spec in root.handoffs:
        for each_name, each in reachable(spec.target):
            if each_name == name:
                settings: RunSettings = each._settings_now()
                return settings
    what = "stored run" if owner == "Agent.resume" else "history"
    raise UsageError(
        f"{owner}: the {what} is in the hands of agent {name!r}, which is not in the "
        f"handoff graph of agent {root.name!r}; go on with an agent whose handoffs reach "
        f"it, or with agent {name!r} itself"
    )


def spec_named(settings: RunSettings, tool_name: str) -> HandoffSpec | None:
    """*settings*' handoff whose tool is *tool_name*, if any."""
    for spec in settings.handoffs:
        if spec.tool.name == tool_name:
            return spec
    return None


def agent_in_charge(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The name of the agent in charge at the end of a transcript that records handoffs.

    ```python
    stored = await store.load("run-7")
    print(agent_in_charge(stored.messages) or "the agent that started it")
    ```

    *messages*: a run's transcript (``AgentResult.messages``, a stored run's
    or a conversation's). The target of its last handoff once the target took
    over (the switch made: its instructions in place); the agent that handed
    off while that handoff's batch is still open (a run suspended or cut off
    in it); ``None`` when the transcript records no handoff: the agent that
    started the run speaks. What a resumed or continued run goes on under.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise TypeError(
            f"agent_in_charge: messages must be a list of messages, got {messages!r:.80}"
        )
    given: Sequence[object] = messages  # a host's list: anything but a message is passed over
    return in_charge([m for m in given if isinstance(m, Mapping)])


def winning_call(
    messages: Sequence[Mapping[str, Any]], call_id: str, names: Iterable[str]
) -> str | None:
    """The id of the first handoff call (a tool in *names*) of the turn holding *call_id*."""
    wanted = set(names)
    for message in reversed(messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls or not any(c.get("id") == call_id for c in calls):
            continue
        for call in calls:
            if call.get("function", {}).get("name") in wanted:
                return str(call.get("id"))
        return None
    return None


def persist_port(
    handover: Handover | None, session: RunSession
) -> Callable[[], Awaitable[None]] | None:
    """The loop's persist port: the session's, or, with handoffs, the switch then it."""
    return session.save_session if handover is None else handover.saver(session)


# --- the run's hooks (the run holds no Handover when its agent has no handoffs) ----------


def compaction_in_charge(
    core: Any,
) -> tuple[Callable[[int], bool] | None, Callable[[], Awaitable[None]] | None]:
    """The loop's compaction ports: the agent's *compaction*; with handoffs, the agent in
    charge's, read at each check (no ports when no agent of the graph has one)."""
    root: RunSettings = core.settings
    if core.handover is None:
        return compaction_ports(core, root.compaction)
    graph = [
        root,
        *(each._settings_now() for spec in root.handoffs for _, each in reachable(spec.target)),
    ]
    if not any(settings.compaction is not None for settings in graph):
        return None, None

    def needs(context_tokens: int) -> bool:
        check = compaction_ports(core, core.agent.compaction)[0]
        return check is not None and check(context_tokens)

    async def apply() -> None:
        compact = compaction_ports(core, core.agent.compaction)[1]
        if compact is not None:
            await compact()

    return needs, apply


@contextlib.asynccontextmanager
async def run_models(core: Any) -> AsyncIterator[ModelFn]:
    """The run's model, open for the run; the handoff targets' are opened beside it."""
    async with core.settings.model() as model, contextlib.AsyncExitStack() as exits:
        if core.handover is not None:
            core.handover.opened(model, exits)
        yield model


def accepted(handover: Handover | None, value: object, call_id: str) -> object:
    """A tool's return: for a handoff's call (a Transfer), the call's answer."""
    if isinstance(value, Transfer) and handover is not None:
        return handover.accept(value, call_id)
    return value


async def take_charge(handover: Handover | None, session: RunSession) -> Handover | None:
    """A run with handoffs: the agent in charge taken from the stored transcript (a
    resume) or from the history it continues; the handover, when it then has the open
    turn's handoff to finish (``None`` otherwise)."""
    if handover is None:
        return None
    if not session.resumed:
        return await handover.continue_history()
    handover.take_charge()
    return handover


async def loop_ended(handover: Handover | None, reason: str) -> None:
    """The loop's end: a switch still waiting is made (see ``Handover.loop_ended``)."""
    if handover is not None:
        await handover.loop_ended(reason)
