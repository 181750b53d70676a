"""Every Python sample in the documentation runs, and every how-to page runs as a script.

Each page's ```` ```python ```` blocks are joined in order into one program
(a later block builds on an earlier one, as a reader follows the page).

As a script (``test_the_page_runs_as_a_script``): every how-to page's program
is written to a file and run as ``python page.py`` in a fresh process (forked
from a server that has imported the package: ``script_runner.py``), on the
real clock, bounded by a timeout: it must exit 0, with no traceback, and
print exactly what the page shows (its ```` ```text ```` blocks, joined in
order; other output-like blocks use ```` ```sh ````, ```` ```html ```` and so
on). A page that serves (a web app) is driven over HTTP on 127.0.0.1 by a
function of ``SERVED``, then stopped with Ctrl-C (SIGINT).

In process (``test_page_samples_run``): the program runs on both anyio
backends on a virtual clock. A script's ``main()`` under ``if __name__ ==
"__main__":`` is awaited on the test's backend; an explanation page's excerpt
may ``await`` at the top level, as in an async REPL (compiled with
``PyCF_ALLOW_TOP_LEVEL_AWAIT``), with stand-ins for the host's functions from
``HOST_CODE`` and checks from ``CHECKS``. ``NOT_RUN`` names the pages this
part leaves out, each with its reason.
"""

from __future__ import annotations

