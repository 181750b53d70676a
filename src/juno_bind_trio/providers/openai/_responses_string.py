"""``"openai-responses:<model>"``: the Responses adapter over a client of the agent's own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from juno_bind_trio.providers._adapter import ProviderAdapter

from ._owned import OwnedClient
from ._responses import OpenAIResponsesAdapter

__all__ = ["open_string_adapter"]


@asynccontextmanager
async def open_string_adapter(
    owner: str, *, base_url: str | None, api_key: str | None
) -> AsyncIterator[ProviderAdapter]:
    """An [`OpenAIResponsesAdapter`][juno_bind_trio.providers.openai.OpenAIResponsesAdapter] over
    a client opened from the arguments or ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (SDK retries
    off), closed on the way out.

    :raises UsageError: no key, or ``OPENAI_BASE_URL`` is not an http(s) URL.
    """
    owned = OwnedClient(owner, base_url=base_url, api_key=api_key)
    client = await owned.client()
    try:
        yield OpenAIResponsesAdapter(client)
    finally:
        await owned.aclose()
