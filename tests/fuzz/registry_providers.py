"""Fuzz entries for `juno_bind_trio.providers` and `juno_bind_trio.providers.openai`."""

from __future__ import annotations

from typing import Any

import anthropic
import hypothesis.strategies as st
import openai
from fuzz_support import JUNK, Call, Entry, auto, call

from juno_bind_trio import UsageError
from juno_bind_trio.providers import (
    ProviderRequest,
    RoutedModel,
    StringModel,
    messages_for,
    provider_state_of,
    strip_provider_state,
)
from juno_bind_trio.providers.anthropic import (
    AnthropicAdapter,
    classify_anthropic_error,
    open_anthropic_client,
)
from juno_bind_trio.providers.bedrock import (
    BedrockAdapter,
    BedrockCredentials,
    StreamingHttpxSession,
    classify_bedrock_error,
    close_event_stream,
    open_bedrock_client,
    resolve_credentials,
)
from juno_bind_trio.providers.google import (
    GeminiAdapter,
    classify_gemini_error,
    open_gemini_client,
)
from juno_bind_trio.providers.openai import (
    OpenAIChatAdapter,
    OpenAIChatModel,
    OpenAIResponsesAdapter,
    classify_openai_error,
    classify_responses_error,
    open_openai_client,
    prime_openai_client,
    stream_chat_completion,
)
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage


def _a_model() -> OpenAIChatModel:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
    plan = RoutePlan([RouteStage("m", [Candidate("fake")])])
    return OpenAIChatModel(plan=plan, clients={"fake": client})


def _options_kept(arguments: Call, result: Any) -> None:
    assert isinstance(result, OpenAIChatModel)
    assert dict(result.request_options) == dict(arguments.kwargs)


_KEYS = st.one_of(
    st.sampled_from(["model", "messages", "tools", "stream", "n", "temperature", ""]),
    st.text(max_size=6),
)

ENTRIES = [
    Entry(
        _a_model().with_request_options,
        args=st.dictionaries(_KEYS, JUNK, max_size=4).map(lambda options: call(**options)),
        check=_options_kept,
        label="providers.openai.OpenAIChatModel.with_request_options",
    ),
    Entry(OpenAIChatModel),
    Entry(OpenAIChatAdapter),
    Entry(classify_openai_error),
    Entry(RoutedModel),
    Entry(
        StringModel,
        # owner= is the name its errors start with (the Agent passes "Agent"): kept as given.
        args=auto(StringModel, owner=st.just("StringModel")),
        raises=(UsageError,),
    ),
    Entry(AnthropicAdapter),
    Entry(BedrockAdapter),
    Entry(BedrockCredentials),
    Entry(
        StreamingHttpxSession,
        # aiobotocore's own constructor, inherited unchanged: its refusals are aiobotocore's.
        xfail="aiobotocore's HttpxSession checks its arguments in its own words",
    ),
    Entry(classify_bedrock_error),
    Entry(close_event_stream),
    Entry(open_bedrock_client, also_named=("resolve_credentials",)),
    Entry(resolve_credentials),
    Entry(OpenAIResponsesAdapter),
    Entry(classify_responses_error),
    Entry(classify_anthropic_error),
    Entry(open_anthropic_client, raises=(anthropic.AnthropicError,)),
    Entry(GeminiAdapter),
    Entry(classify_gemini_error),
    Entry(open_gemini_client),
    Entry(ProviderRequest),
    Entry(messages_for),
    Entry(provider_state_of),
    Entry(strip_provider_state),
    # The SDK refuses a client without credentials (no key, no OPENAI_API_KEY).
    Entry(
        open_openai_client,
        raises=(openai.OpenAIError,),
    ),
    Entry(prime_openai_client),
    Entry(stream_chat_completion),
]
