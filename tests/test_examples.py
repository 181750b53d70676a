"""The examples run: in-process on the virtual clock, and as the command a new user types."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from types import ModuleType

import pytest

from conftest import run_on
from module_files import load_file
from script_runner import run_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    return load_file(f"example_{name}", EXAMPLES / f"{name}.py")


demo = load("fallback_demo")


def test_fallback_scenario_routes_resets_and_runs_the_tools(backend: str) -> None:
    out = io.StringIO()
    report = run_on(backend, demo.fallback_scenario, out)
    assert report.routes == (
        (
            ("anthropic", "juno-large", "next_candidate"),
            ("openai", "juno-large", "next_candidate"),
            ("openai", "juno-small", None),
        ),
        (("anthropic", "juno-large", None),),
    )
    assert report.tool_answers == (("call_add", "42"), ("call_mul", "42"))
    assert report.answer == "17 + 25 = 42, and 6 × 7 = 42 as well."
    # The partial text of the dead attempt was shown, then withdrawn: the
    # tool-calling turn that replaced it said nothing, so the reader is left
    # with an empty first turn, not with "17 + 25 is" glued to anything.
    assert report.resets == 1
    assert report.final_texts == {"demo:1": "", "demo:2": report.answer}
    assert "↺ reset (attempt_failed)" in out.getvalue()
    assert "Let me work those out in my head: 17 + 25 is" in out.getvalue()


def test_cancel_scenario_starts_nothing_after_the_cancel(backend: str) -> None:
    report = run_on(backend, demo.cancel_scenario, io.StringIO())
    assert report.cancelled
    assert report.started == ("call_0", "call_1")
    assert report.answers == {
        "call_0": "interrupted",
        "call_1": "interrupted",
        "call_2": "not_run",
        "call_3": "not_run",
        "call_4": "not_run",
        "call_5": "not_run",
    }


def test_demo_summary_on_the_virtual_clock(backend: str) -> None:
    out = io.StringIO()
    assert run_on(backend, functools.partial(demo.demo, out, live=False)) == 0
    text = out.getvalue()
    assert "attempts per turn [3, 1], 1 reset(s)" in text
    assert "2 started, 4 never started, 6/6 answered" in text


def test_the_readme_command_runs_and_exits_0() -> None:
    """What a new user types first: no arguments, no API key, on the real clock."""
    # Unclosed sockets would be ResourceWarnings; the SDK's abandoned SSE
    # generators (harmless, see the notes on the SDK under Trio) are not.
    warnings = "error::ResourceWarning,ignore:Async generator:ResourceWarning"
    env = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": warnings}
    completed = run_script(EXAMPLES / "fallback_demo.py", cwd=Path.cwd(), env=env, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert "6/6 answered in the transcript" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_a_real_endpoint_needs_every_setting() -> None:
    with pytest.raises(SystemExit) as caught:
        demo.main(["--model", "gpt-x", "--api-key", ""])
    assert caught.value.code == 2


def test_text_stream_demo_shows_the_reset_replacing_the_partial_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import trio
    import trio.testing

    text_demo = load("text_stream_demo")
    start_clock = trio.testing.MockClock(autojump_threshold=0)
    assert trio.run(text_demo.main, clock=start_clock) == 0
    out = capsys.readouterr().out
    assert "attempt 0 failed: connection reset mid-stream; produced_output=False" in out
    assert "reset  epoch=1 seq=3  screen: ''" in out
    assert "final screen: 'The answer is forty-two.' (resets sent: 1)" in out
    # 0.05 s before each word: four waits for the attempt that died at its
    # fourth word, five for the retry.
    assert start_clock.current_time() == pytest.approx(0.45)
