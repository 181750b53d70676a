"""The Vercel AI SDK UI message stream: the encoder, the request reader, the endpoint."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from asgi_driver import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from ui_stream_fixture import every_chunk

from juno_bind_trio.agent import Agent, RunEndedEvent, TurnEndedEvent, tool
from juno_bind_trio.completion import ToolCallDeltaEvent, TurnTextStream
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.web import (
    UI_MESSAGE_STREAM_HEADERS,
    UIMessageError,
    UIMessageStreamEncoder,
    chat_from_ui_messages,
    create_ui_message_stream_app,
    ui_message_stream,
)

pytestmark = pytest.mark.anyio


# --- a model of the client: what ai's processUIMessageStream does with the parts ---------


def apply_chunks(chunks: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The message's parts after each chunk, as the ai package builds them."""
    parts: list[dict[str, Any]] = []
    text_parts: dict[str, dict[str, Any]] = {}
    reasoning_parts: dict[str, dict[str, Any]] = {}
    snapshots = []
    for chunk in chunks:
        kind = chunk["type"]
        if kind == "start-step":
            parts.append({"type": "step-start"})
        elif kind == "text-start":
            part = {"type": "text", "text": ""}
            text_parts[chunk["id"]] = part
            parts.append(part)
        elif kind == "text-delta":
            text_parts[chunk["id"]]["text"] += chunk["delta"]
        elif kind == "text-end":
            text_parts.pop(chunk["id"])
        elif kind == "reasoning-start":
            part = {"type": "reasoning", "text": ""}
            reasoning_parts[chunk["id"]] = part
            parts.append(part)
        elif kind == "reasoning-delta":
            reasoning_parts[chunk["id"]]["text"] += chunk["delta"]
        elif kind == "reasoning-end":
            reasoning_parts.pop(chunk["id"])
        elif kind == "reset-step":
            start = max((i for i, p in enumerate(parts) if p["type"] == "step-start"), default=-1)
            del parts[start + 1 :]
            text_parts.clear()
            reasoning_parts.clear()
        elif kind == "tool-input-start":
            parts.append({"type": "tool", "id": chunk["toolCallId"], "state": "input-streaming"})
        snapshots.append([dict(p) for p in parts])
    return snapshots


def text_of(parts: Sequence[Mapping[str, Any]]) -> str:
    return "".join(p["text"] for p in parts if p["type"] == "text")


class DeltaSink:
    retractable = True

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any, /) -> None:
        self.events.append(event)

    def emit_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
        self.events.append(event)

    def emit_reasoning(self, event: Any, /) -> None:
        self.events.append(event)


