"""What [Agent][juno_bind_trio.agent.Agent]'s run, run_sync, open_run and resume do: one
run's arguments checked and made into the core that runs it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeAlias, cast, final

import anyio
import attrs
import sniffio

from juno_bind_trio._errors import UsageError
from juno_bind_trio._validate import error_kind, non_empty_str, optional, shown
from juno_bind_trio.providers import RoutedModel
from juno_bind_trio.providers.openai import OpenAIChatModel
from juno_bind_trio.run import StopSignal
from juno_bind_trio.transcript import heal_transcript

from ._agent_args import agent_settings, check_limits
from ._approval_decisions import read_decisions
from ._context import RunContext
from ._history import check_message_history
from ._limits import UsageLimits
from ._pipe import EventPipe
from ._result import AgentResult, OutputT
from ._run import RunSettings, _RunCore, new_run_id
from ._tool import Tool
from ._tool_function import collect_tools

if TYPE_CHECKING:
    from juno_bind_trio.providers import StringModel

__all__ = [
    "UNSET",
    "Override",
    "Prompt",
    "Unset",
    "check_conversation",
    "check_prompt",
    "check_resume",
    "check_run_sync",
    "override_settings",
    "run_core",
    "run_in_own_loop",
    "with_extra_tools",
]


@final
class Unset:
    """The value of an argument left out of ``Agent.override``."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Final = Unset()


@attrs.frozen
class Override:
    settings: RunSettings
    deps: object


def override_settings(
    settings: RunSettings, arguments: Mapping[str, Any], *, model: object, tools: object
) -> RunSettings:
    """The settings of the runs inside an ``Agent.override`` block: the agent's own, built
    again from its *arguments* with the *model* and *tools* given (not `UNSET`) instead."""
    owner = "Agent.override"
    changes: dict[str, Any] = {}
    if not isinstance(model, Unset):
        if isinstance(model, str):
            raise TypeError(
                f"{owner}: model {model!r} is a model string, which would open a client "
                "this block cannot close; pass a model object (testing.TestModel, "
                "testing.FunctionModel, an async function, an OpenAIChatModel)"
            )
        changes["model"] = model
        for key in ("base_url", "api_key", "client"):
            changes[key] = None
        if not _sends_request_options(model):
            # The agent's request options were for the model this block replaces; a
            # test model builds its own requests, so they have nowhere to go.
            changes["request_options"] = None
    if not isinstance(tools, Unset):
        changes["tools"] = tools
    if not changes:
        return settings
    if isinstance(model, Unset):
        # The agent's own model, not the same model built again: built again, a model
        # string would own a second client, which the agent's aclose() never closes.
        # The stand-in is built over a placeholder and then given the agent's model.
        changes.update(model=_kept_model, request_options=None)
        for key in ("base_url", "api_key", "client"):
            changes[key] = None
    # The stand-in agent's settings, checked as Agent(...) checks its own.
    replaced = agent_settings("Agent", **{**arguments, **changes})[0]
    if isinstance(model, Unset):
        replaced = attrs.evolve(replaced, model=settings.model)
    return replaced


def _sends_request_options(model: object) -> bool:
    return isinstance(model, OpenAIChatModel | RoutedModel)


async def _kept_model(turn: object) -> NoReturn:
    # Never called: override_settings puts the agent's own model in its place.
    raise AssertionError("the placeholder model of Agent.override was called")  # pragma: no cover


Prompt: TypeAlias = str | Sequence[Mapping[str, Any]]
"""What `Agent.run` takes as the user's message: text, or a list of content parts."""


def check_prompt(owner: str, prompt: object) -> str | list[dict[str, Any]]:
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


def with_extra_tools(owner: str, settings: RunSettings, given: object) -> RunSettings:
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


def run_core(
    owner: str,
    *,
    agent_settings: RunSettings,
    overrides: contextvars.ContextVar[Override | None],
    deps_type: Any,
    prompt: object,
    deps: object = None,
    message_history: object = None,
    stop: object = None,
    run_id: object = None,
    parent: object = None,
    pipe: EventPipe | None = None,
    usage_limits: object = None,
    approvals: object = None,
    results: object = None,
    errors: object = None,
    principal: object = None,
    conversation: object = None,
    extra_tools: object = None,
) -> _RunCore[Any]:
    """The core of one run of an agent with *agent_settings*, its arguments checked, naming
    *owner* (``"Agent.run"``, ...) in each error."""
    decided = read_decisions(owner, approvals, results, errors, principal)
    if conversation is not None:
        check_conversation(owner, agent_settings, conversation, message_history)
    # No prompt: a run continuing the waiting calls its message_history (or its
    # conversation) ends with.
    if prompt is not None or (message_history is None and not (conversation and decided)):
        prompt = check_prompt(owner, prompt)
    check_limits(owner, usage_limits)
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
    run_id = optional(non_empty_str()).check(f"{owner}: run_id", run_id) or new_run_id()
    if parent is not None and not isinstance(parent, RunContext):
        raise TypeError(
            f"{owner}: parent must be the RunContext of the tool starting this run, got {parent!r}"
        )
    replaced = overrides.get()
    if replaced is not None and replaced.deps is not UNSET:
        deps = replaced.deps
    if (
        isinstance(deps_type, type)
        and deps_type is not type(None)
        and not isinstance(deps, deps_type)
    ):
        raise TypeError(
            f"{owner}: deps must be a {deps_type.__name__} (the agent's deps_type), got {deps!r}"
        )
    settings = agent_settings
    if replaced is not None:
        settings = replaced.settings
    if extra_tools is not None:
        settings = with_extra_tools(owner, settings, extra_tools)
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


def check_conversation(
    owner: str, agent_settings: RunSettings, conversation: object, history: object
) -> None:
    if not isinstance(conversation, str) or not conversation:
        raise error_kind(conversation, str)(
            f"{owner}: conversation must be a non-empty str (the conversation's id) or "
            f"None, got {conversation!r:.80}"
        )
    if agent_settings.store is None:
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


def check_run_sync(backend: object) -> None:
    """``run_sync``'s own checks: a backend anyio knows, and no event loop running already."""
    if backend not in ("trio", "asyncio"):
        raise ValueError(f"Agent.run_sync: backend must be 'trio' or 'asyncio', got {backend!r}")
    try:
        running = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        running = None
    if running is not None:
        raise UsageError(
            f"Agent.run_sync: called inside a running {running} event loop; "
            "use `await agent.run(...)` there"
        )


def run_in_own_loop(
    core: _RunCore[OutputT], owned: StringModel | None, backend: str
) -> AgentResult[OutputT]:
    """Run *core* in an event loop of its own, closing the client the agent opened for it."""
    if owned is None:
        return anyio.run(core.run, backend=backend)

    async def run_and_close() -> AgentResult[OutputT]:
        try:
            return await core.run()
        finally:
            await owned.aclose()

    return anyio.run(run_and_close, backend=backend)


def check_resume(agent_settings: RunSettings, run_id: object, owner: str = "Agent.resume") -> None:
    """``resume``'s own checks: the agent has a store, and *run_id* is a run's id."""
    if agent_settings.store is None:
        raise UsageError(f"{owner}: this agent has no store; build it with Agent(store=...)")
    given: object = run_id
    if not isinstance(given, str) or not given:
        raise error_kind(given, str)(f"{owner}: run_id must be a non-empty str, got {run_id!r}")
