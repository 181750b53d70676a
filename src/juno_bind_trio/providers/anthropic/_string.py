"""``"anthropic:<model>"``: the adapter a model string opens, from arguments or the environment."""

from __future__ import annotations

import os
from typing import Final

from juno_bind_trio._errors import UsageError
from juno_bind_trio.providers._adapter import ProviderAdapter
from juno_bind_trio.providers._owned import AdapterCloser, StringAdapterOpener

__all__ = ["string_adapter_opener"]

_KEY: Final = "ANTHROPIC_API_KEY"
_URL: Final = "ANTHROPIC_BASE_URL"


def string_adapter_opener(
    owner: str, *, base_url: str | None, api_key: str | None
) -> StringAdapterOpener:
    """Opens an [`AnthropicAdapter`][juno_bind_trio.providers.anthropic.AnthropicAdapter] over a
    client of its own (SDK retries off), its key and URL read when it opens.

    The opener raises ``UsageError`` when there is no key (*api_key* not given
    and ``ANTHROPIC_API_KEY`` unset or empty).
    """
    from ._adapter import AnthropicAdapter
    from ._client import new_anthropic_client, sdk_ready

    sdk_ready()  # the SDK imported now, outside any run's deadline

    async def open_adapter() -> tuple[ProviderAdapter, AdapterCloser]:
        key = api_key if api_key is not None else os.environ.get(_KEY)
        if not key:
            raise UsageError(
                f"{owner}: no API key for the Anthropic endpoint: set {_KEY} (and {_URL} for "
                "another endpoint), or pass api_key=/base_url=; in tests and examples, run "
                "inside juno_bind_trio.testing.fake_anthropic_env(...)"
            )
        url = base_url if base_url is not None else (os.environ.get(_URL) or None)
        client = new_anthropic_client(base_url=url, api_key=key)
        return AnthropicAdapter(client), client.close

    return open_adapter