attempts = st.lists(
    st.lists(
        st.one_of(st.text(alphabet="abc ~", min_size=1, max_size=4), st.just(None)),
        max_size=5,
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None)
@given(script=attempts)
def test_the_client_ends_with_the_last_attempts_text_and_never_a_splice(
    script: list[list[str | None]],
) -> None:
    """However the attempts failed, the client's text is the answer's, and no
    snapshot ever holds two attempts' text (each piece is tagged with its attempt)."""
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    final = ""
    for number, pieces in enumerate(script):
        stream.begin_attempt()
        final = ""
        for piece in pieces:
            if piece is None:  # a tool-call fragment of this attempt
                stream.tool_call_delta(0, f"call{number}", "look", "{}")
            elif piece.startswith("~"):  # a piece of this attempt's thinking
                stream.reasoning(f"<{number}>{piece}")
            else:
                tagged = f"<{number}>{piece}"
                stream.observe(tagged)
                final += tagged
    stream.finish("succeeded")
    encoder = UIMessageStreamEncoder(message_id="m")
    chunks = encoder.start()
    for event in [*sink.events, TurnEndedEvent(1, "t1", final or None, 0)]:
        chunks.extend(encoder.feed(event))
    chunks.extend(encoder.feed(RunEndedEvent("r", "completed")))
    snapshots = apply_chunks(chunks)
    assert text_of(snapshots[-1]) == final
    for parts in snapshots:
        shown = "".join(p.get("text", "") for p in parts)  # text and reasoning
        assert len({tag for tag in range(len(script)) if f"<{tag}>" in shown}) <= 1, shown
    last = len(script) - 1
    assert all(f"<{last}>" in p["text"] for p in snapshots[-1] if p["type"] == "reasoning")
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


def test_every_chunk_type_in_order_with_tool_states_said_truthfully() -> None:
    chunks = every_chunk()
    kinds = [c["type"] for c in chunks]
    assert kinds[:7] == [
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
    ]
    assert kinds.index("reset-step") < kinds.index("tool-input-start")
    # The withdrawn attempt's thinking goes with it; the next turn's is its own part.
    snapshots = apply_chunks(chunks)
    reasoning = [p["text"] for p in snapshots[-1] if p["type"] == "reasoning"]
    assert reasoning == ["All answered."]
    assert any(
        [p["text"] for p in s if p["type"] == "reasoning"] == ["Hmm, the weather."]
        for s in snapshots
    )
    starts = [c["id"] for c in chunks if c["type"] == "reasoning-start"]
    ends = [c["id"] for c in chunks if c["type"] == "reasoning-end"]
    assert starts == ends
    assert len(set(starts)) == 2
    outputs = {c["toolCallId"]: c for c in chunks if c["type"].startswith("tool-output")}
    assert outputs["c1"] == {
        "type": "tool-output-available",
        "toolCallId": "c1",
        "output": {"found": 1},
    }
    assert outputs["c3"]["errorText"] == "boom"
    assert outputs["c4"]["errorText"] == "interrupted: cut off"
    assert outputs["c5"]["errorText"] == "not run: stop"
    (bad,) = [c for c in chunks if c["type"] == "tool-input-error"]
    assert bad["toolCallId"] == "c2"
    assert bad["input"] == "{not json"
    available = [c["toolCallId"] for c in chunks if c["type"] == "tool-input-available"]
    assert available == ["c1", "c3", "c4", "c5"]
    assert kinds[-3:] == ["finish-step", "error", "finish"]
    assert chunks[-1]["finishReason"] == "error"
    assert {
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-delta",
        "tool-output-error",
        "start-step",
        "finish-step",
    } <= set(kinds)


# --- the request side ---------------------------------------------------------------


def ui(role: str, *parts: dict[str, Any], id: str = "x") -> dict[str, Any]:
    return {"id": id, "role": role, "parts": list(parts)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_use_chats_messages_become_a_prompt_and_a_transcript() -> None:
    messages = [
        ui("system", text("Be brief.")),
        ui("user", text("Weather?")),
        ui(
            "assistant",
            {"type": "step-start"},
            text("Looking."),
            {
                "type": "tool-weather",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Oslo"},
                "output": {"sky": "clear"},
            },
            {
                "type": "dynamic-tool",
                "toolName": "mcp_lookup",
                "toolCallId": "c2",
                "state": "output-error",
                "input": {},
                "errorText": "no server",
            },
            {"type": "step-start"},
            {"type": "reasoning", "text": "hm"},
            text("Clear."),
        ),
        ui("user", text("And "), text("tomorrow?")),
    ]
    prompt, history = chat_from_ui_messages(messages)
    assert prompt == "And tomorrow?"
    assert history == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "mcp_lookup", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"sky": "clear"}'},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": '{"success":false,"error":"no server"}',
        },
        {"role": "assistant", "content": "Clear."},
    ]
    regenerated = chat_from_ui_messages(
        [*messages[:2], ui("assistant", text("Old answer"))], trigger="regenerate-message"
    )
    assert regenerated == ("Weather?", [{"role": "system", "content": "Be brief."}])


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ([], "non-empty list"),
        (
            [ui("user", {"type": "file", "url": "x", "mediaType": "image/png"})],
            r"messages\[0\]\.parts\[0\]",
        ),
        (
            [ui("user", text("a")), ui("assistant", {"type": "mystery"}), ui("user", text("b"))],
            r"messages\[1\]\.parts\[0\].*'mystery'",
        ),
        ([ui("tool", text("a"))], r"messages\[0\]\.role"),
        ([ui("user", text("   "))], "no text"),
        ([ui("user", text("a")), ui("assistant", text("b"))], "must be the user's"),
        ([{"id": "x", "role": "user", "parts": "hi"}], r"messages\[0\]\.parts must be a list"),
        (
            [
                ui("user", text("a")),
                ui("assistant", {"type": "tool-x", "toolCallId": "c", "state": "weird"}),
                ui("user", text("b")),
            ],
            r"messages\[1\]\.parts\[0\]\.state",
        ),
    ],
)
def test_what_cannot_be_read_is_refused_naming_the_part(messages: Any, named: str) -> None:
    with pytest.raises(UIMessageError, match=named):
        chat_from_ui_messages(messages)


# --- the endpoint -------------------------------------------------------------------

PARTIAL = "Let me guess"
FINAL = "Sunny in Oslo."


RELEASE: dict[str, anyio.Event] = {}


@tool
async def weather(city: str) -> str:
    """Weather."""
    if city == "Slowtown":
        await anyio.sleep_forever()  # until the run is cancelled: no deadline to jump to
    if city == "Waittown":
        RELEASE["entered"].set()
        await RELEASE["Waittown"].wait()
    return f"{city}: sunny"


