"""What a tool is told about the run calling it: [RunContext][juno_bind_trio.agent.RunContext]."""

from __future__ import annotations

import functools
from typing import Any, Generic, final

import attrs
from typing_extensions import TypeVar

from juno_bind_trio._errors import UsageError
from juno_bind_trio.run import (
    ChainRef,
    ToolCall,
    tool_call_idempotency_key,
    tool_call_receipt_key,
)

__all__ = ["DepsT", "RunChildren", "RunContext", "run_context"]

DepsT = TypeVar("DepsT", default=None)


@final
class RunChildren:
    """How many sub-agent runs a run has going, for admission."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running: int = 0


@attrs.frozen(kw_only=True, slots=False)
class RunContext(Generic[DepsT]):
    """The run a tool call belongs to, given to a tool whose first parameter asks for it.

    Declare it as the **first** parameter, annotated ``RunContext[YourDeps]``;
    it is injected and never appears in the schema the model sees:

    ```python
    @tool
    async def balance(ctx: RunContext[Bank], account: str) -> int:
        return await ctx.deps.balance(account)
    ```

    * *deps*: what the run was given as ``deps=`` (your database pool, an
      HTTP client, the user).
    * *run_id*, *tool_call_id*, *tool_name*, *iteration*: where this call is.
      *iteration* is the run's model turn that asked for the call, from 1; a
      run [resumed][juno_bind_trio.agent.Agent.resume] from a store keeps
      counting where the stored run was, so it is the iteration the call's
      receipt is stored under, in whichever process the call runs.
    * *idempotency_key*: stable across crashes and resumes, the same for the
      same run, call id and arguments (their
      [tool_call_args_hash][juno_bind_trio.run.tool_call_args_hash]): pass it
      to a payment API or anything else that de-duplicates on a key. Computed
      when first read.
    * *chain*: this run's lineage; pass the context as ``parent=`` to start a
      sub-agent run under it.
    """

    deps: DepsT
    run_id: str
    tool_call_id: str
    tool_name: str
    iteration: int
    chain: ChainRef
    _arguments: str = attrs.field(default="{}", alias="arguments", repr=False)
    # The call itself, as the run dispatched it: its arguments' digest is computed
    # once for the receipt, this key and every other reader.
    _call: ToolCall | None = attrs.field(default=None, alias="call", repr=False, eq=False)
    # The run's own bookkeeping for sub-agents started from this call (a count
    # of running children), shared by every context of the run.
    _children: Any = attrs.field(default=None, alias="children", repr=False, eq=False)
    # Called by the tool once the arguments validated, right before the function
    # runs: the run's ToolCallStartedEvent.
    _on_start: Any = attrs.field(default=None, alias="on_start", repr=False, eq=False)

    @functools.cached_property
    def idempotency_key(self) -> str:
        """A key derived from *run_id*, *tool_call_id* and the hash of the arguments.

        The one key [tool_call_idempotency_key][juno_bind_trio.run.tool_call_idempotency_key]
        derives for the call's receipt key.

        :raises UsageError: this context is the run's own (its instructions'),
            not a tool call's.
        """
        call = self._call
        if call is None:
            if not self.tool_call_id:
                raise UsageError(
                    "RunContext.idempotency_key: this context belongs to no tool call "
                    "(tool_call_id is empty), and only a call has an idempotency key"
                )
            call = ToolCall(self.tool_call_id, self.tool_name, self._arguments)
        return tool_call_idempotency_key(tool_call_receipt_key(self.run_id, call))


def call_context(core: Any, call: ToolCall) -> RunContext[Any]:
    """The context of *call* in run *core* (``_run._RunCore``) before it runs, at the run's
    current iteration: what an approval predicate and a tool guard's ``before`` read."""
    return RunContext(
        deps=core.deps,
        run_id=core.run_id,
        tool_call_id=call.id,
        tool_name=call.name,
        iteration=core.iteration,
        chain=core.chain,
        arguments=call.arguments,
        call=call,
        children=core.children,
    )


def run_context(core: Any, iteration: int) -> RunContext[Any]:
    """The context of run *core* (``_run._RunCore``) itself, at no tool call: what its
    instructions function is given."""
    return RunContext(
        deps=core.deps,
        run_id=core.run_id,
        tool_call_id="",
        tool_name="",
        iteration=iteration,
        chain=core.chain,
        children=core.children,
    )
