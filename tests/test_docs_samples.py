"""Every Python sample in the documentation runs.

Each page's ```` ```python ```` blocks are joined in order into one program
(a later block builds on an earlier one, as a reader follows the page) and
run on both anyio backends, on a virtual clock. A sample may ``await`` at the
top level, as in an async REPL: it is compiled with
``PyCF_ALLOW_TOP_LEVEL_AWAIT`` and the resulting coroutine is awaited.

A page whose sample calls a function of *your* application (where to load a
transcript from, say) gets a stand-in from ``HOST_CODE`` below, run before
the page; ``CHECKS`` then asserts what the page's code should have done, and
a web framework the package does not depend on is a stub (``STUB_MODULES``).
``NOT_RUN`` names the pages exempted, each with its reason.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from conftest import run_on
from juno_bind_trio import _tracing

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(?P<code>.*?)^```", re.S | re.M)

# Stand-ins for the host application's own functions that a page calls
# (storage, logging, a provider call), and checks run after the page.
HOST_CODE: dict[str, str] = {
    "how-to/serve-a-run-to-a-browser.md": """
import pathlib, tempfile
db_path = pathlib.Path(tempfile.mkdtemp()) / "runs.db"
""",
    "how-to/heal-a-transcript.md": """
import logging
log = logging.getLogger("docs")
run_id = "run-1"
_stored = {"run-1": [
    {"role": "user", "content": "Weather in Lisbon and Porto?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Porto"}'}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "clear"}'},
]}
def load_transcript(run_id):
    return list(_stored[run_id])
def save_transcript(run_id, messages):
    _stored[run_id] = list(messages)
class Receipt:
    def __init__(self, tool_call_id, started):
        self.tool_call_id, self.started = tool_call_id, started
receipts = [Receipt("call_1", True)]
def quarantine(run_id, message, reason):
    raise AssertionError(f"a valid transcript was quarantined: {reason}")
""",
    "how-to/sanitize-tool-schemas.md": """
import logging
log = logging.getLogger("docs")
args = {"query": "desk lamps", "limit": None}   # what the model sent in strict mode
""",
    "how-to/cancel-a-tool-batch.md": """