def fallback_model(city: str = "Oslo") -> Any:
    """A model whose first attempt dies mid-text and whose retry calls weather, then answers."""

    async def model(turn: ModelTurn) -> ModelTurnResult:
        stream = turn.text_stream
        assert stream is not None
        if turn.messages[-1]["role"] == "tool":
            stream.begin_attempt()
            stream.observe("Sunny ")
            stream.observe("in Oslo.")
            return ModelTurnResult(content=FINAL)
        stream.begin_attempt()
        stream.observe(PARTIAL)
        await anyio.sleep(0.5)
        stream.begin_attempt()  # the fallback
        arguments = json.dumps({"city": city})
        stream.tool_call_delta(0, "c1", "weather", arguments[:5])
        stream.tool_call_delta(0, None, None, arguments[5:])
        return ModelTurnResult(
            tool_calls=[
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": arguments},
                }
            ]
        )

    return model


class Recording:
    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.transcripts: list[list[dict[str, Any]]] = []
        self.run_ids: list[str] = []

    @asynccontextmanager
    async def open_run(
        self, prompt: str, *, message_history: Sequence[Mapping[str, Any]] | None = None
    ) -> AsyncIterator[Any]:
        run = None
        try:
            async with self.agent.open_run(prompt, message_history=message_history) as run:
                self.run_ids.append(run.run_id)
                yield run
        finally:
            if run is not None:
                self.transcripts.append([dict(m) for m in run.messages])


def chat_body(prompt: str) -> dict[str, Any]:
    return {"id": "chat", "messages": [ui("user", text(prompt))], "trigger": "submit-message"}


