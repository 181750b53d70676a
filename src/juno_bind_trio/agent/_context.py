"""What a tool is told about the run calling it: [RunContext][juno_bind_trio.agent.RunContext]."""

from __future__ import annotations

import functools
import json
from typing import Any, Generic

import attrs
from typing_extensions import TypeVar

from juno_bind_trio.run import ChainRef, tool_call_args_hash

__all__ = ["DepsT", "RunContext"]

DepsT = TypeVar("DepsT", default=None)


def _arguments_hash(arguments: str) -> str:
    """The hash of the call's parsed arguments, or of the raw text when it does not parse."""
    try:
        parsed: object = json.loads(arguments)
        return tool_call_args_hash(parsed)
    except (ValueError, TypeError, RecursionError):
        return tool_call_args_hash(arguments)


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
    # The run's own bookkeeping for sub-agents started from this call (a count
    # of running children), shared by every context of the run.
    _children: Any = attrs.field(default=None, alias="children", repr=False, eq=False)
    # Called by the tool once the arguments validated, right before the function
    # runs: the run's ToolCallStartedEvent.
    _on_start: Any = attrs.field(default=None, alias="on_start", repr=False, eq=False)

    @functools.cached_property
    def idempotency_key(self) -> str:
        """A key derived from *run_id*, *tool_call_id* and the hash of the arguments."""
        return tool_call_args_hash(
            [self.run_id, self.tool_call_id, _arguments_hash(self._arguments)]
        )