import logging
from juno_bind_trio.run import tool_call_id as _id
log = logging.getLogger("docs")
calls = [
    {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    for i in range(3)
]
started = []
async def dispatch(call):
    started.append(_id(call))
    return "found"
transcript = []
""",
    "how-to/stream-tokens.md": """
import anyio
from juno_bind_trio.routing import (
    Candidate, CircuitBreaker, ClassifiedError, RouteAction, RoutePlan, RouteStage,
)
message_id = turn_id = "run-1:1"
plan = RoutePlan([RouteStage("juno-large", [Candidate("primary"), Candidate("secondary")])])
breaker = CircuitBreaker()
async def call_provider(candidate, on_delta):
    on_delta("Let me think")
    await anyio.sleep(0.1)
    if candidate.provider == "primary":
        raise ConnectionResetError("the provider hung up mid-stream")
    on_delta(" about it: 42.")
    return "Let me think about it: 42."
def classify(exc, candidate, cursor):
    return ClassifiedError(RouteAction.NEXT_CANDIDATE, exc, reason="connection reset")
class Screen:
    text = None
    def update(self, text):
        self.text = text
screen = Screen()
persisted_text = "Let me think about it: 42."
async def load_persisted_message(turn_id):
    return persisted_text
""",
    "how-to/structured-output-retries.md": """
import types
from juno_bind_trio.routing import Candidate, CircuitBreaker, RoutePlan, RouteStage
message_id = "run-1:1"
plan = RoutePlan([RouteStage("juno-large", [Candidate("primary")])])
breaker = CircuitBreaker()
base_messages = [{"role": "user", "content": "The answer, as JSON."}]
asked = []
async def complete(candidate, messages, on_delta):
    asked.append(messages)
    text = "Sure! The answer is 42." if len(asked) == 1 else '{"answer": 42}'
    on_delta(text)
    return types.SimpleNamespace(content=text, tool_calls=())
""",
    "how-to/sub-agents.md": """
import anyio
from juno_bind_trio.loop import LoopState, ModelTurnResult, ToolLoop
run_id, child_run_id = "run-1", "run-2"
class Store:
    def __init__(self):
        self.runs = {}
    async def save_run(self, run_id, **fields):
        self.runs.setdefault(run_id, {}).update(fields)
    async def load_run(self, run_id):
        return self.runs[run_id]
    async def count_running_children(self, run_id):
        return 1
store = Store()
store.runs["run-2"] = {"status": "completed", "result": "three sources agree"}
async def _answer(turn):
    return ModelTurnResult(content="three sources agree")
def build_child_loop(run_id, stop):
    return ToolLoop(state=LoopState([{"role": "user", "content": "read"}]), max_iterations=2,
                    call_model=_answer, run_id=run_id, stop=stop)
""",
    "how-to/embed-in-anyio-or-asyncio.md": """
from juno_bind_trio.loop import LoopState
OPENAI_KEY, AZURE_URL, AZURE_KEY = "sk-test", "http://127.0.0.1:9/v1", "az-test"
async def run_tool_call(call):
    raise AssertionError("no tool is called")
state = LoopState([{"role": "user", "content": "hi"}])
sent = []
async def forward_to_websocket(events):
    async for event in events:
        sent.append(event.to_wire())
""",
}

# Web frameworks the package does not depend on, stubbed for the pages that
# show an integration with one.
STUB_MODULES: dict[str, dict[str, str]] = {
    "how-to/embed-in-anyio-or-asyncio.md": {
        "fastapi": """
import types
from juno_bind_trio.loop import ModelTurnResult
async def _scripted_model(turn):
    turn.text_stream.begin_attempt()
    turn.text_stream.observe("Hello from the model.")
    return ModelTurnResult(content="Hello from the model.")
class FastAPI:
    # Only what the page uses; the state its lifespan would fill (no network here).
    def __init__(self, lifespan=None):
        self.lifespan = lifespan
        self.state = types.SimpleNamespace(model=_scripted_model)
""",
    },
}

# A page that sets the process's global tracer provider (which OpenTelemetry
# lets a process do once) sets it for the package only, for the page's run:
# no other test in the process is traced.
TRACER_PROVIDER_PAGES = {"how-to/tracing.md"}
CHECKS: dict[str, str] = {
    "how-to/heal-a-transcript.md": """
healed = _stored["run-1"]
assert healed[-1]["role"] == "tool" and healed[-1]["tool_call_id"] == "call_2"
assert "interrupted" in healed[-1]["content"] or "not_run" in healed[-1]["content"]
""",
    "how-to/sanitize-tool-schemas.md": """
assert tool["input_schema"]["properties"]["query"]["type"] == "string"
assert set(strict.schema["required"]) == {"query", "limit"}
assert args == {"query": "desk lamps"}
""",
    "how-to/cancel-a-tool-batch.md": """
assert started == []                       # the stop was cancelled before anything was claimed
assert [m["tool_call_id"] for m in transcript] == ["call_0", "call_1", "call_2"]
assert all("not_run" in m["content"] for m in transcript)
""",
    "how-to/stream-tokens.md": """
assert result.ok and result.value == "Let me think about it: 42."
assert view.text == screen.text == "Let me think about it: 42." and view.final
""",
    "how-to/structured-output-retries.md": """
assert answer.content == '{"answer": 42}' and outcome == "succeeded" and len(asked) == 2
""",
    "how-to/sub-agents.md": """
assert child_chain.run_id == "run-2" and chain.run_id == "run-1"
assert result == "three sources agree"
with RunDeadline(600) as parent:
    assert await run_child(parent, anyio.CancelScope(), child_chain) == "three sources agree"
""",
    "how-to/embed-in-anyio-or-asyncio.md": """
assert sent and sent[-1]["text"] == "Hello from the model."
""",
    "how-to/reask-within-a-turn.md": """
assert result.reason == "completed" and len(asked) == 2
assert asked[1][:1] == asked[0] and asked[1][1]["content"] == "Lisbon, I think."
""",
    "how-to/request-options.md": """
assert "response_format" not in model.request_options and json_request["stream"] is True
""",
    "how-to/tracing.md": """
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurnResult
_seen = InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(_seen))
async def _answer(turn):
    return ModelTurnResult(content="Clear in Oslo.")
_result = await Agent(_answer, name="forecaster").run("Weather in Oslo?")
provider.shutdown()                        # flushes the batch and stops its thread
assert _result.output == "Clear in Oslo."
assert [s.name for s in _seen.get_finished_spans()] == ["invoke_agent forecaster"]
""",
}


HOST_CODE.update(
    {
        "explanation/completion.md": """
import contextlib
from juno_bind_trio.providers.openai import open_openai_client
from juno_bind_trio.testing import (
    ReasoningDelta, StreamResponse, TextDelta, open_fake_openai_server,
)
_resources = contextlib.AsyncExitStack()
_server = await _resources.enter_async_context(open_fake_openai_server([
    StreamResponse([ReasoningDelta("thinking"), TextDelta("Hello"), TextDelta(", world")])
]))
client = await _resources.enter_async_context(
    open_openai_client(base_url=_server.base_url, api_key="not-needed")
)
""",
        "explanation/tool-pool.md": """
