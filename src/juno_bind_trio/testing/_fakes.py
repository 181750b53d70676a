"""The fakes of the Responses API, Gemini and Bedrock: async context managers and ``fake_*_env``.

Each ``open_fake_*_server`` runs its server in the caller's task group, on
the test's (virtual) clock, like
[open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server];
each ``fake_*_env`` runs it on a thread of its own and points the provider
SDK's own environment variables at it for the body of a ``with``, like
[fake_openai_env][juno_bind_trio.testing.fake_openai_env], so code written
for the real endpoint talks to the fake one unchanged.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager

import anyio.from_thread
import sniffio

from juno_bind_trio._validate import error_kind

from ._bedrock import BedrockWire
from ._gemini import GeminiWire
from ._http import check_validate, compile_script
from ._responses import ResponsesWire
from ._wire import FakeProviderServer, ProviderScript, open_provider_server

__all__ = [
    "fake_bedrock_env",
    "fake_gemini_env",
    "fake_responses_env",
    "open_fake_bedrock_server",
    "open_fake_gemini_server",
    "open_fake_responses_server",
]


@asynccontextmanager
async def open_fake_responses_server(
    script: ProviderScript = None, *, validate_history: bool = True
) -> AsyncIterator[FakeProviderServer]:
    """A fake OpenAI Responses API (``POST /v1/responses``) for the body of an ``async with``.

    ``openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)``
    reaches it. Like the real API it refuses an ``input`` whose function calls
    and outputs do not pair up by ``call_id``, and reasoning items that come
    back altered or missing (``validate_history=False`` switches that off).
    """
    async with open_provider_server(
        "open_fake_responses_server", ResponsesWire(), script, validate_history=validate_history
    ) as server:
        yield server


@asynccontextmanager
async def open_fake_gemini_server(
    script: ProviderScript = None, *, validate_history: bool = True
) -> AsyncIterator[FakeProviderServer]:
    """A fake Gemini API (``…:streamGenerateContent?alt=sse``, ``…:generateContent``).

    ``genai.Client(api_key="test", http_options=HttpOptions(base_url=server.base_url,
    httpx_async_client=...))`` reaches it. Like the real API (Gemini 3) it
    refuses a function call turn not answered by as many function responses,
    and a function call of the current turn sent back without the
    ``thoughtSignature`` it came with, or with another one.
    """
    async with open_provider_server(
        "open_fake_gemini_server", GeminiWire(), script, validate_history=validate_history
    ) as server:
        yield server


@asynccontextmanager
async def open_fake_bedrock_server(
    script: ProviderScript = None, *, validate_history: bool = True
) -> AsyncIterator[FakeProviderServer]:
    """A fake Bedrock runtime (``/model/{id}/converse-stream`` and ``/converse``).

    Answers streams in AWS's binary event-stream framing
    (``application/vnd.amazon.eventstream``), errors as ``x-amzn-ErrorType``.
    ``endpoint_url=server.base_url`` reaches it. Like the real API it refuses
    a ``toolUse`` not answered by a ``toolResult`` in the next user message,
    roles out of turn, and a reasoning block whose signature was altered.
    """
    async with open_provider_server(
        "open_fake_bedrock_server", BedrockWire(), script, validate_history=validate_history
    ) as server:
        yield server


def _check_key(where: str, name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise error_kind(value, str)(f"{where}: {name} must be a non-empty str, got {value!r}")
    if "\x00" in value:
        raise ValueError(f"{where}: {name} cannot hold a NUL character (environment values)")
    return value


@contextmanager
def _serve_in_thread(
    where: str,
    opener: Callable[..., AbstractAsyncContextManager[FakeProviderServer]],
    script: ProviderScript,
    validate_history: bool,
    variables: Callable[[FakeProviderServer], Mapping[str, str | None]],
) -> Iterator[FakeProviderServer]:
    check_validate(where, validate_history)
    try:
        running: str | None = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        running = None
    if running is not None:
        # Blocking this loop's thread on the server's would deadlock a client of it here.
        raise RuntimeError(
            f"{where}: called inside a running {running} event loop; use the "
            "`async with open_fake_*_server(...)` of the same wire there, or enter this "
            "around the loop"
        )
    compile_script(where, script)  # a bad script fails here, not in the server's thread
    with (
        anyio.from_thread.start_blocking_portal(backend="trio") as portal,
        portal.wrap_async_context_manager(
            opener(script, validate_history=validate_history)
        ) as server,
    ):
        wanted = variables(server)
        saved = {name: os.environ.get(name) for name in wanted}
        try:
            for name, value in wanted.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            yield server
        finally:
            for name, old in saved.items():
                if old is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = old


@contextmanager
def fake_responses_env(
    script: ProviderScript = None, *, api_key: str = "fake-key", validate_history: bool = True
) -> Iterator[FakeProviderServer]:
    """Serve *script* as the Responses API from a thread, reached through ``OPENAI_BASE_URL``.

    ``OPENAI_API_KEY`` is set to *api_key* for the body too.

    ```python
    with fake_responses_env([StreamResponse.of_text("Hello!")]):
        print(Agent("openai-responses:any-name").run_sync("Hi").output)
    ```

    The server runs on the real clock; inside async tests use
    [open_fake_responses_server][juno_bind_trio.testing.open_fake_responses_server].
    The environment is the process's: not for tests in parallel threads.
    """
    key = _check_key("fake_responses_env", "api_key", api_key)
    with _serve_in_thread(
        "fake_responses_env",
        open_fake_responses_server,
        script,
        validate_history,
        lambda server: {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": key},
    ) as server:
        yield server


@contextmanager
def fake_gemini_env(
    script: ProviderScript = None, *, api_key: str = "fake-key", validate_history: bool = True
) -> Iterator[FakeProviderServer]:
    """Serve *script* as the Gemini API from a thread, reached through ``GOOGLE_GEMINI_BASE_URL``.

    ``GEMINI_API_KEY`` is set to *api_key*;

    ``GOOGLE_API_KEY`` (which the SDK prefers) and ``GOOGLE_GENAI_USE_VERTEXAI``
    are unset for the body. See
    [fake_responses_env][juno_bind_trio.testing.fake_responses_env].
    """
    key = _check_key("fake_gemini_env", "api_key", api_key)
    with _serve_in_thread(
        "fake_gemini_env",
        open_fake_gemini_server,
        script,
        validate_history,
        lambda server: {
            "GOOGLE_GEMINI_BASE_URL": server.base_url,
            "GEMINI_API_KEY": key,
            "GOOGLE_API_KEY": None,
            "GOOGLE_GENAI_USE_VERTEXAI": None,
        },
    ) as server:
        yield server


@contextmanager
def fake_bedrock_env(
    script: ProviderScript = None, *, region: str = "us-east-1", validate_history: bool = True
) -> Iterator[FakeProviderServer]:
    """Serve *script* as Bedrock from a thread; ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` reaches it.

    Sets fake static credentials (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``),
    the region, and ``AWS_EC2_METADATA_DISABLED``; unsets ``AWS_SESSION_TOKEN``
    and ``AWS_PROFILE``, so no credential is looked for anywhere else. See
    [fake_responses_env][juno_bind_trio.testing.fake_responses_env].
    """
    where = _check_key("fake_bedrock_env", "region", region)
    with _serve_in_thread(
        "fake_bedrock_env",
        open_fake_bedrock_server,
        script,
        validate_history,
        lambda server: {
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": server.base_url,
            "AWS_ACCESS_KEY_ID": "fake-access-key",
            "AWS_SECRET_ACCESS_KEY": "fake-secret-key",
            "AWS_DEFAULT_REGION": where,
            "AWS_REGION": where,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_SESSION_TOKEN": None,
            "AWS_PROFILE": None,
        },
    ) as server:
        yield server
