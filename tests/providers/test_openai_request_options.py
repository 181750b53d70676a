"""`OpenAIChatModel.with_request_options`: per-model request options, through the real SDK.

Every request goes through the real ``openai`` SDK to the loopback server of
``juno_bind_trio.testing``; the assertions are on the JSON bodies it received.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

from juno_bind_trio.providers import RoutedModel
from juno_bind_trio.providers.openai import OpenAIChatAdapter, OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, CircuitBreaker, RoutePlan, RouteStage
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio

RESERVED = ("model", "messages", "tools", "stream", "n")
ASK = [{"role": "user", "content": "Hi"}]
JSON_FORMAT = {"type": "json_object"}


def _plan(**candidate_options: Any) -> RoutePlan:
    return RoutePlan([RouteStage("m", [Candidate("fake", options=candidate_options)])])


@functools.cache
def _offline_client() -> Any:
    """One client for every offline model: a new ``AsyncOpenAI`` loads the CA bundle
    (20-140 ms), which the property test below paid for each of its examples."""
    import openai

    return openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)


def _offline_model(**request_options: Any) -> OpenAIChatModel:
    # A client is never used by the checks below; the constructor only checks its type.
    return OpenAIChatModel(
        plan=_plan(), clients={"fake": _offline_client()}, request_options=request_options
    )


async def test_the_derived_model_sends_its_options_and_the_original_does_not() -> None:
    script = [StreamResponse.of_text("{}"), StreamResponse.of_text("plain")]
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        model = OpenAIChatModel(
            plan=_plan(), clients={"fake": client}, request_options={"temperature": 0.5}
        )
        json_model = model.with_request_options(response_format=JSON_FORMAT, temperature=0)
        assert (await json_model.route(ASK)).unwrap().content == "{}"
        assert (await model.route(ASK)).unwrap().content == "plain"
    derived, original = (r.json for r in server.requests)
    assert derived["response_format"] == JSON_FORMAT
    assert derived["temperature"] == 0  # the key given last wins
    assert derived["model"] == "m"
    assert derived["messages"] == ASK
    assert derived["stream"] is True
    assert "response_format" not in original
    assert original["temperature"] == 0.5
    assert model.request_options == {"temperature": 0.5}
    assert json_model.request_options == {"temperature": 0, "response_format": JSON_FORMAT}
    # One trail: the most recent turn of either model.
    assert model.last_route is json_model.last_route
    assert model.last_route is not None
    assert model.last_route.value is not None
    assert model.last_route.value.content == "plain"


async def test_a_candidates_options_still_win_for_its_attempts() -> None:
    async with (
        open_fake_openai_server([StreamResponse.of_text("ok")]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        model = OpenAIChatModel(plan=_plan(temperature=1.0), clients={"fake": client})
        await model.with_request_options(temperature=0, seed=7).route(ASK)
    (body,) = (r.json for r in server.requests)
    assert body["temperature"] == 1.0
    assert body["seed"] == 7


async def test_the_derived_model_shares_the_breaker_and_the_callbacks() -> None:
    seen: list[object] = []
    breaker = CircuitBreaker()
    async with (
        open_fake_openai_server([StreamResponse.of_text("ok")]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        model = OpenAIChatModel(
            plan=_plan(), clients={"fake": client}, breaker=breaker, on_route=seen.append
        )
        derived = model.with_request_options(seed=1)
        result = await derived.route(ASK)
    assert seen == [result]
    assert derived.plan is model.plan
    assert derived._breaker is breaker


@pytest.mark.parametrize("key", RESERVED)
def test_options_the_package_sets_itself_are_refused(key: str) -> None:
    model = _offline_model()
    with pytest.raises(ValueError, match=rf"with_request_options: .*\['{key}'\]"):
        model.with_request_options(**{key: "x"})
    with pytest.raises(ValueError, match=rf"OpenAIChatModel: request_options .*\['{key}'\]"):
        _offline_model(**{key: "x"})


def test_a_candidate_option_the_package_sets_itself_is_refused_at_construction() -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(ValueError, match=r"candidate 'fake' for 'm' set \['stream'\]"):
        OpenAIChatModel(plan=_plan(stream=False), clients={"fake": client})


def test_a_candidate_extra_body_that_is_not_a_mapping_is_refused_at_construction() -> None:
    # A candidate's options are merged over the model's for its attempts: a
    # non-mapping extra_body there is the same host mistake as in request_options,
    # named where it is, not a TypeError from inside the first request.
    import openai

    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(
        TypeError,
        match=r"^OpenAIChatModel: the options of candidate 'fake' for 'm' set extra_body to "
        r"\[1\]; it must be a mapping of JSON properties or None$",
    ):
        OpenAIChatModel(plan=_plan(extra_body=[1]), clients={"fake": client})
    with pytest.raises(TypeError, match=r"^RoutedModel: the options of candidate 'fake'"):
        RoutedModel(
            plan=_plan(extra_body="seed=1"),
            adapters={"fake": OpenAIChatAdapter(client)},
        )
    for fine in (None, {"seed": 1}, types.MappingProxyType({"seed": 1})):
        OpenAIChatModel(plan=_plan(extra_body=fine), clients={"fake": client})


def test_request_options_are_read_only_and_checked() -> None:
    import openai

    model = _offline_model(temperature=0)
    assert isinstance(model.request_options, types.MappingProxyType)
    with pytest.raises(TypeError):
        model.request_options["temperature"] = 1  # type: ignore[index]
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(TypeError, match=r"OpenAIChatModel: request_options keys must be strings"):
        OpenAIChatModel(plan=_plan(), clients={"fake": client}, request_options={1: 2})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"OpenAIChatModel: request_options must be a mapping"):
        OpenAIChatModel(plan=_plan(), clients={"fake": client}, request_options=[1])  # type: ignore[arg-type]
    # The lean path merges a caller's extra_body into the request's JSON: one
    # that is not a mapping is the host's mistake, refused here and not at the
    # first request.
    with pytest.raises(
        TypeError, match=r"OpenAIChatModel: request_options\['extra_body'\] must be a mapping"
    ):
        OpenAIChatModel(plan=_plan(), clients={"fake": client}, request_options={"extra_body": [1]})
    with pytest.raises(TypeError, match=r"with_request_options: request_options\['extra_body'\]"):
        model.with_request_options(extra_body="seed=1")


_KEYS = st.sampled_from(["temperature", "seed", "top_p", "user", "response_format"])
_OPTIONS = st.dictionaries(_KEYS, st.integers() | st.text(max_size=4) | st.none(), max_size=4)


@given(base=_OPTIONS, first=_OPTIONS, second=_OPTIONS)
def test_derivations_merge_in_order_and_never_change_their_source(
    base: dict[str, Any], first: dict[str, Any], second: dict[str, Any]
) -> None:
    model = _offline_model(**base)
    once = model.with_request_options(**first)
    twice = once.with_request_options(**second)
    assert dict(model.request_options) == base
    assert dict(once.request_options) == {**base, **first}
    assert dict(twice.request_options) == {**base, **first, **second}
