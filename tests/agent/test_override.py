"""Agent.override: runs started inside the block use the stand-ins, and no others do."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import FunctionModel, TestModel

pytestmark = pytest.mark.anyio


def answering(text: str) -> FunctionModel:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        await anyio.sleep(0.01)  # a checkpoint, so concurrent runs interleave
        return ModelTurnResult(content=text)

    return FunctionModel(model)


async def test_override_applies_to_runs_started_inside_it_only_under_100_concurrent_runs() -> None:
    agent = Agent(answering("real"))
    outputs: dict[int, str] = {}

    async def one(i: int) -> None:
        outputs[i] = (await agent.run(f"run {i}")).output

    async with anyio.create_task_group() as outside:
        for i in range(50):
            outside.start_soon(one, i)  # started outside the block
        with agent.override(model=answering("stand-in")):
            async with anyio.create_task_group() as inside:
                for i in range(50, 100):
                    inside.start_soon(one, i)
    assert {outputs[i] for i in range(50)} == {"real"}
    assert {outputs[i] for i in range(50, 100)} == {"stand-in"}
    # After the block, the agent's own model again.
    assert (await agent.run("after")).output == "real"


async def test_override_replaces_deps_and_tools_and_nests() -> None:
    @tool
    def whoami(ctx: RunContext[str]) -> str:
        return f"user {ctx.deps}"

    @tool
    def other() -> str:
        return "other"

    agent = Agent(TestModel(), tools=[whoami], deps_type=str)
    assert "user alice" in (await agent.run("who", deps="alice")).output
    with agent.override(deps="bob"):
        assert "user bob" in (await agent.run("who", deps="alice")).output
        with agent.override(tools=[other]):
            nested = (await agent.run("who", deps="alice")).output
            assert '"other": "other"' in nested
            assert "whoami" not in nested
        assert "user bob" in (await agent.run("who", deps="alice")).output
    assert "user alice" in (await agent.run("who", deps="alice")).output


async def test_override_checks_what_it_is_given_as_the_constructor_does() -> None:
    agent = Agent(TestModel())
    with pytest.raises(TypeError, match="model string"), agent.override(model="openai:gpt-4o"):
        pass
    not_async = lambda turn: None  # noqa: E731
    with pytest.raises(TypeError, match="not async"), agent.override(model=not_async):  # type: ignore[arg-type]
        pass
    with pytest.raises(TypeError), agent.override(tools=[3]):
        pass
    assert (await agent.run("still mine")).output == '"done"'


@settings(max_examples=30, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_each_run_sees_the_block_it_started_in(inside: list[bool]) -> None:
    agent = Agent(answering("real"))

    async def main() -> list[str]:
        results: list[str] = [""] * len(inside)

        async def one(i: int) -> None:
            results[i] = (await agent.run("x")).output

        async with anyio.create_task_group() as tg:
            for i, flag in enumerate(inside):
                if flag:
                    with agent.override(model=answering("stand-in")):
                        tg.start_soon(one, i)
                else:
                    tg.start_soon(one, i)
        return results

    results = anyio.run(main)
    assert results == ["stand-in" if flag else "real" for flag in inside]


async def test_override_of_tools_on_a_model_string_keeps_the_agents_one_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Agent("openai:...") owns one client, closed by aclose(). A block replacing only
    # the tools runs on that client: it opens none of its own that nothing would close.
    from juno_bind_trio.providers.openai import _string
    from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

    opened: list[str] = []
    closed: list[str] = []
    real_opener = _string.string_adapter_opener

    def counting_opener(owner: str, *, base_url: str | None, api_key: str | None) -> Any:
        open_adapter = real_opener(owner, base_url=base_url, api_key=api_key)

        async def spied() -> tuple[Any, Any]:
            adapter, close = await open_adapter()
            name = f"client {len(opened)}"
            opened.append(name)

            async def spied_close() -> None:
                closed.append(name)
                await close()

            return adapter, spied_close

        return spied

    monkeypatch.setattr(_string, "string_adapter_opener", counting_opener)

    @tool
    def lookup(key: str) -> str:
        """Look *key* up."""
        return f"value of {key}"

    script = [
        StreamResponse.of_tool_calls(("c1", "lookup", '{"key": "k"}')),
        StreamResponse.of_text("found"),
        StreamResponse.of_text("outside"),
    ]
    async with open_fake_openai_server(script) as server:
        agent = Agent("openai:gpt-test", base_url=server.base_url, api_key="k")
        with agent.override(tools=[lookup]):
            inside = await agent.run("look k up")
        assert (await agent.run("and now")).output == "outside"
        await agent.aclose()
    assert inside.output == "found"
    assert "value of k" in str(server.requests[1].json["messages"])
    assert [r.json.get("tools") is not None for r in server.requests] == [True, True, False]
    assert opened == ["client 0"]
    assert closed == ["client 0"]
    # Every request, inside the block and out, went over the one client's one connection.
    assert [r.connection for r in server.requests] == [0, 0, 0]


async def test_a_test_model_replaces_a_model_that_has_request_options() -> None:
    # The agent's request options belong to its OpenAI model; a block putting a test
    # model (or a function model) in its place runs instead of refusing the options.
    agent = Agent("openai:gpt-4o-mini", request_options={"temperature": 0.2}, api_key="k")
    try:
        with agent.override(model=TestModel(text="from the test model")):
            assert (await agent.run("hi")).output == "from the test model"
        with agent.override(model=answering("function")):
            assert (await agent.run("hi")).output == "function"
    finally:
        await agent.aclose()
