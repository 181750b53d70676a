"""``"google:<model>"``: the adapter a model string opens, from arguments or the environment."""

from __future__ import annotations

import os
from typing import Final

from juno_bind_trio._errors import UsageError
from juno_bind_trio.providers._adapter import ProviderAdapter
from juno_bind_trio.providers._owned import AdapterCloser, StringAdapterOpener

__all__ = ["string_adapter_opener"]

_KEY: Final = "GEMINI_API_KEY"
_GOOGLE_KEY: Final = "GOOGLE_API_KEY"
_URL: Final = "GOOGLE_GEMINI_BASE_URL"


def string_adapter_opener(
    owner: str, *, base_url: str | None, api_key: str | None
) -> StringAdapterOpener:
    """Opens a [`GeminiAdapter`][juno_bind_trio.providers.google.GeminiAdapter] over a client of
    its own (on httpx2, SDK retries off), its key and URL read when it opens.

    The key is *api_key*, else ``GOOGLE_API_KEY`` (which the SDK prefers), else
    ``GEMINI_API_KEY``; the URL *base_url*, else ``GOOGLE_GEMINI_BASE_URL``,
    else the public API. The opener raises ``UsageError`` when there is no key.
    """
    from ._adapter import GeminiAdapter
    from ._client import new_gemini_client, sdk_ready

    sdk_ready()  # the SDK imported now, outside any run's deadline

    async def open_adapter() -> tuple[ProviderAdapter, AdapterCloser]:
        key = (
            api_key
            if api_key is not None
            else (os.environ.get(_GOOGLE_KEY) or os.environ.get(_KEY))
        )
        if not key:
            raise UsageError(
                f"{owner}: no API key for the Gemini endpoint: set {_KEY} (and {_URL} for "
                "another endpoint), or pass api_key=/base_url=; in tests and examples, run "
                "inside juno_bind_trio.testing.fake_gemini_env(...)"
            )
        url = base_url if base_url is not None else (os.environ.get(_URL) or None)
        owned = new_gemini_client(base_url=url, api_key=key)
        return GeminiAdapter(owned.client), owned.aclose

    return open_adapter