import anyio
from juno_bind_trio.run import ToolBatch, tool_call_id
calls = [
    {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    for i in range(3)
]
async def dispatch(call):
    return "found " + tool_call_id(call)
stop = anyio.CancelScope()
answered = []
def answer_every_call(batch):
    answered.extend((tool_call_id(c), batch.result(i)) for i, c in enumerate(batch.calls))
""",
    }
)
CHECKS.update(
    {
        # The page is a script (its main() runs under `if __name__ == "__main__"`):
        # here main() runs on each backend, and prints what the page shows.
        "how-to/durable-runs.md": """
import contextlib as _contextlib, io as _io
_printed = _io.StringIO()
with _contextlib.redirect_stdout(_printed):
    await main()
assert _printed.getvalue().splitlines() == [
    "Done.",
    "r1 resumed: completed",
    "order-17 completed, charged 1 time(s)",
    "order-17: completed (no detail)",
    "export-1: cancelled (cancelled: a hard cancel (or a deadline) ended the run)",
], _printed.getvalue()
""",
        "explanation/completion.md": """
assert "".join(text) == "Hello, world"
await _resources.aclose()
""",
        "explanation/tool-pool.md": """
assert [(i, r.unwrap()) for i, r in answered] == [
    ("call_0", "found call_0"), ("call_1", "found call_1"), ("call_2", "found call_2")
]
""",
    }
)

# Pages whose Python blocks are not samples to run, and why. Everything else runs.
_AGENT_SCRIPTS = (
    "synchronous scripts (run_sync, trio.run) against testing.fake_openai_env on the real "
    "clock, which cannot run inside this test's event loop; tests/agent/test_doc_samples.py "
    "runs them and compares what they print with the page"
)
NOT_RUN: dict[str, str] = {
    "tutorial/first-run.md": "the excerpt of examples/fallback_demo.py it walks through "
    "(the demo itself runs in tests/test_examples.py)",
    "tutorial/agent.md": _AGENT_SCRIPTS,
    "how-to/agent-tools.md": _AGENT_SCRIPTS,
    "how-to/agent-context-and-deps.md": _AGENT_SCRIPTS,
    "how-to/agent-streaming.md": _AGENT_SCRIPTS,
    "how-to/agent-structured-output.md": _AGENT_SCRIPTS,
    "how-to/agent-conversation.md": _AGENT_SCRIPTS,
    "how-to/agent-cancel.md": _AGENT_SCRIPTS,
    "how-to/agent-usage-limits.md": _AGENT_SCRIPTS,
}


# Pages another harness runs, with what it needs (the agent pages talk to the
# fake provider through environment variables and compare printed output).
OTHER_HARNESSES = [Path(__file__).resolve().parent / "agent" / "test_doc_samples.py"]


def run_elsewhere() -> set[str]:
    return {
        page
        for harness in OTHER_HARNESSES
        if harness.exists()
        for page in re.findall(
            r'"((?:tutorial|how-to|explanation|reference)/[\w.-]+\.md)"',
            harness.read_text(encoding="utf-8"),
        )
    }


def pages() -> list[str]:
    elsewhere = run_elsewhere()
    return sorted(
        name
        for path in DOCS.rglob("*.md")
        if FENCE.search(path.read_text(encoding="utf-8"))
        and (name := str(path.relative_to(DOCS))) not in NOT_RUN
        and name not in elsewhere
    )


def program(page: str) -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    return "\n\n".join(m["code"] for m in FENCE.finditer(text))


async def run_code(source: str, filename: str, namespace: dict[str, Any]) -> None:
    code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        await result


@contextlib.contextmanager
def stub_modules(stubs: dict[str, types.ModuleType]) -> Iterator[None]:
    """*stubs* in ``sys.modules`` for the block; only they are taken out after it.

    Not ``mock.patch.dict(sys.modules, ...)``: that puts back the whole dict as it
    was, dropping every module the page imported for the first time (the
    ``openai`` SDK's HTTP stack, say). A later import then makes a second copy
    of such a module, whose exception classes the first copy's code, still
    referenced by others, does not recognise.
    """
    saved = {name: sys.modules[name] for name in stubs if name in sys.modules}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name in stubs:
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)


async def run_page(page: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__docs_sample__"}
    stubs = {}
    for name, source in STUB_MODULES.get(page, {}).items():
        module = types.ModuleType(name)
        exec(compile(source, f"<stub {name}>", "exec"), module.__dict__)
        stubs[name] = module
    with contextlib.ExitStack() as patches:
        patches.enter_context(stub_modules(stubs))
        if page in TRACER_PROVIDER_PAGES:
            patches.enter_context(mock.patch.object(_tracing, "_provider_override", None))
            patches.enter_context(
                mock.patch(
                    "opentelemetry.trace.set_tracer_provider",
                    lambda provider: setattr(_tracing, "_provider_override", provider),
                )
            )
        await run_code(HOST_CODE.get(page, ""), f"<host code for {page}>", namespace)
        await run_code(program(page), str(DOCS / page), namespace)
        await run_code(CHECKS.get(page, ""), f"<checks for {page}>", namespace)
    return namespace


@pytest.mark.parametrize("page", pages())
def test_page_samples_run(page: str, backend: str) -> None:
    run_on(backend, run_page, page)


def test_every_how_to_with_code_is_covered() -> None:
    covered = set(pages()) | run_elsewhere()
    how_tos = {
        str(p.relative_to(DOCS))
        for p in (DOCS / "how-to").glob("*.md")
        if "```python" in p.read_text(encoding="utf-8")
    }
    # The agent's pages are covered by tests/agent/test_doc_samples.py instead.
    elsewhere = {page for page, why in NOT_RUN.items() if why is _AGENT_SCRIPTS}
    assert how_tos <= covered | elsewhere
    assert len(how_tos) >= 10
    # An exemption names a page that exists and still has Python blocks.
    for page in NOT_RUN:
        assert FENCE.search((DOCS / page).read_text(encoding="utf-8")), page
