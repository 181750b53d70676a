"""RoutedModel: one plan over adapters of different providers, on the provider seam.

A scripted adapter stands in for a second provider here (the provider's own
tests drive each real SDK against its fake); the OpenAI side is the real SDK
against the fake OpenAI server, so a fallback from one wire to the other is
exercised end to end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import openai
import pytest

from juno_bind_trio.completion import ListSink, ResetEvent, TextEvent, TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers import (
    PROVIDER_STATE_KEY,
    ProviderAdapter,
    ProviderRequest,
    RoutedModel,
    messages_for,
    provider_state_of,
    strip_provider_state,
)
from juno_bind_trio.providers.openai import OpenAIChatAdapter, open_openai_client
from juno_bind_trio.routing import (
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteStage,
)
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio


class Dies(Exception):
    """The scripted provider's mid-stream failure."""


class ScriptedAdapter:
    """An adapter of provider *name*: streams *pieces*, then fails (if *fail*) or answers."""

    def __init__(self, name: str, pieces: list[str], *, fail: bool = False) -> None:
        self._name = name
        self.pieces = pieces
        self.fail = fail
        self.requests: list[ProviderRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def server(self) -> tuple[str, int] | None:
        return None

    async def stream_turn(self, request: ProviderRequest) -> ModelTurnResult:
        self.requests.append(request)
        for piece in self.pieces:
            if request.text_stream is not None:
                request.text_stream.observe(piece)
        if self.fail:
            raise Dies("mid-stream")
        state = {"provider": self._name, "blocks": [{"signature": "sig-1"}]}
        return ModelTurnResult(content="".join(self.pieces), extra={PROVIDER_STATE_KEY: state})

    def classify(
        self, error: Exception, candidate: Candidate, cursor: RouteCursor
    ) -> ClassifiedError:
        return ClassifiedError(RouteAction.NEXT_CANDIDATE, error, reason="scripted")


def texts(sink: ListSink) -> list[str | None]:
    return [e.text if isinstance(e, TextEvent) else None for e in sink.events]


def test_the_scripted_adapter_is_an_adapter() -> None:
    assert isinstance(ScriptedAdapter("x", []), ProviderAdapter)


async def test_a_provider_dying_mid_stream_falls_back_to_another_provider() -> None:
    dying = ScriptedAdapter("anthropic", ["Half an ", "answer"], fail=True)
    async with (
        open_fake_openai_server([StreamResponse.of_text("Whole ", "answer.")]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        model = RoutedModel(
            plan=RoutePlan(
                [
                    RouteStage("claude", [Candidate("anthropic")]),
                    RouteStage("gpt", [Candidate("openai")]),
                ],
                max_retries=0,
            ),
            adapters={"anthropic": dying, "openai": OpenAIChatAdapter(client)},
        )
        sink = ListSink()
        stream = TurnTextStream(sink=sink, turn_id="t1")
        result = await model.route([{"role": "user", "content": "hi"}], text_stream=stream)
        stream.finish("succeeded")
    assert result.ok
    assert result.unwrap().content == "Whole answer."
    # The reader saw the dying attempt, a reset, then the fallback alone.
    assert texts(sink) == ["Half an ", "answer", None, "Whole ", "answer."]
    assert isinstance(sink.events[2], ResetEvent)
    assert stream.text == "Whole answer."
    assert [r.candidate.provider for r in result.attempts] == ["anthropic", "openai"]
    assert server.requests[0].json["model"] == "gpt"
    assert model.last_route is result


async def test_provider_state_goes_back_to_its_provider_and_nowhere_else() -> None:
    state = {"provider": "anthropic", "blocks": [{"thinking": "...", "signature": "s"}]}
    transcript: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", PROVIDER_STATE_KEY: state},
        {"role": "user", "content": "again"},
    ]
    before = [dict(m) for m in transcript]
    own = ScriptedAdapter("anthropic", ["x"], fail=True)
    async with (
        open_fake_openai_server([StreamResponse.of_text("ok")]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        model = RoutedModel(
            plan=RoutePlan(
                [RouteStage("m", [Candidate("anthropic"), Candidate("openai")])], max_retries=0
            ),
            adapters={"anthropic": own, "openai": OpenAIChatAdapter(client)},
        )
        await model.route(transcript)
    # Its own provider gets the state unchanged (the same object: byte for byte).
    assert own.requests[0].messages[1][PROVIDER_STATE_KEY] is state
    # The other provider's request carries none of it.
    sent = server.requests[0].json["messages"]
    assert sent[1] == {"role": "assistant", "content": "hello"}
    assert transcript == before


def test_messages_for_keeps_own_state_and_drops_any_other() -> None:
    mine = {"role": "assistant", "content": "a", PROVIDER_STATE_KEY: {"provider": "p"}}
    theirs = {"role": "assistant", "content": "b", PROVIDER_STATE_KEY: {"provider": "q"}}
    broken = {"role": "assistant", "content": "c", PROVIDER_STATE_KEY: "not a mapping"}
    plain = {"role": "user", "content": "d"}
    out = messages_for("p", [mine, theirs, broken, plain])
    assert out[0] is mine
    assert PROVIDER_STATE_KEY not in out[1]
    assert PROVIDER_STATE_KEY not in out[2]
    assert out[3] is plain
    # Nothing to drop: the transcript itself, not a copy.
    same = [plain]
    assert messages_for("p", same) is same
    assert provider_state_of(mine, "p") == {"provider": "p"}
    assert provider_state_of(theirs, "p") is None
    assert provider_state_of(broken, "p") is None
    assert all(PROVIDER_STATE_KEY not in m for m in strip_provider_state([mine, theirs]))


@pytest.mark.parametrize(
    ("adapters", "error", "match"),
    [
        ({"a": ScriptedAdapter("a", [])}, ValueError, r"no adapter for provider\(s\) \['b'\]"),
        ({"a": object(), "b": ScriptedAdapter("b", [])}, TypeError, r"adapters\['a'\]"),
        ([], TypeError, "adapters must be a mapping"),
    ],
)
def test_wiring_mistakes_are_refused_at_construction(
    adapters: Any, error: type[Exception], match: str
) -> None:
    plan = RoutePlan([RouteStage("m", [Candidate("a"), Candidate("b")])])
    with pytest.raises(error, match=match):
        RoutedModel(plan=plan, adapters=adapters)


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("request_options", {"messages": []}, r"must not set \['messages'\]"),
        ("time_to_first_token", 0, "time_to_first_token must be a positive number"),
        ("breaker", "no", "breaker must be a CircuitBreaker"),
        ("plan", "no", "plan must be a RoutePlan"),
    ],
)
def test_bad_settings_name_themselves(option: str, value: object, match: str) -> None:
    settings: dict[str, Any] = {
        "plan": RoutePlan([RouteStage("m", [Candidate("a")])]),
        "adapters": {"a": ScriptedAdapter("a", [])},
        option: value,
    }
    build: Callable[..., object] = RoutedModel
    with pytest.raises((TypeError, ValueError), match=match):
        build(**settings)


async def test_with_request_options_merges_and_shares_the_last_route() -> None:
    adapter = ScriptedAdapter("a", ["hi"])
    model = RoutedModel(
        plan=RoutePlan([RouteStage("m", [Candidate("a", options={"top_k": 3})])]),
        adapters={"a": adapter},
        request_options={"temperature": 1, "top_k": 1},
    )
    derived = model.with_request_options(temperature=0)
    result = await derived.route([{"role": "user", "content": "x"}])
    options: Mapping[str, Any] = adapter.requests[0].options
    assert dict(options) == {"temperature": 0, "top_k": 3}
    assert model.request_options == {"temperature": 1, "top_k": 1}
    assert model.last_route is result
    assert "RoutedModel" in repr(model)


def test_openai_adapter_refuses_a_client_that_retries() -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="max_retries=0"):
        OpenAIChatAdapter(client)
