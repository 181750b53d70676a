"""Opening a client is cheap: the CA bundle is loaded once per process, no thread is needed."""

from __future__ import annotations

import ssl
from typing import Any

import httpx2
import pytest

from juno_bind_trio.providers.openai import open_openai_client
from juno_bind_trio.providers.openai._client import sdk_ready

pytestmark = pytest.mark.anyio


async def test_clients_share_one_tls_context_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk_ready()
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    for _ in range(3):
        async with open_openai_client(base_url="https://127.0.0.1:9/v1", api_key="k") as client:
            assert client._platform is not None  # primed without a worker thread
    assert loads == []
    # The control: a client the SDK builds itself loads the bundle again.
    import openai

    async with openai.AsyncOpenAI(api_key="k", max_retries=0):
        pass
    assert len(loads) >= 1


async def test_an_http_client_of_yours_is_used_as_given() -> None:
    mine = httpx2.AsyncClient()
    async with open_openai_client(
        base_url="http://127.0.0.1:9/v1", api_key="k", http_client=mine
    ) as client:
        assert client._client is mine
    assert mine.is_closed


def test_the_sdk_is_made_ready_once_per_process() -> None:
    first = sdk_ready()
    assert sdk_ready() is first
    platform, context = first
    assert platform is not None
    assert isinstance(context, ssl.SSLContext)
