"""The example's page in real headless Chromium: the reset is seen, Stop answers every call.

The example runs as the command a user types (``python examples/live_view.py
--port 0``), on the wall clock, at its 30 tokens a second; the browser waits
for what the page shows, never for a fixed time.
"""

from __future__ import annotations

import json
import signal

from browser import ARTIFACTS, example_server, launched

PARTIAL_START = "Let me work those out in my head"
NARRATION = "I will use the tools for this."

# Installed before the run starts: records every text any turn element ever
# showed, straight from the DOM, so "never both at once" is checked on what
# the user could have seen, not on the client's own bookkeeping.
WATCH_TURNS = """
() => {
  window.turnTexts = [];
  const turns = document.getElementById("turns");
  new MutationObserver(() => {
    for (const el of turns.querySelectorAll(".turn")) window.turnTexts.push(el.textContent);
  }).observe(turns, { subtree: true, childList: true, characterData: true });
}
"""


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
