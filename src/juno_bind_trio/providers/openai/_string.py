"""``"openai:<model>"``: the chat adapter over a client of the model's own."""

from __future__ import annotations

from juno_bind_trio.providers._adapter import ProviderAdapter
from juno_bind_trio.providers._owned import AdapterCloser, StringAdapterOpener

from ._adapter import OpenAIChatAdapter
from ._owned import OpenAIClientSettings

__all__ = ["string_adapter_opener"]


def string_adapter_opener(
    owner: str, *, base_url: str | None, api_key: str | None
) -> StringAdapterOpener:
    """Opens an [`OpenAIChatAdapter`][juno_bind_trio.providers.openai.OpenAIChatAdapter]
    over a client from the arguments or ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (SDK retries off).

    :raises TypeError: *base_url* or *api_key* is not a string.
    :raises ValueError: *base_url* is not an http(s) URL, or *api_key* is empty.
    """
    settings = OpenAIClientSettings(owner, base_url=base_url, api_key=api_key)

    async def open_adapter() -> tuple[ProviderAdapter, AdapterCloser]:
        client = settings.new_client()  # raises UsageError for a missing key
        return OpenAIChatAdapter(client), client.close

    return open_adapter
