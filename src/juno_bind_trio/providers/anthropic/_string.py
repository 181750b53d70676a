"""``"anthropic:<model>"``: the adapter a model string opens, from arguments or the environment."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from juno_bind_trio._errors import UsageError
from juno_bind_trio.providers._adapter import ProviderAdapter

__all__ = ["open_string_adapter"]

_KEY: Final = "ANTHROPIC_API_KEY"
_URL: Final = "ANTHROPIC_BASE_URL"


@asynccontextmanager
async def open_string_adapter(
    owner: str, *, base_url: str | None, api_key: str | None
) -> AsyncIterator[ProviderAdapter]:
    """An [`AnthropicAdapter`][juno_bind_trio.providers.anthropic.AnthropicAdapter] over a client
    of its own, closed on the way out.

    :raises UsageError: no key (*api_key* not given and ``ANTHROPIC_API_KEY`` unset or empty).
    """
    from ._adapter import AnthropicAdapter
    from ._client import open_anthropic_client

    key = api_key if api_key is not None else os.environ.get(_KEY)
    if not key:
        raise UsageError(
            f"{owner}: no API key for the Anthropic endpoint: set {_KEY} (and {_URL} for "
            "another endpoint), or pass api_key=/base_url=; in tests and examples, run inside "
            "juno_bind_trio.testing.fake_anthropic_env(...)"
        )
    url = base_url if base_url is not None else (os.environ.get(_URL) or None)
    async with open_anthropic_client(base_url=url, api_key=key) as client:
        yield AnthropicAdapter(client)
