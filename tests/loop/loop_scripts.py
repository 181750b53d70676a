"""Scripted models and tools for the loop's tests, and the invariant checkers.

A tool's behaviour is written into its own call's arguments (``delay``,
``fail``, ``fatal``, ``suspend``, ...), so one dispatcher serves every test
and a hypothesis strategy only has to draw argument dicts.

Everything that happens is noted, in order, in one :class:`Log`: model calls,
tool starts / ends / cut-offs, persists, compactions, the moment a test
cancels or stops the run. The checkers read order from the log rather than
times, so "no call started after the cancel" means *after*, even when both
happen at the same virtual instant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import attrs

from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.plugins import SuspendDirective
from juno_bind_trio.run import ToolCallLike, tool_call_arguments, tool_call_id


class FatalToolError(Exception):
    """What a test's ``is_fatal_tool_error`` treats as fatal."""


def call(call_id: str, name: str = "work", **behaviour: Any) -> dict[str, Any]:
    """A tool call in the mapping shape, its behaviour in its arguments."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(behaviour)},
    }


@attrs.define
class Log:
    entries: list[tuple[Any, ...]] = attrs.field(factory=list)

    def note(self, *entry: Any) -> None:
        self.entries.append(entry)

    def kinds(self) -> list[Any]:
        return [e[0] for e in self.entries]

    def after(self, kind: str) -> list[tuple[Any, ...]]:
        """Entries noted after the first entry of *kind* (all of them if there is none)."""
        for i, entry in enumerate(self.entries):
            if entry[0] == kind:
                return self.entries[i + 1 :]
        return []

    def started(self) -> list[str]:
        return [e[1] for e in self.entries if e[0] == "start"]


@attrs.define
class Turn:
    """One scripted model turn."""

    content: str | None = None
    calls: Sequence[ToolCallLike] = ()
    delay: float = 1.0
    reasoning: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    cost: float = 0.5
    deltas: Sequence[str] = ()
    # Attempts that stream `lost` and then fail, before the one that succeeds.
    failed_attempts: int = 0
    lost: Sequence[str] = ()
    error: BaseException | None = None


@attrs.define
class ScriptedModel:
    """``call_model`` playing *turns* in order; past the end it answers ``"done"``."""

    turns: list[Turn]
    log: Log = attrs.field(factory=Log)
    seen: list[ModelTurn] = attrs.field(factory=list)
    seen_lengths: list[int] = attrs.field(factory=list)

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        index = len(self.seen)
        spec = self.turns[index] if index < len(self.turns) else Turn(content="done")
        self.seen.append(turn)
        self.seen_lengths.append(len(turn.messages))
        self.log.note("model", turn.iteration, anyio.current_time())
        stream = turn.text_stream
        for _ in range(spec.failed_attempts):
            if stream is not None:
                stream.begin_attempt()
                for delta in spec.lost:
                    stream.observe(delta)
        if stream is not None:
            stream.begin_attempt()
        await anyio.sleep(spec.delay)
        if spec.error is not None:
            raise spec.error
        if stream is not None:
            for delta in spec.deltas:
                stream.observe(delta)
        turn.report_progress(spec.output_tokens, len(spec.calls))
        self.log.note("model_done", turn.iteration, anyio.current_time())
        return ModelTurnResult(
            content=spec.content,
            tool_calls=spec.calls,
            reasoning=spec.reasoning,
            input_tokens=spec.input_tokens,
            output_tokens=spec.output_tokens,
            cost=spec.cost,
        )


@attrs.define
class ScriptedTools:
    """``run_tool_call``: sleeps ``delay``, then fails, suspends or answers as its arguments say."""

    log: Log = attrs.field(factory=Log)

    async def __call__(self, tc: ToolCallLike) -> ToolCallOutcome:
        call_id = tool_call_id(tc)
        args: dict[str, Any] = json.loads(tool_call_arguments(tc))
        self.log.note("start", call_id, anyio.current_time())
        try:
            if args.get("shield"):
                # Finishes whatever the cancel says: the cancel is left pending.
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(args.get("delay", 0))
            else:
                await anyio.sleep(args.get("delay", 0))
        except anyio.get_cancelled_exc_class():
            self.log.note("cut", call_id, anyio.current_time())
            if args.get("swallow_cancel"):
                # The habit of some wrappers: a cancellation turned into an error.
                raise RuntimeError("connection aborted") from None
            raise
        raises = bool(args.get("fatal") or args.get("fail"))
        self.log.note("end", call_id, anyio.current_time(), "raises" if raises else "returns")
        if args.get("fatal"):
            raise FatalToolError(f"fatal in {call_id}")
        if args.get("fail"):
            raise RuntimeError(str(args["fail"]))
        if args.get("bad_return"):
            return "not an outcome"  # type: ignore[return-value]
        suspend = None
        if args.get("suspend"):
            suspend = SuspendDirective(tool_call_id=call_id, reason=str(args["suspend"]))
        return ToolCallOutcome.from_content(
            args.get("answer_for", call_id),
            json.dumps({"ok": call_id}),
            request_compaction=bool(args.get("compact", False)),
            suspend=suspend,
            activated_plugin=args.get("plugin"),
            activated_skill=args.get("skill"),
        )


# --- invariant checkers ---------------------------------------------------------------


def answers(messages: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Check the transcript is well formed and return every tool answer's parsed content by id.

    Every assistant message's tool calls are answered by the tool messages
    immediately after it, each id exactly once, and no tool message appears
    anywhere else. Fails the test otherwise.
    """
    found: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message.get("role") != "tool", f"tool message with no call before it at {i}"
        i += 1
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        wanted = [c["id"] for c in message["tool_calls"]]
        got: list[str] = []
        while i < len(messages) and messages[i].get("role") == "tool":
            got.append(messages[i]["tool_call_id"])
            found[messages[i]["tool_call_id"]] = json.loads(messages[i]["content"])
            i += 1
        assert sorted(got) == sorted(wanted), f"calls {wanted} answered by {got}"
        assert len(set(got)) == len(got), f"an id answered twice: {got}"
    return found