def chunks_of(body: bytes) -> list[dict[str, Any]]:
    frames = [f for f in body.decode().split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    return [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]


async def test_the_endpoint_streams_a_fallback_as_one_answer() -> None:
    app = create_ui_message_stream_app(Agent(fallback_model(), tools=[weather]))
    response = await Client(app).request("POST", "/api/chat", json_body=chat_body("Weather?"))
    assert response.status == 200
    for key, value in UI_MESSAGE_STREAM_HEADERS.items():
        assert response.headers[key] == value
    chunks = chunks_of(response.body)
    snapshots = apply_chunks(chunks)
    assert text_of(snapshots[-1]) == FINAL
    assert any(text_of(s) == PARTIAL for s in snapshots)
    kinds = [c["type"] for c in chunks]
    assert kinds.count("start-step") == kinds.count("finish-step") == 2
    assert "reset-step" in kinds
    deltas = "".join(c["inputTextDelta"] for c in chunks if c["type"] == "tool-input-delta")
    assert json.loads(deltas) == {"city": "Oslo"}
    (output,) = [c for c in chunks if c["type"] == "tool-output-available"]
    assert output["output"] == "Oslo: sunny"


async def test_the_frames_generator_works_in_any_framework() -> None:
    agent = Agent(fallback_model(), tools=[weather])
    async with agent.open_run("Weather?") as run:
        frames = [frame async for frame in ui_message_stream(run, message_id="m-1")]
    assert frames[0] == 'data: {"type":"start","messageId":"m-1"}\n\n'
    assert frames[-1] == "data: [DONE]\n\n"
    assert text_of(apply_chunks(chunks_of("".join(frames).encode()))[-1]) == FINAL


async def post_and_leave(app: Any, prompt: str, *, bounded: bool = True) -> list[dict[str, Any]]:
    """POST *prompt* to *app*; go away (http.disconnect) once the tool's input is available.

    Returns the chunks read before leaving; the app's call returns when its run has ended.
    """
    body = json.dumps(chat_body(prompt)).encode()
    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "path": "/api/chat",
        "raw_path": b"/api/chat",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "http_version": "1.1",
        "asgi": {"version": "3.0"},
    }
    gone = anyio.Event()
    asked = False
    seen: list[dict[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if gone.is_set():
            raise AssertionError("the app wrote to a client that had gone")
        if message["type"] == "http.response.body" and message.get("body"):
            for frame in message["body"].decode().split("\n\n"):
                if frame.startswith("data: {"):
                    chunk = json.loads(frame.removeprefix("data: "))
                    seen.append(chunk)
                    if chunk["type"] == "tool-input-available":
                        gone.set()  # useChat's stop(): the fetch is aborted mid-tool

    # Unbounded where a store works in threads: the autojump clock would jump
    # to the bound whenever every task waits on one.
    with anyio.fail_after(30 if bounded else None):
        await app(scope, receive, send)
    assert gone.is_set()
    return seen


async def test_a_client_that_goes_away_cancels_the_run_and_every_call_is_answered() -> None:
    recording = Recording(Agent(fallback_model("Slowtown"), tools=[weather]))
    app = create_ui_message_stream_app(recording)
    await post_and_leave(app, "Weather in Slowtown?")
    (transcript,) = recording.transcripts
    (answer,) = [m for m in transcript if m["role"] == "tool"]
    assert answer["tool_call_id"] == "c1"
    assert json.loads(answer["content"])["kind"] == "interrupted"
    assert app.active == 0


async def test_the_cancelled_run_is_stored_with_every_call_answered(tmp_path: Any) -> None:
    path = tmp_path / "runs.db"
    recording = Recording(Agent(fallback_model("Slowtown"), tools=[weather], store=str(path)))
    app = create_ui_message_stream_app(recording)
    await post_and_leave(app, "Weather in Slowtown?", bounded=False)
    (run_id,) = recording.run_ids
    async with SqliteRunStore(path) as store:
        stored, receipts = await store.load_with_receipts(run_id)
    assert stored.record.status == "cancelled"
    # The turn the cancel cut is kept open, each of its calls answered by its receipt.
    assert stored.pending_turn is not None
    asked = [call["id"] for call in stored.pending_turn["tool_calls"]]
    assert asked == ["c1"]
    assert {r.tool_call_id: r.state for r in receipts} == {"c1": "interrupted"}


async def test_on_disconnect_continue_leaves_the_run_going_to_its_end() -> None:
    RELEASE["Waittown"] = anyio.Event()
    RELEASE["entered"] = anyio.Event()
    recording = Recording(Agent(fallback_model("Waittown"), tools=[weather]))
    app = create_ui_message_stream_app(recording, on_disconnect="continue")
    async with anyio.create_task_group() as tasks:
        seen: list[list[dict[str, Any]]] = []

        async def client() -> None:
            seen.append(await post_and_leave(app, "Weather in Waittown?"))

        tasks.start_soon(client)
        await RELEASE["entered"].wait()
        await anyio.sleep(1)  # the client has gone; the run waits in its tool
        assert app.active == 1
        RELEASE["Waittown"].set()
    (transcript,) = recording.transcripts
    (answer,) = [m for m in transcript if m["role"] == "tool"]
    assert answer["content"] == "Waittown: sunny"
    assert transcript[-1] == {"role": "assistant", "content": FINAL}
    assert app.active == 0


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
            json.dumps({"messages": [ui("user", {"type": "file"})]}).encode(),
            400,
            "parts[0]",
        ),
    ],
)
async def test_refusals_are_4xx_and_say_why(
    method: str, headers: dict[str, str], raw: bytes, status: int, says: str
) -> None:
    app = create_ui_message_stream_app(
        Agent(fallback_model(), tools=[weather]), max_body_bytes=200_000
    )
    client = Client(app)
    headers = dict(headers)  # the parameters are shared by both backends' runs
    if "host" in headers:
        client.host = headers.pop("host")
    all_headers = {"content-type": "application/json", **headers}
    response = await client.request(method, "/api/chat", body=raw, headers=all_headers)
    assert response.status == status
    if says:
        assert says.lower() in response.json()["error"].lower()


def test_bad_wiring_is_refused_at_construction() -> None:
    agent = Agent(fallback_model(), tools=[weather])
    with pytest.raises(TypeError, match="open_run"):
        create_ui_message_stream_app(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_disconnect"):
        create_ui_message_stream_app(agent, on_disconnect="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_active_runs"):
        create_ui_message_stream_app(agent, max_active_runs=0)
    with pytest.raises(TypeError, match="authorize"):
        create_ui_message_stream_app(agent, authorize="yes")  # type: ignore[arg-type]


async def test_the_authorization_hook_decides() -> None:
    agent = Agent(fallback_model(), tools=[weather])
    refused = create_ui_message_stream_app(agent, authorize=lambda request, action, owner: None)
    response = await Client(refused).request("POST", "/api/chat", json_body=chat_body("hi"))
    assert response.status == 403
    remote = Client(create_ui_message_stream_app(agent), client=("203.0.113.9", 4000))
    response = await remote.request("POST", "/api/chat", json_body=chat_body("hi"))
    assert response.status == 403


async def test_what_the_agent_refuses_in_the_history_is_a_400() -> None:
    class Refusing:
        def open_run(self, prompt: str, *, message_history: Any = None) -> Any:
            raise ValueError("Agent.open_run: message_history[0]: not a message")

    app = create_ui_message_stream_app(Refusing())
    response = await Client(app).request("POST", "/api/chat", json_body=chat_body("hi"))
    assert response.status == 400
    assert "message_history[0]" in response.json()["error"]
