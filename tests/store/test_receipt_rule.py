"""Receipt keys read a call's arguments by the one rule, and keep older receipts good.

``""``, whitespace, ``"null"`` and ``"{}"`` are one set of arguments, so one
key; a receipt written before that rule (when ``""`` and ``"{}"`` hashed
apart) still answers its call on resume, and the call is not run again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.run import ToolCallReceiptKey, tool_call_args_hash
from juno_bind_trio.store import RunStore, open_durable_run, tool_call_receipt_key

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "ping them"}]


def call(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "ping", "arguments": arguments}}


@pytest.mark.parametrize("raw", ["", "   ", "null", " null\n", "{ }"])
def test_every_way_of_sending_no_arguments_has_the_key_of_an_empty_object(raw: str) -> None:
    assert tool_call_receipt_key("r", call("c", raw)) == tool_call_receipt_key("r", call("c", "{}"))
    assert tool_call_receipt_key("r", call("c", raw)).args_hash == tool_call_args_hash({})


@pytest.mark.parametrize("raw", ["", "null", "[1, 2]"])
async def test_a_receipt_an_earlier_version_wrote_still_answers_its_call(
    store: RunStore, raw: str
) -> None:
    # Written as versions before the one rule hashed it: json.loads of the text,
    # or the text itself where that failed.
    try:
        earlier = tool_call_args_hash(json.loads(raw))
    except ValueError:
        earlier = tool_call_args_hash(raw)
    assert earlier != tool_call_receipt_key("r1", call("c1", raw)).args_hash
    await store.create_run("r1", messages=USER)
    lease = await store.claim_run("r1", owner="old-version", ttl=30)
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("c1", raw)]}
    await store.save_turn(lease, iteration=1, assistant=assistant)
    key = ToolCallReceiptKey(run_id="r1", tool_call_id="c1", tool_name="ping", args_hash=earlier)
    await store.start_call(lease, iteration=1, key=key, resumability="non_repeatable")
    answer = {"role": "tool", "tool_call_id": "c1", "content": "pinged once"}
    await store.settle_call(
        lease, iteration=1, tool_call_id="c1", state="succeeded", message=answer
    )
    await store.release(lease, status="running")

    async def must_not_run(_call: object) -> Any:
        pytest.fail("a call its receipt answers must not run again")

    async with open_durable_run(store, "r1", owner="new-version") as run:
        (decision,) = await run.finish_open_turn(must_not_run)
        assert (decision.state, decision.action) == ("succeeded", "reuse")
        assert run.state.messages[-1] == answer
        await run.finish("completed")


async def test_a_receipt_for_other_arguments_is_still_no_receipt(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    lease = await store.claim_run("r1", owner="w", ttl=30)
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("c1", '{"n": 2}')]}
    await store.save_turn(lease, iteration=1, assistant=assistant)
    other = tool_call_receipt_key("r1", call("c1", '{"n": 1}'))
    await store.start_call(lease, iteration=1, key=other, resumability="non_repeatable")
    await store.release(lease, status="running")

    async def ping(given: Any) -> Any:
        return ToolCallOutcome.from_content(given["id"], "pinged")

    async with open_durable_run(store, "r1", owner="w2") as run:
        (decision,) = await run.finish_open_turn(ping)
        assert (decision.state, decision.action) == ("absent", "run")
