"""Fuzz entries for `juno_bind_trio.testing`."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from fuzz_support import JUNK, Call, Entry, call
from registry_transcript import message

from juno_bind_trio.testing import (
    CloseBeforeResponse,
    CompletionResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeOpenAIServer,
    FakeProviderServer,
    Finish,
    FunctionModel,
    LoopbackServer,
    MalformedChunk,
    Pause,
    ProviderRequest,
    RawEvent,
    ReasoningDelta,
    RecordedRequest,
    StreamResponse,
    TestModel,
    TextDelta,
    ToolCallDelta,
    ToolCallHistoryError,
    Usage,
    anthropic_signature,
    block_model_requests,
    check_tool_call_history,
    fake_anthropic_env,
    fake_bedrock_env,
    fake_gemini_env,
    fake_openai_env,
    fake_responses_env,
    open_fake_anthropic_server,
    open_fake_bedrock_server,
    open_fake_gemini_server,
    open_fake_openai_server,
    open_fake_responses_server,
    serve_fake_openai,
    value_from_schema,
)

SCHEMA_KEYS = ["type", "properties", "items", "anyOf", "allOf", "enum", "const", "minimum"]
SCHEMA_KEYS += ["exclusiveMaximum", "multipleOf", "minLength", "minItems", "pattern", "$ref"]
HISTORY_CALLS = st.builds(call, st.one_of(st.lists(message(), max_size=10), JUNK))


def accepted(arguments: Call, result: Any) -> None:
    # What the checker accepts, healing leaves as it is (beyond an empty tool_calls
    # list, which healing keeps and the checker refuses): the two read one rule.
    from juno_bind_trio.transcript import heal_transcript

    assert result is None
    assert heal_transcript(arguments.args[0]).changes == ()


def names_the_message(arguments: Call, error: BaseException) -> None:
    assert isinstance(error, ToolCallHistoryError)
    assert 0 <= error.index < len(arguments.args[0])
    assert f"messages[{error.index}]" in str(error)


ENTRIES = [
    Entry(
        check_tool_call_history,
        args=HISTORY_CALLS,
        raises=(ToolCallHistoryError,),
        check=accepted,
        check_error=names_the_message,
    ),
    Entry(CloseBeforeResponse),
    Entry(CompletionResponse),
    Entry(Disconnect),
    Entry(ErrorEvent),
    Entry(ErrorResponse),
    Entry(FakeOpenAIServer),
    Entry(FakeProviderServer),
    Entry(LoopbackServer),
    Entry(anthropic_signature),
    Entry(fake_anthropic_env, also_named=("open_fake_openai_server",)),
    Entry(open_fake_anthropic_server, also_named=("open_fake_openai_server",)),
    Entry(Finish),
    Entry(FunctionModel),
    Entry(TestModel),
    Entry(block_model_requests),
    Entry(MalformedChunk),
    Entry(Pause),
    Entry(RawEvent),
    Entry(ReasoningDelta),
    Entry(ProviderRequest),
    Entry(RecordedRequest),
    Entry(StreamResponse),
    Entry(TextDelta),
    Entry(ToolCallDelta),
    Entry(Usage),
    Entry(fake_openai_env, also_named=("open_fake_openai_server",)),
    Entry(open_fake_openai_server),
    Entry(fake_responses_env),
    Entry(fake_gemini_env),
    Entry(fake_bedrock_env),
    Entry(open_fake_responses_server),
    Entry(open_fake_gemini_server),
    Entry(open_fake_bedrock_server),
    Entry(serve_fake_openai, also_named=("open_fake_openai_server",)),
    Entry(
        value_from_schema,
        args=st.builds(call, st.one_of(JUNK, st.dictionaries(st.sampled_from(SCHEMA_KEYS), JUNK))),
    ),
]
