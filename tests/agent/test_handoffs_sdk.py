"""A two-hop handoff through the real openai SDK against the validating fake server (#32).

Three agents, each a model string of its own (so each opens its own client:
the targets' when the run first reaches them), tools on every side. Every
request the run makes must be accepted by the server's tool-call history
check, and each must carry the instructions and tools of the agent speaking.
"""

from __future__ import annotations

import json

import pydantic
import pytest

from juno_bind_trio.agent import Agent, ToolCallDeltaEvent, ToolOutput, tool
from juno_bind_trio.testing import FakeResponse, StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio


@tool
async def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid, shipped"


@tool
async def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
async def track(order: str) -> dict[str, str]:
    """Where a parcel is."""
    return {"order": order, "at": "depot"}


def offered(request_json: dict[str, object]) -> list[str]:
    tools = request_json.get("tools") or []
    assert isinstance(tools, list)
    return [entry["function"]["name"] for entry in tools]


async def test_two_hops_with_tools_on_each_side(monkeypatch: pytest.MonkeyPatch) -> None:
    script: dict[str, list[FakeResponse]] = {
        "triage-m": [
            StreamResponse.of_tool_calls(("t1", "lookup", '{"order": "17"}')),
            StreamResponse.of_tool_calls(
                ("t2", "transfer_to_billing", "{}"), text="Passing you to billing."
            ),
        ],
        "billing-m": [
            StreamResponse.of_tool_calls(
                ("b1", "refund", '{"order": "17"}'), ("b2", "transfer_to_shipping", "{}")
            ),
        ],
        "shipping-m": [
            StreamResponse.of_tool_calls(("s1", "track", '{"order": "17"}')),
            StreamResponse.of_text("Refunded; ", "the parcel is at the depot."),
        ],
    }
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        shipping = Agent(
            "openai:shipping-m", name="shipping", instructions="Shipping.", tools=[track]
        )
        billing = Agent(
            "openai:billing-m",
            name="billing",
            instructions="Billing.",
            tools=[refund],
            handoffs=[shipping],
        )
        triage = Agent(
            "openai:triage-m",
            name="triage",
            instructions="Triage.",
            tools=[lookup],
            handoffs=[billing],
        )
        async with triage, billing, shipping:
            result = await triage.run("Refund order 17 and tell me where it is.")
    assert result.output == "Refunded; the parcel is at the depot."
    assert result.agent_name == "shipping"
    assert [(h.from_agent, h.to_agent, h.call_id) for h in result.handoffs] == [
        ("triage", "billing", "t2"),
        ("billing", "shipping", "b2"),
    ]
    requests = [r.json for r in server.requests]
    # Every request was answered: the server accepted each history.
    assert all(r.response is not None and r.first_byte_at is not None for r in server.requests)
    assert [r["model"] for r in requests] == [
        "triage-m",
        "triage-m",
        "billing-m",
        "shipping-m",
        "shipping-m",
    ]
    system = {"triage-m": "Triage.", "billing-m": "Billing.", "shipping-m": "Shipping."}
    tools = {
        "triage-m": ["lookup", "transfer_to_billing"],
        "billing-m": ["refund", "transfer_to_shipping"],
        "shipping-m": ["track"],
    }
    for request in requests:
        model = request["model"]
        assert isinstance(model, str)
        messages = request["messages"]
        assert isinstance(messages, list)
        assert messages[0] == {"role": "system", "content": system[model]}
        assert sum(m["role"] == "system" for m in messages) == 1
        assert offered(request) == tools[model]
    # The last request carries the whole run: both hops and every tool's answer.
    last = requests[-1]["messages"]
    assert isinstance(last, list)
    answers = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert answers["t1"] == "order 17: paid, shipped"
    assert answers["b1"] == "refunded 17"
    assert json.loads(answers["t2"])["transferred_to"] == "billing"
    assert json.loads(answers["b2"])["transferred_from"] == "billing"
    assert result.stats.model_calls == 5


class Invoice(pydantic.BaseModel):
    number: str
    total: float


async def test_a_targets_tool_mode_answer_streams_as_its_partial_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triage answers in text; billing in tool mode: the reader's partial output follows
    billing's output type from the handoff on, as its final-answer call streams."""
    script: dict[str, list[FakeResponse]] = {
        "triage-m": [StreamResponse.of_tool_calls(("h1", "transfer_to_billing", "{}"))],
        "billing-m": [
            StreamResponse.of_tool_calls(
                ("f1", "final_result", '{"number": "A-1", "total": 12.5}'), fragments=6
            )
        ],
    }
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        billing: Agent[None, Invoice] = Agent(
            "openai:billing-m", name="billing", output_type=ToolOutput(Invoice)
        )
        triage = Agent("openai:triage-m", name="triage", handoffs=[billing])
        streaming: list[object] = []  # the partial output after each argument fragment
        async with triage, billing, triage.open_run("invoice please") as run:
            async for event in run:
                if isinstance(event, ToolCallDeltaEvent) and event.turn_id.endswith(":2"):
                    streaming.append(run.partial_output)
    assert run.result is not None
    output: object = run.result.output  # the target's type: the starting agent's says str
    assert output == Invoice(number="A-1", total=12.5)
    assert len(streaming) > 1
    assert any(isinstance(p, Invoice) for p in streaming)  # seen while it streamed
