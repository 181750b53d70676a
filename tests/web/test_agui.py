"""AG-UI: every event is the ag-ui-protocol package's own, and a reset leaves the client right."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
import pytest
from ag_ui.core import Event, UserMessage
from asgi_driver import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ui_message_stream import FINAL, PARTIAL, DeltaSink, fallback_model, weather
from ui_stream_fixture import EVENTS, TRANSCRIPT

from juno_bind_trio.agent import Agent, RunEndedEvent, TurnEndedEvent
from juno_bind_trio.completion import TurnTextStream
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.web import (
    AGUIEncoder,
    AGUIInputError,
    agui_events,
    chat_from_run_input,
    client_tools,
    create_agui_app,
    read_run_input,
)

pytestmark = pytest.mark.anyio

EVENT = pydantic.TypeAdapter(Event)


def apply(
    events: Sequence[Mapping[str, Any]], initial: Sequence[Mapping[str, Any]] = ()
) -> list[list[dict[str, Any]]]:
    """The client's messages after each event, as @ag-ui/client's defaultApplyEvents keeps them."""
    messages: list[dict[str, Any]] = [dict(m) for m in initial]
    snapshots = []
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "assistant", "content": ""})
        elif kind == "REASONING_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "reasoning", "content": ""})
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            message = next(m for m in messages if m["id"] == event["messageId"])
            message["content"] = (message.get("content") or "") + event["delta"]
        elif kind == "TOOL_CALL_START":
            parent = next((m for m in messages if m["id"] == event.get("parentMessageId")), None)
            if parent is None:
                parent = {"id": event.get("parentMessageId"), "role": "assistant"}
                messages.append(parent)
            parent.setdefault("toolCalls", []).append(
                {
                    "id": event["toolCallId"],
                    "function": {"name": event["toolCallName"], "arguments": ""},
                }
            )
        elif kind == "TOOL_CALL_ARGS":
            for m in messages:
                for call in m.get("toolCalls", ()):
                    if call["id"] == event["toolCallId"]:
                        call["function"]["arguments"] += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            messages.append(
                {
                    "id": event["messageId"],
                    "role": "tool",
                    "toolCallId": event["toolCallId"],
                    "content": event["content"],
                }
            )
        elif kind == "MESSAGES_SNAPSHOT":
            # HttpAgent's rule: replaced by id, new ones appended, and the client's
            # reasoning messages kept when the snapshot holds none.
            given = {m["id"]: dict(m) for m in event["messages"]}
            any_reasoning = any(m["role"] == "reasoning" for m in given.values())
            messages = [
                given.get(m["id"], m)
                for m in messages
                if m["id"] in given or (m["role"] == "reasoning" and not any_reasoning)
            ]
            held = {m["id"] for m in messages}
            messages.extend(m for m in given.values() if m["id"] not in held)
        snapshots.append(json.loads(json.dumps(messages)))
    return snapshots


def wire(events: Sequence[Any]) -> list[dict[str, Any]]:
    return [json.loads(e.model_dump_json(by_alias=True)) for e in events]


def test_every_event_round_trips_through_the_protocols_models() -> None:
    encoder = AGUIEncoder(thread_id="th", run_id="r1")
    out = encoder.start()
    for event in EVENTS:
        out.extend(encoder.feed(event, TRANSCRIPT))
    kinds = set()
    for data in wire(out):
        parsed = EVENT.validate_python(data)
        assert json.loads(parsed.model_dump_json(by_alias=True)) == data
        kinds.add(data["type"])
    assert {
        "RUN_STARTED",
        "STEP_STARTED",
        "STEP_FINISHED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "MESSAGES_SNAPSHOT",
        "RUN_ERROR",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    } <= kinds


def test_reasoning_streams_as_its_own_message_and_a_reset_withdraws_it() -> None:
    encoder = AGUIEncoder(thread_id="th", run_id="r1")
    out = encoder.start()
    for event in EVENTS:
        out.extend(encoder.feed(event, TRANSCRIPT))
    events = wire(out)
    snapshots = apply(events)
    thought = [[m["content"] for m in s if m["role"] == "reasoning"] for s in snapshots]
    assert ["Hmm, the weather."] in thought  # shown while the attempt lived
    # Withdrawn by the reset (emptied: the client keeps a reasoning message a
    # snapshot without any leaves alone), then the next turn's thinking.
    assert thought[-1] == ["", "All answered."]
    # Every reasoning span is closed, in the order AG-UI's verifier demands.
    opened: list[str] = []
    for data in events:
        kind = data["type"]
        if kind == "REASONING_START":
            opened.append(data["messageId"])
        elif kind == "REASONING_MESSAGE_START":
            assert opened[-1] == data["messageId"]
        elif kind == "REASONING_END":
            assert opened.pop() == data["messageId"]
        elif kind in ("TEXT_MESSAGE_START", "TOOL_CALL_START", "STEP_FINISHED"):
            assert not opened, kind
    assert not opened


attempts = st.lists(
    st.lists(
        st.one_of(st.text(alphabet="ab ~", min_size=1, max_size=3), st.just(None)), max_size=4
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None)
@given(script=attempts)
def test_a_reset_leaves_the_clients_messages_with_the_final_text_and_no_splice(
    script: list[list[str | None]],
) -> None:
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    final = ""
    for number, pieces in enumerate(script):
        stream.begin_attempt()
        final = ""
        for piece in pieces:
            if piece is None:
                stream.tool_call_delta(0, f"call{number}", "look", "{}")
            elif piece.startswith("~"):
                stream.reasoning(f"<{number}>{piece}")
            else:
                tagged = f"<{number}>{piece}"
                stream.observe(tagged)
                final += tagged
    stream.finish("succeeded")
    user = UserMessage(id="u", role="user", content="go")
    encoder = AGUIEncoder(thread_id="th", run_id="r", messages=[user])
    out = encoder.start()
    for event in [*sink.events, TurnEndedEvent(1, "t1", final or None, 0)]:
        out.extend(encoder.feed(event))
    out.extend(encoder.feed(RunEndedEvent("r", "completed")))
    events = wire(out)
    for data in events:
        EVENT.validate_python(data)
    snapshots = apply(events, [{"id": "u", "role": "user", "content": "go"}])
    last = snapshots[-1]
    assert last[0]["id"] == "u"
    assistants = [m for m in last if m["role"] == "assistant"]
    assert "".join(m.get("content") or "" for m in assistants) == final
    for messages in snapshots:
        shown = "".join(str(m.get("content") or "") for m in messages)
        calls = [c["id"] for m in messages for c in m.get("toolCalls", ())]
        assert len({t for t in range(len(script)) if f"<{t}>" in shown}) <= 1, shown
        assert len(set(calls)) <= 1, calls  # one attempt's call, never two attempts'
    # What the encoder says the client holds is what the client holds.
    kept = [
        json.loads(m.model_dump_json(by_alias=True, exclude_none=True)) for m in encoder.messages
    ]
    assert [m.get("content") or "" for m in kept if m["role"] == "assistant"] == [
        m.get("content") or "" for m in assistants
    ]


def run_input(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": "th",
        "runId": "r1",
        "state": {},
        "messages": list(messages),
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def test_run_agent_input_becomes_a_prompt_and_a_transcript() -> None:
    body = run_input(
        {"id": "1", "role": "developer", "content": "Be brief."},
        {"id": "2", "role": "user", "content": "Weather?"},
        {
            "id": "3",
            "role": "assistant",
            "content": "Looking.",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            ],
        },
        {"id": "4", "role": "tool", "toolCallId": "c1", "content": "sunny"},
        {"id": "4r", "role": "reasoning", "content": "It said sunny."},
        {"id": "5", "role": "user", "content": [{"type": "text", "text": "Tomorrow?"}]},
    )
    prompt, history = chat_from_run_input(read_run_input(body))
    assert prompt == "Tomorrow?"
    assert history == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"messages": []}, "threadId|thread_id"),
        (run_input(), "must end with the user's"),
        (run_input({"id": "1", "role": "assistant", "content": "x"}), "must be the user's"),
        (run_input({"id": "1", "role": "user", "content": " "}), "no text"),
    ],
)
def test_input_that_cannot_be_run_is_refused_naming_it(body: dict[str, Any], named: str) -> None:
    with pytest.raises(AGUIInputError, match=named):
        chat_from_run_input(read_run_input(body))


async def test_the_endpoint_streams_the_fallback_and_the_client_ends_right() -> None:
    app = create_agui_app(Agent(fallback_model(), tools=[weather]))
    body = run_input({"id": "u1", "role": "user", "content": "Weather?"})
    response = await Client(app).request("POST", "/agui", json_body=body)
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in response.body.decode().split("\n\n") if f]
    events = [json.loads(f.removeprefix("data: ")) for f in frames]
    for data in events:
        EVENT.validate_python(data)
    assert events[0] == {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"}
    assert events[-1]["type"] == "RUN_FINISHED"
    snapshots = apply(events, [{"id": "u1", "role": "user", "content": "Weather?"}])
    assert any(any(m.get("content") == PARTIAL for m in s) for s in snapshots)
    last = snapshots[-1]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant"]
    assert last[-1]["content"] == FINAL
    assert json.loads(last[1]["toolCalls"][0]["function"]["arguments"]) == {"city": "Oslo"}


async def test_the_frames_generator_and_bad_requests() -> None:
    agent = Agent(fallback_model(), tools=[weather])
    async with agent.open_run("Weather?") as run:
        frames = [f async for f in agui_events(run, thread_id="th")]
    assert json.loads(frames[0].removeprefix("data: "))["runId"] == run.run_id
    app = create_agui_app(agent)
    response = await Client(app).request("POST", "/agui", json_body={"threadId": 3})
    assert response.status == 400
    assert "RunAgentInput" in response.json()["error"]


@pytest.mark.parametrize(
    ("method", "headers", "raw", "status", "says"),
    [
        ("POST", {"host": "evil.example"}, b"{}", 421, "host"),
        ("GET", {}, b"", 405, ""),
        ("POST", {"origin": "https://evil.example"}, b"{}", 403, "cross-site"),
        ("POST", {"content-type": "text/plain"}, b"{}", 415, "json"),
        ("POST", {"content-length": "99999999"}, b"", 413, "at most"),
        ("POST", {}, b"{not json", 400, "not JSON"),
        ("POST", {}, b"[1]", 400, "object"),
        ("POST", {}, b"[" * 100_000, 400, ""),
        (
            "POST",
            {},
            json.dumps(
                run_input({"id": "1", "role": "user", "content": [{"type": "binary"}]})
            ).encode(),
            400,
            "messages",
        ),
    ],
)
async def test_the_agui_endpoint_is_behind_the_web_views_gate(
    method: str, headers: dict[str, str], raw: bytes, status: int, says: str
) -> None:
    app = create_agui_app(Agent(fallback_model(), tools=[weather]), max_body_bytes=200_000)
    client = Client(app)
    headers = dict(headers)
    if "host" in headers:
        client.host = headers.pop("host")
    all_headers = {"content-type": "application/json", **headers}
    response = await client.request(method, "/agui", body=raw, headers=all_headers)
    assert response.status == status
    if says:
        assert says.lower() in response.json()["error"].lower()
    assert app.active == 0


async def test_the_agui_endpoint_asks_the_authorization_hook() -> None:
    agent = Agent(fallback_model(), tools=[weather])
    body = run_input({"id": "u1", "role": "user", "content": "Weather?"})
    asked: list[tuple[str, object]] = []

    def refuse(request: Any, action: str, owner: object) -> None:
        asked.append((action, owner))

    response = await Client(create_agui_app(agent, authorize=refuse)).request(
        "POST", "/agui", json_body=body
    )
    assert response.status == 403
    assert asked == [("start", None)]
    remote = Client(create_agui_app(agent), client=("203.0.113.9", 4000))
    response = await remote.request("POST", "/agui", json_body=body)
    assert response.status == 403
    allowed = create_agui_app(
        agent,
        authorize=lambda request, action, owner: "alice",
        allowed_origins=["https://app.example"],
    )
    response = await Client(allowed, client=("203.0.113.9", 4000)).request(
        "POST", "/agui", json_body=body, headers={"origin": "https://app.example"}
    )
    assert response.status == 200


CONFIRM = {
    "name": "confirm",
    "description": "Ask the user to confirm",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
}


async def confirming_model(turn: ModelTurn) -> ModelTurnResult:
    """Asks the client's ``confirm`` tool (which it must have been offered), then says
    what the answer was."""
    assert [t["function"]["name"] for t in turn.tools] == ["weather", "confirm"]
    last = turn.messages[-1]
    if last["role"] == "tool":
        return ModelTurnResult(content=f"The user said: {last['content']}")
    call = {
        "id": "c9",
        "type": "function",
        "function": {"name": "confirm", "arguments": '{"question": "Go?"}'},
    }
    return ModelTurnResult(content="Asking.", tool_calls=(call,))


def events_of(body: bytes) -> list[dict[str, Any]]:
    frames = [f for f in body.decode().split("\n\n") if f]
    events = [json.loads(f.removeprefix("data: ")) for f in frames]
    for data in events:
        EVENT.validate_python(data)
    return events


async def test_client_defined_tools_end_the_run_for_the_client_and_its_answer_goes_on() -> None:
    app = create_agui_app(Agent(confirming_model, tools=[weather]))
    user = {"id": "u1", "role": "user", "content": "Do it"}
    first = await Client(app).request("POST", "/agui", json_body=run_input(user, tools=[CONFIRM]))
    assert first.status == 200
    events = events_of(first.body)
    kinds = [e["type"] for e in events]
    assert kinds[-4:] == ["TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert "TOOL_CALL_RESULT" not in kinds  # the client runs it, not the server
    held = apply(events, [user])[-1]
    assert [m["role"] for m in held] == ["user", "assistant"]
    (call,) = held[1]["toolCalls"]
    assert call["id"] == "c9"
    assert json.loads(call["function"]["arguments"]) == {"question": "Go?"}
    # The client ran it; its next input carries the answer, and the run goes on.
    answer = {"id": "t1", "role": "tool", "toolCallId": "c9", "content": "yes"}
    second = await Client(app).request(
        "POST", "/agui", json_body=run_input(*held, answer, tools=[CONFIRM])
    )
    assert second.status == 200
    final = apply(events_of(second.body), [*held, answer])[-1]
    assert final[-1]["role"] == "assistant"
    assert final[-1]["content"] == "The user said: yes"


def test_the_input_s_tools_are_external_tools_and_its_answers_need_no_prompt() -> None:
    held = {
        "id": "a1",
        "role": "assistant",
        "content": "",
        "toolCalls": [
            {"id": "c9", "type": "function", "function": {"name": "confirm", "arguments": "{}"}}
        ],
    }
    answer = {"id": "t1", "role": "tool", "toolCallId": "c9", "content": "yes"}
    body = run_input({"id": "u1", "role": "user", "content": "Do it"}, held, answer)
    body["tools"] = [CONFIRM, {"name": "bare", "description": "", "parameters": None}]
    parsed = read_run_input(body)
    prompt, history = chat_from_run_input(parsed)
    assert prompt is None
    assert history[-1] == {"role": "tool", "tool_call_id": "c9", "content": "yes"}
    tools = client_tools(parsed)
    assert [(t.name, t.external, t.description) for t in tools] == [
        ("confirm", True, "Ask the user to confirm"),
        ("bare", True, None),
    ]
    assert tools[1].parameters == {"type": "object", "properties": {}}
    with pytest.raises(AGUIInputError, match=r"tools\[0\] \('bad'\)"):
        client_tools(
            read_run_input(
                run_input(
                    {"id": "u1", "role": "user", "content": "x"},
                    tools=[{"name": "bad", "description": "", "parameters": {"type": "array"}}],
                )
            )
        )
    with pytest.raises(TypeError, match="client_tools: run_input"):
        client_tools(body)  # type: ignore[arg-type]


async def test_a_client_tool_named_as_a_server_tool_is_refused() -> None:
    app = create_agui_app(Agent(confirming_model, tools=[weather]))
    clash = {**CONFIRM, "name": "weather"}
    body = run_input({"id": "u1", "role": "user", "content": "x"}, tools=[clash])
    response = await Client(app).request("POST", "/agui", json_body=body)
    assert response.status == 400
    assert "'weather' is already one of the agent's tools" in response.json()["error"]
