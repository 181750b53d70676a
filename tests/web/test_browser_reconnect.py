"""Real headless Chromium reconnects by itself when the event stream breaks mid-turn.

The server (``reconnect_server.py``: the example's app behind a breaker) ends
the page's first event stream in the middle of the final answer. Nothing in
the test touches the page after pressing Start: the browser's EventSource
reconnects on its own with ``Last-Event-ID``, and the page must end showing
exactly the final text, with nothing lost or doubled, having shown only
texts the turn really passed through. With a kept window smaller than what
the page missed, the server answers the reconnect with a ``resync`` instead,
and the same must hold.

Real time, bounded: the example paced at 12 tokens a second takes about
five seconds; every wait has a timeout.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from browser import script_server

SERVER = Path(__file__).resolve().parent / "reconnect_server.py"
PARTIAL = "Let me work those out in my head first: seventeen plus twenty-five is, hmm,"
NARRATION = "I will use the tools for this."
FINAL = (
    "17 + 25 = 42 and 6 × 7 = 42, so both come to 42. Lisbon: 21 °C, sunny. "
    "Oslo: 4 °C, sleet. Thanks for watching the stream."
)

# Records every text each turn element ever showed (from the DOM), and every
# event kind the view handles from now on.
WATCH = """
() => {
  window.turnTexts = [];
  const turns = document.getElementById("turns");
  new MutationObserver(() => {
    turns.querySelectorAll(".turn").forEach((el, i) => window.turnTexts.push([i, el.textContent]));
  }).observe(turns, { subtree: true, childList: true, characterData: true });
}
"""
WATCH_KINDS = """
() => {
  window.kinds = [];
  const view = window.liveView;
  const handle = view.handle.bind(view);
  view.handle = (event) => { window.kinds.push(event.kind); handle(event); };
}
"""


@pytest.mark.one_backend_by_default
@pytest.mark.parametrize("window", ["replay", "resync"])
def test_the_page_reconnects_by_itself_and_ends_with_the_final_text(
    backend: str, window: str
) -> None:
    from browser import launched

    kept = ["--max-kept-events", "3"] if window == "resync" else []
    with script_server(SERVER, "--backend", backend, *kept) as (url, process), launched() as page:
        page.goto(url)
        page.evaluate(WATCH)
        page.click("#start")
        page.wait_for_function("() => window.liveView !== undefined", timeout=10_000)
        page.evaluate(WATCH_KINDS)
        page.wait_for_function(
            "() => document.getElementById('status').textContent === 'ended'",
            timeout=30_000,
        )
        shown: list[list[Any]] = page.evaluate("window.turnTexts")
        kinds: list[str] = page.evaluate("window.kinds")
        texts = page.eval_on_selector_all(".turn", "els => els.map(el => el.textContent)")
        busy = page.eval_on_selector_all(".turn", "els => els.map(el => el.ariaBusy)")
        snapshot = page.evaluate(
            "async () => (await fetch(`/runs/${window.liveView.runId}`)).json()"
        )
        announced = page.text_content("#announcer")
        last_event_id = page.evaluate("window.liveView.lastEventId")
        process.kill()
        process.wait(timeout=30)
        assert process.stdout is not None
        requests = re.findall(r"^events (\S+)$", process.stdout.read(), re.M)
    # The page ends equal to the final text, nothing lost or doubled.
    assert texts == [NARRATION, FINAL]
    assert [t["text"] for t in snapshot["turns"]] == texts
    assert busy == ["false", "false"]
    assert announced == FINAL
    assert snapshot["reason"] == "completed"
    # The browser reconnected by itself, once, from where it was.
    assert requests[0] == "-"
    assert len(requests) == 2, requests
    resumed_from = int(requests[1])
    assert 0 < resumed_from < last_event_id
    if window == "resync":
        assert kinds.count("resync") == 1
    else:
        assert "resync" not in kinds
    # Every text the DOM ever showed is one the turn passed through.
    first = [text for i, text in shown if i == 0]
    second = [text for i, text in shown if i == 1]
    assert any(text.startswith("Let me") for text in first)
    assert all(PARTIAL.startswith(t) or NARRATION.startswith(t) for t in first), first
    assert all(FINAL.startswith(t) for t in second), second
    # The final answer was on screen partly before the cut, and grew after it.
    assert len({t for t in second if t and t != FINAL}) >= 3
    assert json.dumps(texts, ensure_ascii=False).count("Thanks for watching") == 1
