"""What the tests of the provider-wire fakes share: the stall that the SDK's read timeout ends.

``test_fake_bedrock.py``, ``test_fake_gemini.py`` and ``test_fake_responses.py``
each point their real SDK at their fake with a read timeout of 5 s and play a
stall. Whatever exception the SDK raises for it, the time is the same: the
timeout fires at exactly 5 virtual seconds, and the fake records the client
hanging up at that instant.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest

from juno_bind_trio.testing import (
    FakeProviderServer,
    FakeResponse,
    Pause,
    StreamResponse,
    TextDelta,
)

STALLS = [
    pytest.param(
        StreamResponse.of_text("never", first_byte_delay=math.inf), id="before-first-byte"
    ),
    pytest.param(
        StreamResponse([TextDelta("a"), Pause(math.inf), TextDelta("b")]), id="between-chunks"
    ),
]
"""A stall before the first byte and one between two chunks."""


async def check_the_stall_ends_at_the_read_timeout(
    response: StreamResponse,
    open_server: Callable[
        [Sequence[FakeResponse]], AbstractAsyncContextManager[FakeProviderServer]
    ],
    open_sdk: Callable[..., AbstractAsyncContextManager[Any]],
    read: Callable[[Any], Awaitable[object]],
    raises: type[BaseException] | tuple[type[BaseException], ...],
) -> None:
    """Play *response* to ``open_sdk(url, read=5.0)``; *read* raises *raises* at 5 s exactly."""
    async with (
        open_server([response]) as server,
        open_sdk(server.base_url, read=5.0) as client,
    ):
        start = anyio.current_time()
        with pytest.raises(raises):
            await read(client)
        assert anyio.current_time() - start == pytest.approx(5.0)
        await anyio.sleep(0.01)  # the server notices the hang-up at once
    assert server.requests[0].client_gone_at == pytest.approx(start + 5.0)
