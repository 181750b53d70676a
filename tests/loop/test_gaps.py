"""ToolLoop behaviours mutation testing showed no other test pinned.

Each test kills a mutant that survived the rest of the suite: the scan of a
batch's outcomes past a failed call, compaction only when asked, the
``"compacting"`` status and a second compaction, an iteration with no
persist port, activations only when a tool named one, and ``RunStats``
after a model call that failed or was cancelled.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
from loop_scripts import Host, Turn, answers, call

from juno_bind_trio.loop import (
    AssistantMessageEvent,
    LoopEvent,
    ModelTurnResult,
    RunStats,
    StatusEvent,
)

pytestmark = pytest.mark.anyio


class ModelDown(Exception):
    pass


# --- the scan of a batch's outcomes does not stop at a failed call --------------------


@pytest.mark.parametrize(
    ("later", "check"),
    [
        ({"suspend": "ask"}, "suspended"),
        ({"plugin": "calendar"}, "plugin"),
        ({"skill": "summarise"}, "skill"),
        ({"compact": True}, "compacted"),
    ],
)
async def test_a_failed_call_does_not_hide_a_later_calls_request(
    later: dict[str, Any], check: str
) -> None:
    host = Host([Turn(calls=[call("a", fail="boom"), call("b", **later)]), Turn(content="ok")])
    plugins: list[tuple[str, ...]] = []
    skills: list[tuple[str, ...]] = []

    async def activate_plugins(names: tuple[str, ...]) -> None:
        plugins.append(names)
        await anyio.lowlevel.checkpoint()

    async def activate_skills(names: tuple[str, ...]) -> None:
        skills.append(names)
        await anyio.lowlevel.checkpoint()

    loop = host.loop(
        activate_plugins=activate_plugins,
        activate_skills=activate_skills,
        apply_compaction=host.compact,
    )
    result = await loop.run()
    if check == "suspended":
        assert result.reason == "suspended"
        assert [s.tool_call_id for s in result.suspensions] == ["b"]
    elif check == "plugin":
        assert plugins == [("calendar",)]
    elif check == "skill":
        assert skills == [("summarise",)]
    else:
        assert result.stats.compactions == 1


# --- compaction: only when asked, announced, and as often as asked ---------------------


async def test_going_on_after_a_final_answer_does_not_compact_unasked() -> None:
    host = Host([Turn(content="draft"), Turn(content="final")])
    went_on = False

    async def go_on_once(result: ModelTurnResult) -> bool:
        nonlocal went_on
        await anyio.lowlevel.checkpoint()
        if went_on:
            return False
        went_on = True
        return True

    loop = host.loop(
        on_turn_would_end=go_on_once,
        apply_compaction=host.compact,
        needs_compaction=lambda tokens: False,
    )
    result = await loop.run()
    assert result.reason == "completed"
    assert result.stats.compactions == 0
    assert "compact" not in host.log.kinds()
    assert host.saves() == 2


async def test_going_on_after_a_final_answer_compacts_when_the_context_is_too_big() -> None:
    host = Host([Turn(content="draft"), Turn(content="final")])
    calls = 0

    async def go_on_once(result: ModelTurnResult) -> bool:
        nonlocal calls
        calls += 1
        await anyio.lowlevel.checkpoint()
        return calls == 1

    loop = host.loop(
        on_turn_would_end=go_on_once,
        apply_compaction=host.compact,
        needs_compaction=lambda tokens: True,
    )
    result = await loop.run()
    # The turn that went on compacts; the final answer is persisted as it is.
    assert result.stats.compactions == 1


async def test_two_compactions_in_one_run_are_both_announced_and_counted() -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    host = Host(
        [
            Turn(calls=[call("a", compact=True)]),
            Turn(calls=[call("b", compact=True)]),
            Turn(content="done"),
        ]
    )
    with send, receive:
        result = await host.loop(apply_compaction=host.compact, events=send).run()
        send.close()
        statuses = [(e.iteration, e.status) async for e in receive if isinstance(e, StatusEvent)]
    assert result.stats.compactions == 2
    assert host.log.kinds().count("compact") == 2
    assert [s for s in statuses if s[1] == "compacting"] == [(1, "compacting"), (2, "compacting")]
    # Compaction comes after the tools and before the persist of its iteration.
    assert statuses[:4] == [
        (1, "calling_model"),
        (1, "running_tools"),
        (1, "compacting"),
        (1, "saving_session"),
    ]


# --- no persist port: the iteration still ends and the run goes on ---------------------


async def test_an_iteration_without_save_session_goes_on_to_the_next_turn() -> None:
    host = Host([Turn(calls=[call("a")]), Turn(calls=[call("b")]), Turn(content="done")])
    result = await host.loop(save_session=None).run()
    assert result.reason == "completed"
    assert result.iterations == 3
    assert set(answers(host.state.messages)) == {"a", "b"}
    assert host.saves() == 0


# --- activations only when a tool named one ---------------------------------------------


async def test_activation_ports_are_not_called_for_a_batch_that_activated_nothing() -> None:
    host = Host([Turn(calls=[call("a"), call("b")]), Turn(calls=[call("c")]), Turn(content="x")])
    plugins: list[tuple[str, ...]] = []
    skills: list[tuple[str, ...]] = []

    async def activate_plugins(names: tuple[str, ...]) -> None:
        plugins.append(names)
        await anyio.lowlevel.checkpoint()

    async def activate_skills(names: tuple[str, ...]) -> None:
        skills.append(names)
        await anyio.lowlevel.checkpoint()

    await host.loop(activate_plugins=activate_plugins, activate_skills=activate_skills).run()
    assert plugins == []
    assert skills == []


async def test_each_activated_name_is_passed_once() -> None:
    host = Host(
        [
            Turn(calls=[call("a", plugin="p"), call("b", plugin="p"), call("c", plugin="q")]),
            Turn(content="x"),
        ]
    )
    plugins: list[tuple[str, ...]] = []

    async def activate_plugins(names: tuple[str, ...]) -> None:
        plugins.append(names)
        await anyio.lowlevel.checkpoint()

    await host.loop(activate_plugins=activate_plugins).run()
    assert plugins == [("p", "q")]


# --- RunStats after a failed or cancelled model call -----------------------------------


async def test_run_stats_after_a_model_call_that_failed() -> None:
    host = Host([Turn(calls=[call("a", delay=1)], delay=2), Turn(delay=3, error=ModelDown())])
    loop = host.loop()
    with pytest.raises(ModelDown):
        await loop.run()
    assert loop.stats == RunStats(
        model_calls=2,
        input_tokens=10,
        output_tokens=5,
        cost=0.5,
        model_seconds=5.0,
        tool_seconds=1.0,
        tool_calls=1,
    )


async def test_run_stats_after_a_model_call_that_was_cancelled() -> None:
    host = Host([Turn(calls=[call("a", delay=1)], delay=2), Turn(delay=10)])
    loop = host.loop()
    with anyio.move_on_after(4.5):
        await loop.run()
    assert loop.stats == RunStats(
        model_calls=2,
        input_tokens=10,
        output_tokens=5,
        cost=0.5,
        model_seconds=3.5,
        tool_seconds=1.0,
        tool_calls=1,
    )


async def test_a_turn_without_content_sends_no_assistant_message_event() -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    host = Host([Turn(calls=[call("a")]), Turn(content="done")])
    with send, receive:
        await host.loop(events=send).run()
        send.close()
        messages = [e async for e in receive if isinstance(e, AssistantMessageEvent)]
    assert messages == [AssistantMessageEvent(2, "done", False)]


async def test_a_turn_emitting_with_no_events_channel_drops_nothing() -> None:
    host = Host([Turn(calls=[call("a")]), Turn(content="done")])
    # ScriptedModel reports progress through turn.emit on every turn.
    loop = host.loop()
    await loop.run()
    assert (loop.statistics().events_sent, loop.statistics().events_dropped) == (0, 0)


async def test_a_miswired_return_is_a_usage_error_even_when_every_error_is_fatal() -> None:
    from juno_bind_trio import UsageError

    host = Host([Turn(calls=[call("a", bad_return=True)])])
    with pytest.raises(UsageError, match=r"run_tool_call must return a ToolCallOutcome"):
        await host.loop(is_fatal_tool_error=lambda exc: True).run()
    assert answers(host.state.messages)["a"]["kind"] == "interrupted"