import ast
import contextlib
import http.client
import inspect
import json
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from conftest import run_on
from juno_bind_trio import _tracing
from script_runner import run_script, start_script

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(?P<code>.*?)^```", re.S | re.M)

MAIN_GUARD = re.compile(r'^if __name__ == "__main__":$', re.M)

# Stand-ins for the host application's own functions that a page calls, and
# checks run after the page. The how-to pages define their own stand-ins (they
# run as scripts, as written); these serve the explanation pages' excerpts.
HOST_CODE: dict[str, str] = {}

# A page that sets the process's global tracer provider (which OpenTelemetry
# lets a process do once) sets it for the package only, for the page's run:
# no other test in the process is traced.
TRACER_PROVIDER_PAGES = {"how-to/tracing.md"}
CHECKS: dict[str, str] = {
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
_REAL_CLOCK = (
    "a script on the real clock (a fake server in a thread, a subprocess, or a server it "
    "serves), which cannot run inside this test's event loop; test_the_page_runs_as_a_script "
    "runs it"
)
NOT_RUN: dict[str, str] = {
    "tutorial/first-run.md": "the excerpt of examples/fallback_demo.py it walks through "
    "(the demo itself runs in tests/test_examples.py)",
    "how-to/run-a-tool-loop.md": _REAL_CLOCK,
    "how-to/use-mcp-servers.md": _REAL_CLOCK,
    "how-to/embed-in-anyio-or-asyncio.md": _REAL_CLOCK,
    "how-to/serve-a-run-to-a-browser.md": _REAL_CLOCK,
    "tutorial/agent.md": _AGENT_SCRIPTS,
    "how-to/agent-tools.md": _AGENT_SCRIPTS,
    "how-to/agent-context-and-deps.md": _AGENT_SCRIPTS,
    "how-to/agent-streaming.md": _AGENT_SCRIPTS,
    "how-to/agent-structured-output.md": _AGENT_SCRIPTS,
    "how-to/agent-conversation.md": _AGENT_SCRIPTS,
    "how-to/agent-cancel.md": _AGENT_SCRIPTS,
    "how-to/agent-usage-limits.md": _AGENT_SCRIPTS,
    "how-to/use-anthropic.md": _REAL_CLOCK,
    "how-to/use-google.md": _REAL_CLOCK,
    "how-to/use-openai-responses.md": _REAL_CLOCK,
    "how-to/use-bedrock.md": _REAL_CLOCK,
    "how-to/agent-testing.md": _AGENT_SCRIPTS,
    "how-to/agent-output-modes.md": _AGENT_SCRIPTS,
    "how-to/handoffs.md": _AGENT_SCRIPTS,
    "how-to/guardrails.md": _AGENT_SCRIPTS,
    "how-to/tools-per-step.md": _AGENT_SCRIPTS,
    "how-to/history-processors.md": _AGENT_SCRIPTS,
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
    # dont_inherit: the page is compiled as its own module would be, without this
    # file's `from __future__ import annotations`.
    code = compile(
        source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        await result


async def run_page(page: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__docs_sample__"}
    source = program(page)
    with contextlib.ExitStack() as patches:
        if page in TRACER_PROVIDER_PAGES:
            patches.enter_context(mock.patch.object(_tracing, "_provider_override", None))
            patches.enter_context(
                mock.patch(
                    "opentelemetry.trace.set_tracer_provider",
                    lambda provider: setattr(_tracing, "_provider_override", provider),
                )
            )
        await run_code(HOST_CODE.get(page, ""), f"<host code for {page}>", namespace)
        await run_code(source, str(DOCS / page), namespace)
        if MAIN_GUARD.search(source):
            await namespace["main"]()  # what `anyio.run(main)` runs, on this test's backend
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
    # The agent's pages are covered by tests/agent/test_doc_samples.py instead, and
    # the real-clock scripts by test_the_page_runs_as_a_script alone.
    elsewhere = {page for page, why in NOT_RUN.items() if why in (_AGENT_SCRIPTS, _REAL_CLOCK)}
    assert how_tos <= covered | elsewhere
    assert len(how_tos) >= 10
    # An exemption names a page that exists and still has Python blocks.
    for page in NOT_RUN:
        assert FENCE.search((DOCS / page).read_text(encoding="utf-8")), page


# --- every how-to page, as a script -------------------------------------------------------

TEXT = re.compile(r"^```text\n(?P<text>.*?)^```", re.S | re.M)
SCRIPT_TIMEOUT = 120.0
# As the README's commands run: warnings about unclosed sockets are errors;
# the openai SDK's abandoned SSE generators (harmless, see pyproject.toml) are not.
SCRIPT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "PYTHONWARNINGS": "error::ResourceWarning,ignore:Async generator:ResourceWarning",
    "PYTHONUNBUFFERED": "1",
}


def shown_output(page: str) -> str:
    """What the page says its program prints: its text blocks, joined in order."""
    return "".join(m["text"] for m in TEXT.finditer((DOCS / page).read_text(encoding="utf-8")))


def how_to_pages() -> list[str]:
    return sorted(
        str(path.relative_to(DOCS))
        for path in (DOCS / "how-to").glob("*.md")
        if FENCE.search(path.read_text(encoding="utf-8"))
    )


def write_script(page: str, folder: Path) -> Path:
    script = folder / (Path(page).stem.replace("-", "_") + ".py")
    script.write_text(program(page), encoding="utf-8")
    return script


class Served:
    """A page's script serving on 127.0.0.1: its URL once up, and what it printed."""

    def __init__(self, script: Path, announce: re.Pattern[str], *, on_stderr: bool) -> None:
        self.process = start_script(script, cwd=script.parent, env={**SCRIPT_ENV, "PORT": "0"})
        self.before: list[str] = []  # stdout lines before the announcement
        stream = self.process.stderr if on_stderr else self.process.stdout
        assert stream is not None
        deadline = time.monotonic() + SCRIPT_TIMEOUT
        while time.monotonic() < deadline:
            line = stream.readline()
            if not line:
                break
            found = announce.search(line)
            if found:
                self.url = found["url"]
                return
            if not on_stderr:
                self.before.append(line)
        self.process.kill()
        raise AssertionError(f"{script.name} never announced its URL: {self.process.stderr}")

    def request(self, method: str, path: str, body: object = None) -> tuple[int, str]:
        host, port = self.url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            payload = None if body is None else json.dumps(body)
            headers = {} if body is None else {"content-type": "application/json"}
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            return response.status, response.read().decode("utf-8")
        finally:
            connection.close()

    def interrupt(self) -> tuple[int, str, str]:
        """Ctrl-C; the exit status and whatever else it printed."""
        self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=SCRIPT_TIMEOUT)
        return self.process.wait(), out, err


def sse_data(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def drive_the_fastapi_app(script: Path) -> None:
    app = Served(
        script, re.compile(r"Uvicorn running on (?P<url>http://[\d.]+:\d+)"), on_stderr=True
    )
    try:
        status, body = app.request("GET", "/ask?question=Weather%20in%20Lisbon%3F")
        assert status == 200, body
        events = sse_data(body)
        kinds = [event["kind"] for event in events]
        # The tool-calling turn: its arguments stream first, then it ends.
        streamed = "".join(e["delta"] for e in events if e["kind"] == "tool_call_delta")
        assert streamed == '{"city": "Lisbon"}', events
        kinds = [kind for kind in kinds if kind != "tool_call_delta"]
        assert kinds[0] == "turn_ended", kinds
        assert kinds[-1] == "run_ended", kinds
        assert "tool_call_ended" in kinds
        text = "".join(event["text"] for event in events if event["kind"] == "text")
        assert text == "Clear skies in Lisbon."
        assert events[-1]["reason"] == "completed"
    finally:
        code, _, err = app.interrupt()
    assert code == 0, err
    assert "Exception ignored" not in err, err
    assert "Traceback" not in err, err
    assert "Application shutdown complete" in err  # the lifespan (and the agent) closed


def drive_the_live_view(script: Path) -> None:
    app = Served(script, re.compile(r"^open (?P<url>http://[\d.]+:\d+)/$"), on_stderr=False)
    try:
        assert "".join(app.before) == shown_output("how-to/serve-a-run-to-a-browser.md")
        status, body = app.request("POST", "/runs", {"prompt": "What is six times seven?"})
        assert status == 201, body
        status, body = app.request("GET", json.loads(body)["events"])
        assert status == 200, body
        events = sse_data(body)
        text = "".join(event["text"] for event in events if event.get("kind") == "text")
        assert text == "Forty-two."
        assert any(event.get("kind") == "run_ended" for event in events)
        status, page = app.request("GET", "/")
        assert status == 200
        assert "live-view.js" in page
    finally:
        code, out, err = app.interrupt()
    assert code == 0, err
    assert out == ""
    assert "Traceback" not in err, err


# Pages whose script serves until Ctrl-C: how the test talks to them.
SERVED: dict[str, Callable[[Path], None]] = {
    "how-to/embed-in-anyio-or-asyncio.md": drive_the_fastapi_app,
    "how-to/serve-a-run-to-a-browser.md": drive_the_live_view,
}


@pytest.mark.parametrize("page", how_to_pages())
def test_the_page_runs_as_a_script(page: str, tmp_path: Path) -> None:
    script = write_script(page, tmp_path)
    if page in SERVED:
        SERVED[page](script)
        return
    completed = run_script(script, cwd=tmp_path, env=SCRIPT_ENV, timeout=SCRIPT_TIMEOUT)
    assert completed.returncode == 0, completed.stderr
    # Nothing raised where it could not propagate (a finalizer, a warning made an
    # error). A traceback as such may be a log record: a failed tool's, at WARNING.
    assert "Exception ignored" not in completed.stderr, completed.stderr
    assert completed.stdout == shown_output(page)


def test_every_how_to_page_with_code_is_a_script() -> None:
    pages = how_to_pages()
    assert len(pages) >= 20
    for page in pages:
        source = program(page)
        # A script: no top-level await, which only an async REPL accepts.
        compile(source, page, "exec")
        assert set(SERVED) <= set(pages)
