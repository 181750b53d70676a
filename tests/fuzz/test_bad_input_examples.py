"""The bad inputs that once crashed from inside, each pinned by name.

The fuzz finds such inputs at random; these are the ones that were found,
kept as plain tests so a regression fails on every run, not on a lucky draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import trio

from juno_bind_trio.completion import StreamWatchdog, retry_structured_output
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers.openai import open_openai_client
from juno_bind_trio.routing import (
    Candidate,
    CircuitBreaker,
    RoutePlan,
    RouteStage,
    parse_retry_after,
)
from juno_bind_trio.run import PollSchedule, RunDeadline
from juno_bind_trio.testing import ErrorResponse

HUGE = 10**400  # an int past the largest double: float(HUGE) is an OverflowError


def test_a_budget_past_the_largest_double_is_no_budget_where_infinity_is_allowed() -> None:
    watchdog = StreamWatchdog(HUGE, inter_chunk_timeout=HUGE)
    assert watchdog.time_to_first_token == math.inf
    assert watchdog.inter_chunk_timeout == math.inf
    assert "seconds=inf" in repr(RunDeadline(HUGE, grace=HUGE))


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: CircuitBreaker(reset_timeout=HUGE), "CircuitBreaker: reset_timeout"),
        (lambda: PollSchedule(initial=HUGE), "PollSchedule: initial"),
        (lambda: PollSchedule(max_delay=HUGE), "PollSchedule: max_delay"),
        (lambda: PollSchedule(factor=HUGE), "PollSchedule: factor"),
        (lambda: RoutePlan([RouteStage("m", [Candidate("p")])], max_retry_wait=HUGE), "RoutePlan"),
    ],
)
def test_a_finite_budget_past_the_largest_double_is_a_value_error(
    build: Callable[[], object], name: str
) -> None:
    with pytest.raises(ValueError, match=name) as info:
        build()
    assert len(str(info.value)) < 200  # the number is shown shortened


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: CircuitBreaker(reset_timeout=-HUGE), "CircuitBreaker"),
        (lambda: RunDeadline(-HUGE), "RunDeadline"),
        (lambda: StreamWatchdog(-HUGE), "StreamWatchdog"),
        (lambda: ErrorResponse(429, retry_after=-HUGE), "ErrorResponse"),
    ],
)
def test_a_negative_budget_past_the_largest_double_is_a_value_error(
    build: Callable[[], object], name: str
) -> None:
    with pytest.raises(ValueError, match=name):
        build()


@pytest.mark.parametrize("headers", [["retry-after", "1"], "retry-after: 1", 3, b"x", object()])
def test_parse_retry_after_refuses_headers_that_are_not_a_mapping(headers: Any) -> None:
    with pytest.raises(TypeError, match=r"^parse_retry_after: headers must be a mapping"):
        parse_retry_after(headers)


@pytest.mark.parametrize(
    "value", [["1"], 5, 2.5, None, {"a": 1}, b"7", "1e400", "nan", "-1", "soon"]
)
def test_parse_retry_after_ignores_a_value_it_cannot_read(value: Any) -> None:
    assert parse_retry_after({"retry-after": value}) is None
    assert parse_retry_after({"retry-after-ms": value}) is None


def test_parse_retry_after_reads_the_next_header_past_a_malformed_one() -> None:
    headers: dict[str, Any] = {"retry-after-ms": ["x"], "retry-after": "2"}
    assert parse_retry_after(headers) == 2.0


@pytest.mark.parametrize("now", [5, None, "now"])
def test_parse_retry_after_refuses_a_clock_that_is_not_callable(now: Any) -> None:
    with pytest.raises(TypeError, match=r"^parse_retry_after: now must be a callable"):
        parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=now)


@pytest.mark.parametrize("reading", [None, "1", math.nan, math.inf])
def test_parse_retry_after_refuses_a_clock_that_does_not_read_seconds(reading: Any) -> None:
    with pytest.raises(TypeError, match=r"^parse_retry_after: now\(\) must return"):
        parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=lambda: reading)


@pytest.mark.parametrize("bad", [None, 3, "call", {"id": 1}])
def test_a_model_turn_result_names_itself_and_the_call_it_refuses(bad: Any) -> None:
    good = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with pytest.raises((TypeError, ValueError), match=r"^ModelTurnResult: tool_calls\[1\]: "):
        ModelTurnResult(tool_calls=[good, bad])


@pytest.mark.parametrize(("name", "value"), [("base_url", 3), ("api_key", ["k"])])
def test_open_openai_client_refuses_a_url_or_key_that_is_not_text(name: str, value: Any) -> None:
    async def main() -> None:
        async with open_openai_client(**{name: value}):
            pass  # pragma: no cover - refused before

    with pytest.raises(TypeError, match=f"^open_openai_client: {name} must be a str or None"):
        trio.run(main)


def test_retry_structured_output_refuses_a_produce_that_is_not_async() -> None:
    async def main() -> None:
        not_async: Any = lambda rejected: None  # noqa: E731 - the wiring mistake under test
        await retry_structured_output(not_async, response_format={"type": "text"})

    with pytest.raises(TypeError, match=r"^retry_structured_output: produce must be an async"):
        trio.run(main)


@pytest.mark.parametrize("app", [None, 3, "app"])
def test_serve_refuses_an_app_that_is_not_callable_before_binding(app: Any) -> None:
    from juno_bind_trio.web import serve

    with pytest.raises(TypeError, match=r"^serve: app must be an ASGI application"):
        trio.run(lambda: serve(app, port=0))


@pytest.mark.parametrize("responses", [None, "hello", {"x": 1}, 3])
def test_a_fake_server_script_mapping_a_model_to_no_sequence_is_refused(responses: Any) -> None:
    from juno_bind_trio.testing import open_fake_openai_server

    async def main() -> None:
        async with open_fake_openai_server({"m": responses}):
            pass  # pragma: no cover - refused before

    with pytest.raises(TypeError, match=r"^open_fake_openai_server: script values must be"):
        trio.run(main)


@pytest.mark.parametrize(("server", "infos"), [("s", (None,)), ("s", None), (3, ())])
def test_an_mcp_toolset_refuses_what_is_not_a_server_name_and_tool_infos(
    server: Any, infos: Any
) -> None:
    pytest.importorskip("mcp")
    from juno_bind_trio.mcp import MCPToolset

    with pytest.raises(TypeError, match=r"^MCPToolset: (server|infos) must be"):
        MCPToolset(server, infos, None)


@pytest.mark.parametrize("url", ["\x1f", "localhost:8080", "ftp://x", "http://[::1", "http://"])
def test_open_openai_client_refuses_a_base_url_that_is_no_http_url(url: str) -> None:
    async def main() -> None:
        async with open_openai_client(base_url=url, api_key="k"):
            pass  # pragma: no cover - refused before

    with pytest.raises(ValueError, match=r"^open_openai_client: base_url must be an http\(s\) URL"):
        trio.run(main)


@pytest.mark.parametrize("calls", [None, 3, "abc"])
def test_completion_response_refuses_tool_calls_that_are_no_iterable(calls: Any) -> None:
    from juno_bind_trio.testing import CompletionResponse

    with pytest.raises(TypeError, match=r"^CompletionResponse: tool_calls must be an iterable"):
        CompletionResponse(None, calls)


def test_fake_openai_env_refuses_an_api_key_the_environment_cannot_hold() -> None:
    from juno_bind_trio.testing import fake_openai_env

    with (
        pytest.raises(ValueError, match=r"^fake_openai_env: api_key cannot hold a NUL"),
        fake_openai_env(api_key="a\x00b"),
    ):
        pass  # pragma: no cover - refused before


@pytest.mark.parametrize(
    "headers", [{"\x80": "x"}, {"a": "line\nbreak"}, {"a": "\u20ac"}, {"": "x"}]
)
def test_open_mcp_http_refuses_headers_http_cannot_carry(headers: dict[str, str]) -> None:
    pytest.importorskip("mcp")
    from juno_bind_trio.mcp import open_mcp_http

    async def main() -> None:
        async with open_mcp_http("http://127.0.0.1:9/mcp", headers=headers):
            pass  # pragma: no cover - refused before

    with pytest.raises(ValueError, match=r"^open_mcp_http: header .* cannot be sent over HTTP"):
        trio.run(main)
