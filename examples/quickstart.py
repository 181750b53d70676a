from juno_bind_trio import Agent, tool
from juno_bind_trio.testing import StreamResponse as Reply, fake_openai_env

@tool
async def add(a: int, b: int) -> int:
    return a + b

agent = Agent("openai:gpt-4o-mini", tools=[add])
with fake_openai_env([Reply.of_tool_calls(("c1", "add", '{"a": 2, "b": 3}')), Reply.of_text("2 + 3 = 5")]):
    print(agent.run_sync("What is 2 + 3?").output)
