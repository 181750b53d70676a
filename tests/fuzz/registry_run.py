"""Fuzz entries for `juno_bind_trio.run`."""

from __future__ import annotations

import json
import re
from typing import Any

import hypothesis.strategies as st
from fuzz_json import JSON_VALUES
from fuzz_support import Call, Entry, call, register_example

from juno_bind_trio.run import (
    ChainLink,
    ChainRef,
    ChainRule,
    ChildAdmission,
    CoalescedHeartbeat,
    HeartbeatStatistics,
    PollSchedule,
    PollStep,
    ReceiptDecision,
    RunDeadline,
    RunFailure,
    RunStop,
    SoftStop,
    ToolBatch,
    ToolBatchStatistics,
    ToolCall,
    ToolCallReceiptKey,
    admit_child_run,
    assistant_message,
    canonical_json,
    classify_run_failure,
    decide_tool_call_receipt,
    descend_chain,
    either_stop,
    open_coalesced_heartbeat,
    root_chain,
    run_tool_calls_pooled_by_tool,
    tool_call_args_hash,
    tool_call_arguments,
    tool_call_id,
    tool_call_name,
    tool_call_receipt_key_string,
    tool_message,
)

register_example(
    ToolCallReceiptKey,
    st.builds(
        ToolCallReceiptKey,
        run_id=st.text(min_size=1, max_size=5),
        tool_call_id=st.text(min_size=1, max_size=5),
        tool_name=st.text(min_size=1, max_size=5),
        args_hash=st.text(min_size=1, max_size=5),
    ),
)


def canonical_text_round_trips(arguments: Call, text: Any) -> None:
    """The text parses, and is its own canonical form: one text per JSON value."""
    assert isinstance(text, str)
    assert canonical_json(json.loads(text)) == text


def is_sha256_hex(arguments: Call, digest: Any) -> None:
    assert isinstance(digest, str)
    assert re.fullmatch("[0-9a-f]{64}", digest)


ENTRIES = [
    Entry(
        canonical_json,
        args=JSON_VALUES.map(call),
        check=canonical_text_round_trips,
    ),
    Entry(
        tool_call_args_hash,
        args=JSON_VALUES.map(call),
        check=is_sha256_hex,
    ),
    Entry(
        decide_tool_call_receipt,
        args=st.builds(
            call,
            st.sampled_from(["absent", "not_run", "started", "interrupted", "succeeded", "x"]),
            st.one_of(st.sampled_from(["repeatable", "non_repeatable"]), st.just([])),
        ),
        label="juno_bind_trio.run.decide_tool_call_receipt[values]",
    ),
    Entry(ChainLink),
    Entry(ChainRef),
    Entry(ChainRule),
    Entry(ChildAdmission),
    Entry(CoalescedHeartbeat),
    Entry(HeartbeatStatistics),
    Entry(PollSchedule),
    Entry(PollStep),
    Entry(ReceiptDecision),
    Entry(RunDeadline),
    Entry(RunFailure),
    Entry(RunStop),
    Entry(SoftStop),
    Entry(ToolBatch),
    Entry(ToolBatchStatistics),
    Entry(ToolCall),
    Entry(ToolCallReceiptKey),
    Entry(admit_child_run),
    Entry(assistant_message),
    Entry(classify_run_failure),
    Entry(decide_tool_call_receipt),
    Entry(descend_chain),
    Entry(either_stop),
    Entry(open_coalesced_heartbeat),
    Entry(root_chain),
    Entry(run_tool_calls_pooled_by_tool, also_named=("ToolBatch",)),
    Entry(tool_call_arguments),
    Entry(tool_call_id),
    Entry(tool_call_name),
    Entry(tool_call_receipt_key_string),
    Entry(tool_message),
]
