"""The example's page in real headless Chromium: the reset is seen, Stop answers every call.

The example runs as the command a user types (``python examples/live_view.py
--port 0``), on the wall clock, at its 30 tokens a second; the browser waits
for what the page shows, never for a fixed time.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from browser import ARTIFACTS, example_server, launched

PARTIAL_START = "Let me work those out in my head"
NARRATION = "I will use the tools for this."

# Installed before the run starts: records every text any turn element ever
# showed, straight from the DOM, so "never both at once" is checked on what
# the user could have seen, not on the client's own bookkeeping; and the
# first turn's laid-out height at each change, while it streams.
WATCH_TURNS = """
() => {
  window.turnTexts = [];
  window.turnHeights = [];
  const turns = document.getElementById("turns");
  new MutationObserver(() => {
    for (const el of turns.querySelectorAll(".turn")) window.turnTexts.push(el.textContent);
    const first = turns.querySelector(".turn");
    if (first !== null && first.getAttribute("aria-busy") === "true") {
      window.turnHeights.push([first.textContent, first.getBoundingClientRect().height]);
    }
  }).observe(turns, { subtree: true, childList: true, characterData: true, attributes: true });
}
"""


@pytest.mark.one_backend_by_default
def test_the_page_shows_the_reset_and_stop_answers_every_call(backend: str) -> None:
    server = example_server("--tool-seconds", "4", "--backend", backend)
    with server as (url, process), launched() as page:
        page.goto(url)
        page.evaluate(WATCH_TURNS)
        page.click("#start")
        first = page.locator(".turn").first
        # The failing attempt's partial text appears ...
        page.wait_for_function(
            f"() => document.querySelector('.turn')?.textContent.includes({PARTIAL_START!r})",
            timeout=20_000,
        )
        assert first.get_attribute("aria-busy") == "true"
        # ... and is then replaced by the fallback's text.
        page.wait_for_function(
            f"() => document.querySelector('.turn')?.textContent === {NARRATION!r}",
            timeout=20_000,
        )
        shown: list[str] = page.evaluate("window.turnTexts")
        assert any(PARTIAL_START in text for text in shown)
        assert not [t for t in shown if PARTIAL_START in t and "tools" in t]
        # The box kept its height through the reset: the same before, at and
        # after it (every text here fits one line), never the padding more.
        heights: list[list[object]] = page.evaluate("window.turnHeights")
        texts = [text for text, _ in heights]
        reset_at = next(
            i for i in range(1, len(texts)) if not str(texts[i]).startswith(str(texts[i - 1]))
        )
        before, at, after = heights[reset_at - 1][1], heights[reset_at][1], heights[-1][1]
        assert PARTIAL_START in str(heights[reset_at - 1][0])
        assert before == at == after, heights
        assert {height for _, height in heights} == {before}, heights
        # The turn ends: not busy any more, and announced once.
        page.wait_for_selector(".turn[aria-busy='false']", timeout=20_000)
        assert page.text_content("#announcer") == NARRATION
        # Stop while the tool batch runs.
        page.wait_for_selector("#tools li[data-status='running']", timeout=20_000)
        page.click("#stop")
        page.wait_for_function(
            "() => document.getElementById('status').textContent === 'ended'"
            " && document.getElementById('transcript').textContent !== ''",
            timeout=30_000,
        )
        page.click("#transcript-box summary")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"live_view_stopped_{backend}.png"), full_page=True)
        assert page.text_content("#reason") == "(stopped)"
        transcript = json.loads(page.text_content("#transcript") or "[]")
        asked = [
            call["id"]
            for message in transcript
            if message["role"] == "assistant"
            for call in message.get("tool_calls") or []
        ]
        answered = [m["tool_call_id"] for m in transcript if m["role"] == "tool"]
        assert len(asked) == 4
        assert sorted(answered) == sorted(asked)
        statuses = page.eval_on_selector_all(
            "#tools li", "items => items.map(item => item.dataset.status)"
        )
        assert "not_run" in statuses
        assert "running" not in statuses
        assert page.locator(".turn").count() == 1  # no model turn after the stop
        assert page.is_disabled("#stop")
        # Ctrl-C ends the server cleanly.
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert process.stdout is not None
        assert "Stopped." in process.stdout.read()


RENDERER_PAGE = """<!doctype html>
<html><head><style>
  body { margin: 0; font: 16px/20px sans-serif; }
  .turn { width: 240px; padding: 7px 9px 5px; border: 3px solid #333; }
  #border-box .turn { box-sizing: border-box; }
</style></head>
<body><section id="content-box"></section><section id="border-box"></section>
<script type="module">
  import { TurnRenderer } from "/static/renderer.js";
  window.measure = (sectionId) => {
    const renderer = new TurnRenderer(document.getElementById(sectionId));
    const height = () => renderer.elementFor("t1").getBoundingClientRect().height;
    const seen = [];
    renderer.update("t1", "A first attempt, long enough to wrap over two lines or more.");
    seen.push(height());                       // before the reset
    renderer.update("t1", "");                  // the reset
    seen.push(height());
    renderer.update("t1", "The retry");         // after it, shorter
    seen.push(height());
    renderer.update("t1", "The retry, then");
    renderer.update("t1", "A");                 // a second reset
    seen.push(height());
    renderer.finish("t1", "The retry.");        // the end lets go of the height
    seen.push(height());
    return seen;
  };
  window.ready = true;
</script></body></html>
"""


def test_a_reset_holds_the_boxs_height_exactly_whatever_its_padding_and_box_sizing() -> None:
    """The renderer alone, in real Chromium: the box measures the same before, at
    and after each reset, with padding and borders, in both box-sizing models."""
    from juno_bind_trio.web import STATIC_DIR

    def answer(route: Any) -> None:
        path = route.request.url.split("://", 1)[1].split("/", 1)[1]
        if path == "":
            route.fulfill(status=200, content_type="text/html", body=RENDERER_PAGE)
        elif path.startswith("static/") and (STATIC_DIR / path[7:]).is_file():
            body = (STATIC_DIR / path[7:]).read_text()
            route.fulfill(status=200, content_type="text/javascript", body=body)
        else:
            route.fulfill(status=404, body="")

    with launched() as page:
        page.route("http://renderer.test/**", answer)
        page.goto("http://renderer.test/")
        page.wait_for_function("() => window.ready === true", timeout=20_000)
        for section in ("content-box", "border-box"):
            before, at, after, second, ended = page.evaluate(f"window.measure({section!r})")
            # Whole 20px lines (more than one), 12px of padding, 6px of border.
            lines, rest = divmod(before - 12 - 6, 20)
            assert (lines > 1, rest) == (True, 0), (section, before)
            assert at == before, section
            assert after == before, section
            assert second == before, section
            assert ended == 20 + 12 + 6, section


@pytest.mark.one_backend_by_default
def test_approve_on_the_page_runs_the_call_once_and_the_run_goes_on(backend: str) -> None:
    """A call waiting for approval is shown with Approve / Deny; Approve runs it once."""
    from browser import ROOT, script_server

    server = script_server(ROOT / "tests" / "web" / "approval_server.py", backend)
    with server as (url, _process), launched() as page:
        page.goto(url)
        page.fill("#prompt", "Refund my order, please.")
        page.click("#start")
        page.wait_for_selector(
            "#pending li[data-call-id='call_refund'] button.approve", timeout=20_000
        )
        assert page.text_content("#reason") == "(suspended)"
        label = page.text_content("#pending li") or ""
        assert 'refund({"eur":50})' in label
        effects = page.evaluate(f"fetch({url + 'effects'!r}).then(r => r.json())")
        assert effects == []  # nothing ran before the decision
        page.click("#pending button.approve")
        page.wait_for_function(
            "() => document.getElementById('status').textContent === 'ended'"
            " && document.getElementById('reason').textContent === '(completed)'",
            timeout=20_000,
        )
        assert page.is_hidden("#pending-box")
        page.wait_for_function(
            "() => document.querySelector('.turn')?.textContent === 'Done: refunded 50 EUR.'",
            timeout=20_000,
        )
        statuses = page.eval_on_selector_all(
            "#tools li", "items => items.map(item => item.dataset.status)"
        )
        assert statuses == ["finished"]
        effects = page.evaluate(f"fetch({url + 'effects'!r}).then(r => r.json())")
        assert effects == [50]  # once
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"live_view_approved_{backend}.png"), full_page=True)


@pytest.mark.one_backend_by_default
def test_approve_on_the_page_resumes_the_stored_run_and_shows_the_hosts_call(
    backend: str, tmp_path: Path
) -> None:
    """With a store: an external call is shown as waiting on the host, with no buttons;
    Approve resumes the stored run itself (same id), the refund runs once, and the run
    waits again, in the store, on the host's call alone."""
    from browser import ROOT, script_server

    store = str(tmp_path / "runs.db")
    server = script_server(ROOT / "tests" / "web" / "approval_server.py", backend, store)
    with server as (url, _process), launched() as page:

        def get(path: str) -> Any:
            return page.evaluate(f"fetch({url + path!r}).then(r => r.json())")

        page.goto(url)
        page.fill("#prompt", "Refund my order, please.")
        page.click("#start")
        page.wait_for_selector(
            "#pending li[data-call-id='call_refund'] button.approve", timeout=20_000
        )
        run_id = page.evaluate("window.liveView.runId")
        host = "#pending li[data-call-id='call_date']"
        assert page.get_attribute(host, "data-kind") == "external"
        assert page.text_content(f"{host} em.external") == "waiting on the host"
        assert page.eval_on_selector_all(f"{host} button", "buttons => buttons.length") == 0
        assert get("waiting") == [{"runId": run_id, "calls": ["call_refund", "call_date"]}]
        assert get("effects") == []
        page.click("#pending button.approve")
        page.wait_for_function(
            "() => document.getElementById('status').textContent === 'ended'"
            " && document.getElementById('reason').textContent === '(suspended)'"
            " && window.liveView.pending.length === 1",
            timeout=20_000,
        )
        assert page.evaluate("window.liveView.runId") == run_id  # the stored run went on
        assert page.eval_on_selector_all(
            "#pending li", "items => items.map(item => item.dataset.callId)"
        ) == ["call_date"]
        assert page.eval_on_selector_all("#pending button", "buttons => buttons.length") == 0
        assert get("effects") == [50]  # once
        assert get("waiting") == [{"runId": run_id, "calls": ["call_date"]}]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"live_view_host_call_{backend}.png"), full_page=True)