def kind_of(answer: dict[str, Any]) -> str:
    """``"ok"``, ``"failed"``, or the envelope's kind."""
    if "ok" in answer:
        return "ok"
    assert answer["success"] is False
    return str(answer.get("kind", "failed"))


def assert_answers_match_log(messages: Sequence[dict[str, Any]], log: Log) -> dict[str, str]:
    """Each answer tells the truth about its call, as the log saw it. Returns id -> kind.

    Never started → ``not_run``; started and cut off → ``interrupted``;
    ended → its real result (``ok`` or a failure, never ``not_run`` /
    ``interrupted``).
    """
    kinds = {call_id: kind_of(a) for call_id, a in answers(messages).items()}
    started = {e[1] for e in log.entries if e[0] == "start"}
    cut = {e[1] for e in log.entries if e[0] == "cut"}
    ended = {e[1] for e in log.entries if e[0] == "end"}
    # A tool that raised while a cancel was pending cannot be told apart from one
    # that turned the cancel into an error, so both answers are honest for it:
    # "interrupted" (effect unknown) is the conservative reading.
    raised_under_cancel = {e[1] for e in log.after("cancel") if e[0] == "end" and e[3] == "raises"}
    for call_id, kind in kinds.items():
        if call_id not in started:
            assert kind == "not_run", (call_id, kind)
        elif call_id in cut:
            assert kind == "interrupted", (call_id, kind)
        else:
            assert call_id in ended, call_id
            allowed = ("interrupted",) if call_id in raised_under_cancel else ()
            assert kind not in ("not_run", "interrupted") or kind in allowed, (call_id, kind)
    return kinds


def assert_nothing_after_cancel(log: Log) -> None:
    """No tool started, no model call, no persist and no compaction after the cancel."""
    late = [e for e in log.after("cancel") if e[0] in ("start", "model", "save", "compact")]
    assert late == [], late


# --- a host around the scripted model and tools -------------------------------------------


@attrs.define
class Host:
    """A host wiring a :class:`ScriptedModel` and :class:`ScriptedTools` into a loop.

    Its persist and compaction ports note themselves in the log and take
    ``save_delay`` / ``compact_delay`` seconds.
    """

    turns: list[Turn]
    save_delay: float = 0.0
    compact_delay: float = 0.0
    log: Log = attrs.field(factory=Log)
    state: LoopState = attrs.field(
        factory=lambda: LoopState([{"role": "user", "content": "hello"}])
    )
    model: ScriptedModel = attrs.field(init=False)
    tools: ScriptedTools = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.model = ScriptedModel(self.turns, self.log)
        self.tools = ScriptedTools(self.log)

    async def save(self) -> None:
        refused = any(
            m.get("role") == "tool" and '"kind":"not_run"' in m["content"]
            for m in self.state.messages
        )
        self.log.note("save", anyio.current_time(), "with refusals" if refused else "clean")
        await anyio.sleep(self.save_delay)
        self.log.note("saved", anyio.current_time())

    async def compact(self) -> None:
        self.log.note("compact", anyio.current_time())
        await anyio.sleep(self.compact_delay)

    def loop(self, **overrides: Any) -> ToolLoop:
        params: dict[str, Any] = {
            "state": self.state,
            "max_iterations": 10,
            "call_model": self.model,
            "run_tool_call": self.tools,
            "save_session": self.save,
            "run_id": "run",
        }
        params.update(overrides)
        return ToolLoop(**params)

    def saves(self) -> int:
        return self.log.kinds().count("save")


async def cancel_at(scope: Any, delay: float, log: Log, note: str = "cancel") -> None:
    """After *delay* seconds, note *note* in the log and cancel *scope* (a hard or a soft stop)."""
    await anyio.sleep(delay)
    log.note(note, anyio.current_time())
    scope.cancel()
