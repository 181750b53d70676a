"""``"openai:<model>"`` in a list of model strings: the chat adapter over a client of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from juno_bind_trio.providers._adapter import ProviderAdapter

from ._adapter import OpenAIChatAdapter
from ._owned import OwnedClient

__all__ = ["open_string_adapter"]


@asynccontextmanager
async def open_string_adapter(
    owner: str, *, base_url: str | None, api_key: str | None
) -> AsyncIterator[ProviderAdapter]:
    """An [`OpenAIChatAdapter`][juno_bind_trio.providers.openai.OpenAIChatAdapter] over a client
    opened from the arguments or ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, closed on the way out.

    :raises UsageError: no key, or ``OPENAI_BASE_URL`` is not an http(s) URL.
    """
    owned = OwnedClient(owner, base_url=base_url, api_key=api_key)
    client = await owned.client()
    try:
        yield OpenAIChatAdapter(client)
    finally:
        await owned.aclose()
