"""Fuzz entries for `juno_bind_trio.testing`."""

from __future__ import annotations

from fuzz_support import Entry

from juno_bind_trio.testing import (
    CloseBeforeResponse,
    CompletionResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeOpenAIServer,
    Finish,
    MalformedChunk,
    Pause,
    RawEvent,
    ReasoningDelta,
    RecordedRequest,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
    fake_openai_env,
    open_fake_openai_server,
    serve_fake_openai,
)

ENTRIES = [
    Entry(CloseBeforeResponse),
    Entry(CompletionResponse),
    Entry(Disconnect),
    Entry(ErrorEvent),
    Entry(ErrorResponse),
    Entry(FakeOpenAIServer),
    Entry(Finish),
    Entry(MalformedChunk),
    Entry(Pause),
    Entry(RawEvent),
    Entry(ReasoningDelta),
    Entry(RecordedRequest),
    Entry(StreamResponse),
    Entry(TextDelta),
    Entry(ToolCallDelta),
    Entry(Usage),
    Entry(fake_openai_env, also_named=("open_fake_openai_server",)),
    Entry(open_fake_openai_server),
    Entry(serve_fake_openai, also_named=("open_fake_openai_server",)),
]
