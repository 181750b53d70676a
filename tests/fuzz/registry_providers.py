"""Fuzz entries for `juno_bind_trio.providers.openai`."""

from __future__ import annotations

import openai
from fuzz_support import Entry

from juno_bind_trio.providers.openai import (
    OpenAIChatModel,
    open_openai_client,
    prime_openai_client,
    stream_chat_completion,
)

ENTRIES = [
    Entry(OpenAIChatModel),
    # The SDK refuses a client without credentials (no key, no OPENAI_API_KEY).
    Entry(
        open_openai_client,
        raises=(openai.OpenAIError,),
    ),
    Entry(prime_openai_client),
    Entry(stream_chat_completion),
]
