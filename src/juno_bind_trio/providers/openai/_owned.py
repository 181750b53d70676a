"""The ``AsyncOpenAI`` a model string opens: its endpoint and key from arguments or the environment.

``"openai:<model>"`` and ``"openai-responses:<model>"`` each open one client
per event loop (the rule and its reasons are in ``providers/_owned.py``);
this is how that client is made: the arguments checked when the model is
built (and the SDK imported then, outside any run's deadline), the
environment read when the client is opened (so a model built before the
environment is set, as in the quick start, still finds it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, final

from juno_bind_trio._errors import UsageError
from juno_bind_trio._validate import shown

from ._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    is_http_url,
    new_openai_client,
    sdk_ready,
)

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIClientSettings"]

_KEY_VARIABLE: Final = "OPENAI_API_KEY"
_URL_VARIABLE: Final = "OPENAI_BASE_URL"


@final
class OpenAIClientSettings:
    """Where an owned ``AsyncOpenAI`` sends, checked now and read from the environment later.

    *owner* names the caller in errors; *base_url* and *api_key* default to
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, read by ``new_client()``.
    Building one imports the SDK (``sdk_ready()``).
    """

    __slots__ = ("_api_key", "_base_url", "_owner")

    def __init__(self, owner: str, *, base_url: object = None, api_key: object = None) -> None:
        for name, text in (("base_url", base_url), ("api_key", api_key)):
            if text is not None and not isinstance(text, str):
                raise TypeError(f"{owner}: {name} must be a str or None, got {shown(text)}")
        if base_url is not None and not is_http_url(str(base_url)):
            raise ValueError(f"{owner}: base_url must be an http(s) URL, got {base_url!r}")
        if api_key == "":
            raise ValueError(
                f"{owner}: api_key must not be empty; leave it out to read {_KEY_VARIABLE}"
            )
        sdk_ready()
        self._owner = owner
        self._base_url: str | None = base_url if isinstance(base_url, str) else None
        self._api_key: str | None = api_key if isinstance(api_key, str) else None

    def _settings(self) -> tuple[str, str | None]:
        key = self._api_key if self._api_key is not None else os.environ.get(_KEY_VARIABLE)
        if not key:
            raise UsageError(
                f"{self._owner}: no API key for the OpenAI endpoint: set {_KEY_VARIABLE} (any "
                f"non-empty value for a local server that needs none) and {_URL_VARIABLE} for "
                "an OpenAI-compatible provider, or pass Agent(..., api_key=..., base_url=...); "
                "in tests and examples, run inside juno_bind_trio.testing.fake_openai_env(...)"
            )
        url = self._base_url if self._base_url is not None else os.environ.get(_URL_VARIABLE)
        if url is not None and not url:
            url = None  # as the SDK reads an empty variable: the default endpoint
        if url is not None and not is_http_url(url):
            raise UsageError(f"{self._owner}: {_URL_VARIABLE} must be an http(s) URL, got {url!r}")
        return key, url

    def new_client(self) -> openai.AsyncOpenAI:
        """A new client, its retries off, a connect and an idle read timeout (awaits nothing).

        :raises UsageError: no API key (``OPENAI_API_KEY`` unset or empty and
            none given), or ``OPENAI_BASE_URL`` is not an http(s) URL.
        """
        key, url = self._settings()
        import openai

        timeout = openai.Timeout(None, connect=DEFAULT_CONNECT_TIMEOUT, read=DEFAULT_READ_TIMEOUT)
        return new_openai_client(api_key=key, base_url=url, max_retries=0, timeout=timeout)
