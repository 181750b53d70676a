"""The client of an agent built from a model string: one per event loop, opened once, closed.

Against the package's fake server on 127.0.0.1 through the real openai SDK.
Constructions are counted by wrapping ``openai.AsyncOpenAI.__init__``; the
server's ``connection`` ordinal shows keep-alive reuse from the other side.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import anyio
import openai
import pytest

from conftest import run_on
from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent
from juno_bind_trio.providers import StringModel
from juno_bind_trio.providers.openai import OpenAIChatAdapter, open_openai_client
from juno_bind_trio.testing import StreamResponse, fake_openai_env, open_fake_openai_server

pytestmark = pytest.mark.anyio

ANSWER = StreamResponse.of_text("Hi", " there.")


def always(_request: object) -> StreamResponse:
    return ANSWER


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[openai.AsyncOpenAI]:
    """Every ``AsyncOpenAI`` constructed during the test, in order."""
    seen: list[openai.AsyncOpenAI] = []
    original = openai.AsyncOpenAI.__init__

    def counting(self: openai.AsyncOpenAI, *args: Any, **kwargs: Any) -> None:
        seen.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "__init__", counting)
    return seen


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return monkeypatch


def owned(agent: Agent[Any, Any]) -> openai.AsyncOpenAI:
    """The client the agent holds open in the current loop (white-box, for the checks)."""
    holder = agent._owned
    assert isinstance(holder, StringModel)
    (owner,) = holder._owned.values()
    (held,) = owner._adapters.values()
    adapter = held.adapter
    assert isinstance(adapter, OpenAIChatAdapter)
    return adapter.client


async def test_every_run_in_a_loop_shares_one_client_and_one_connection(
    built: list[openai.AsyncOpenAI], environment: pytest.MonkeyPatch
) -> None:
    async with open_fake_openai_server(always) as server:
        environment.setenv("OPENAI_BASE_URL", server.base_url)
        environment.setenv("OPENAI_API_KEY", "k")
        agent = Agent("openai:m")
        assert built == []  # built lazily: the environment is read at the first run
        for _ in range(4):
            assert (await agent.run("Hello")).output == "Hi there."
        assert len(built) == 1
        assert [r.connection for r in server.requests] == [0, 0, 0, 0]
        await agent.aclose()
        assert built[0].is_closed()


async def test_runs_starting_together_open_one_client(
    built: list[openai.AsyncOpenAI], environment: pytest.MonkeyPatch
) -> None:
    async with open_fake_openai_server(always) as server:
        agent = Agent("openai:m", base_url=server.base_url, api_key="k")
        outputs: list[str] = []

        async def one() -> None:
            outputs.append((await agent.run("Hello")).output)

        async with anyio.create_task_group() as tg:
            for _ in range(32):
                tg.start_soon(one)
        await agent.aclose()
    assert outputs == ["Hi there."] * 32
    assert len(built) == 1


async def test_aclose_closes_it_and_a_later_run_opens_another(
    built: list[openai.AsyncOpenAI], environment: pytest.MonkeyPatch
) -> None:
    async with open_fake_openai_server(always) as server:
        agent = Agent("openai:m", base_url=server.base_url, api_key="k")
        await agent.run("one")
        first = owned(agent)
        await agent.aclose()
        assert first.is_closed()
        await agent.aclose()  # again: nothing left to close
        await agent.run("two")
        assert built == [first, owned(agent)]
        assert not owned(agent).is_closed()
        await agent.aclose()
    assert [r.connection for r in server.requests] == [0, 1]


async def test_async_with_prepares_before_the_first_run_and_closes_on_exit(
    built: list[openai.AsyncOpenAI], environment: pytest.MonkeyPatch
) -> None:
    async with open_fake_openai_server(always) as server:
        environment.setenv("OPENAI_BASE_URL", server.base_url)
        environment.setenv("OPENAI_API_KEY", "k")
        async with Agent("openai:m") as agent:
            assert len(built) == 1  # opened on entry, before any run
            client = owned(agent)
            assert (await agent.run("Hello")).output == "Hi there."
            assert built == [client]
        assert client.is_closed()


async def test_the_first_run_waits_on_no_thread_and_starts_at_once(
    environment: pytest.MonkeyPatch,
) -> None:
    # A fresh AsyncOpenAI runs its platform probe in a worker thread on its
    # first request: time inside the run's deadline, and on a virtual clock a
    # jump to the next deadline. The agent's client has its answer already.
    from openai import _base_client

    probed_in_threads: list[str] = []
    probe = _base_client.get_platform

    def recording() -> Any:
        if threading.current_thread() is not threading.main_thread():
            probed_in_threads.append(threading.current_thread().name)
        return probe()

    environment.setattr(_base_client, "get_platform", recording)
    async with open_fake_openai_server(always) as server:
        agent = Agent("openai:m", base_url=server.base_url, api_key="k")
        start = anyio.current_time()
        with anyio.fail_after(1):
            result = await agent.run("Hello")
        assert anyio.current_time() - start == 0
        assert result.output == "Hi there."
        await agent.aclose()
    assert probed_in_threads == []


def test_the_client_closes_when_its_event_loop_ends_unclosed(backend: str) -> None:
    clients: list[openai.AsyncOpenAI] = []

    async def run_and_leave_it_open() -> None:
        async with open_fake_openai_server(always) as server:
            agent = Agent("openai:m", base_url=server.base_url, api_key="k")
            await agent.run("Hello")
            clients.append(owned(agent))
            assert not clients[0].is_closed()

    run_on(backend, run_and_leave_it_open)
    assert clients[0].is_closed()


def test_run_sync_twice_on_both_backends_each_with_its_own_client(
    built: list[openai.AsyncOpenAI],
) -> None:
    agent = Agent("openai:m")
    with fake_openai_env(always) as server:
        outputs = [
            agent.run_sync("one").output,
            agent.run_sync("two", backend="asyncio").output,
            agent.run_sync("three", backend="asyncio").output,
            agent.run_sync("four").output,
        ]
    assert outputs == ["Hi there."] * 4
    # A loop per call, a client per loop, each closed before run_sync returned.
    assert len(built) == 4
    assert all(client.is_closed() for client in built)
    assert [r.connection for r in server.requests] == [0, 1, 2, 3]


# The SDK's own stream iterators (and its HTTP stack's), which trio reports as
# abandoned after a stream (harmless; see pyproject.toml). Ours are not excused.
SDK_GENERATORS = [
    arg
    for package in ("openai", "httpx2", "httpcore2", "httpx", "httpcore")
    for arg in ("-W", f"ignore:Async generator '{package}.:ResourceWarning")
]


def test_a_script_that_never_closes_its_agent_exits_without_a_warning(tmp_path: Any) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, trio
            from juno_bind_trio import Agent
            from juno_bind_trio.testing import StreamResponse, fake_openai_env

            agent = Agent("openai:m")
            never_run = Agent("openai:m")

            async def main():
                for prompt in ("one", "two"):
                    print((await agent.run(prompt)).output)

            with fake_openai_env(lambda request: StreamResponse.of_text("ok")):
                trio.run(main)
                asyncio.run(main())
                print(agent.run_sync("three").output)
            """
        )
    )
    completed = subprocess.run(
        [sys.executable, "-W", "error", *SDK_GENERATORS, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["ok"] * 5
    # Not a ResourceWarning for a socket, not trio's warning about the
    # generator holding the client: nothing at all on stderr. (Not under -X dev:
    # its asyncio debug mode reports slow callbacks, which a loaded machine has.)
    assert completed.stderr == ""


def test_the_sdk_is_imported_when_the_agent_is_built() -> None:
    probe = (
        "import sys\n"
        "from juno_bind_trio import Agent\n"
        "assert 'openai' not in sys.modules\n"
        "Agent('openai:m')\n"
        "print(all(m in sys.modules for m in "
        "('openai', 'openai.resources.chat.completions')))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "True\n"


# --- a missing key ------------------------------------------------------------------------


def check_missing_key(error: BaseException) -> None:
    assert type(error) is UsageError
    text = str(error)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "fake_openai_env", "api_key="):
        assert name in text, name
    # Raised before the SDK is asked for anything: none of its errors underneath.
    assert error.__cause__ is None
    assert not isinstance(error.__context__, openai.OpenAIError)


async def test_a_missing_key_is_the_packages_error_at_the_first_run(
    environment: pytest.MonkeyPatch,
) -> None:
    agent = Agent("openai:m")  # built without a key: the key is read later
    with pytest.raises(UsageError) as caught:
        await agent.run("Hello")
    check_missing_key(caught.value)
    with pytest.raises(UsageError) as caught:  # noqa: PT012 - the block is the entry point
        async with agent.open_run("Hello") as run:
            async for _ in run:
                pass
    check_missing_key(caught.value)
    with pytest.raises(UsageError) as caught:
        await agent.prepare()
    check_missing_key(caught.value)
    with pytest.raises(UsageError) as caught:
        async with agent:
            pass
    check_missing_key(caught.value)
    environment.setenv("OPENAI_API_KEY", "")  # empty is missing too
    with pytest.raises(UsageError):
        await agent.prepare()


def test_a_missing_key_from_run_sync(environment: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError) as caught:
        Agent("openai:m").run_sync("Hello")
    check_missing_key(caught.value)


async def test_a_base_url_that_is_not_http_is_named(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("OPENAI_API_KEY", "k")
    environment.setenv("OPENAI_BASE_URL", "localhost:8000/v1")
    with pytest.raises(UsageError, match="OPENAI_BASE_URL must be an http"):
        await Agent("openai:m").run("Hello")


# --- base_url, api_key, client ----------------------------------------------------------------


async def test_base_url_and_api_key_win_over_the_environment(
    environment: pytest.MonkeyPatch,
) -> None:
    environment.setenv("OPENAI_API_KEY", "from-env")
    environment.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    async with (
        open_fake_openai_server(always) as server,
        Agent("openai:m", base_url=server.base_url, api_key="given") as agent,
    ):
        assert (await agent.run("Hello")).output == "Hi there."
    assert server.requests[0].header("authorization") == "Bearer given"


async def test_a_client_of_yours_is_used_and_never_closed(
    built: list[openai.AsyncOpenAI], environment: pytest.MonkeyPatch
) -> None:
    async with (
        open_fake_openai_server(always) as server,
        open_openai_client(base_url=server.base_url, api_key="mine") as mine,
    ):
        first = Agent("openai:m", client=mine)
        second = Agent("openai:m", client=mine, instructions="Be brief.")
        async with first:
            await first.run("one")
            await second.run("two")
        await second.aclose()
        assert not mine.is_closed()
        assert built == [mine]
    assert [r.connection for r in server.requests] == [0, 0]
    assert server.requests[1].header("authorization") == "Bearer mine"


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"base_url": 8080}, TypeError, "base_url must be a str"),
        ({"api_key": b"k"}, TypeError, "api_key must be a str"),
        ({"base_url": "127.0.0.1:8080"}, ValueError, "base_url must be an http(s) URL"),
        ({"api_key": ""}, ValueError, "api_key must not be empty"),
        ({"client": "a client"}, TypeError, "client must be an openai.AsyncOpenAI"),
        (
            {"client": openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9")},
            ValueError,
            "max_retries=0",
        ),
        (
            {
                "client": openai.AsyncOpenAI(api_key="k", max_retries=0),
                "base_url": "http://127.0.0.1:9/v1",
            },
            ValueError,
            "client= or base_url=/api_key=, not both",
        ),
    ],
)
def test_bad_endpoint_settings_are_refused_when_the_agent_is_built(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        Agent("openai:m", **kwargs)
    assert str(caught.value).startswith("Agent: ")


async def test_endpoint_settings_belong_to_a_model_string_only() -> None:
    async def scripted(turn: Any) -> Any:
        raise AssertionError("never called")

    with pytest.raises(ValueError, match="a function model calls no endpoint"):
        Agent(scripted, base_url="http://127.0.0.1:9/v1")
    # Nothing to open for a function model: prepare and aclose do nothing.
    async with Agent(scripted) as agent:
        await agent.prepare()


@pytest.mark.parametrize(
    ("prefix", "env"),
    [
        ("anthropic", "fake_anthropic_env"),
        ("openai-responses", "fake_responses_env"),
        ("bedrock", "fake_bedrock_env"),
    ],
)
def test_every_providers_string_agent_never_closed_exits_without_a_word(
    tmp_path: Any, prefix: str, env: str
) -> None:
    # Each loop closes the client when it ends, by finalizing the one generator that holds
    # it: an opener that is itself a generator would be closed concurrently with its holder,
    # "already running", with a traceback for each (what "anthropic:" agents printed).
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, trio
            from juno_bind_trio import Agent
            from juno_bind_trio.testing import StreamResponse, {env}

            agent = Agent("{prefix}:m")

            async def main():
                for prompt in ("one", "two"):
                    print((await agent.run(prompt)).output)

            with {env}([StreamResponse.of_text("ok")] * 5):
                trio.run(main)
                asyncio.run(main())
                print(agent.run_sync("three").output)
            """
        )
    )
    completed = subprocess.run(
        [sys.executable, "-W", "error", *SDK_GENERATORS, str(script)],
        capture_output=True,
        text=True,
        timeout=90,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["ok"] * 5
    assert completed.stderr == ""
