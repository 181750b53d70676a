"""classify_run_failure: a timeout, a cancellation, a fatal tool error, an outage, a bug."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio import AllRoutesFailedError, NoViableEndpointError, RunTimeoutError
from juno_bind_trio.run import RunDeadline, RunFailureStatus, classify_run_failure

pytestmark = pytest.mark.anyio


class WriteNotRecordedError(Exception):
    """A host's fatal tool error."""


def is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, WriteNotRecordedError)


async def test_a_real_cancellation_is_cancelled() -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.sleep(1)
        except anyio.get_cancelled_exc_class() as exc:
            failure = classify_run_failure(exc)
            raise
    assert scope.cancelled_caught
    assert failure.status == "cancelled"
    assert failure.cause is failure.exception


async def test_inside_the_deadline_its_cancellation_is_a_timeout() -> None:
    statuses: list[RunFailureStatus] = []
    deadline = RunDeadline(3)

    async def body() -> None:
        try:
            await anyio.sleep_forever()
        except BaseException as exc:
            statuses.append(classify_run_failure(exc, deadline=deadline).status)
            statuses.append(classify_run_failure(exc).status)  # without it: a cancel
            raise

    with pytest.raises(RunTimeoutError) as info, deadline:
        await body()
    statuses.append(classify_run_failure(info.value).status)  # outside: already the error
    assert statuses == ["timed_out", "cancelled", "timed_out"]


async def test_an_outer_cancel_inside_a_deadline_is_still_cancelled() -> None:
    with anyio.move_on_after(1):
        with RunDeadline(3) as deadline:
            try:
                await anyio.sleep_forever()
            except BaseException as exc:
                failure = classify_run_failure(exc, deadline=deadline)
                raise
    assert failure.status == "cancelled"


async def test_an_outer_cancel_whose_cleanup_outlasts_the_deadline_is_still_cancelled() -> None:
    """Classified after the block, as the documented pattern does: the deadline passing
    during the shielded cleanup of an outer cancel did not end the run."""
    start = anyio.current_time()
    with anyio.move_on_after(5) as outer:
        try:
            with RunDeadline(8) as deadline:
                try:
                    await anyio.sleep_forever()
                finally:
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(10)  # past the deadline at 8
        except BaseException as exc:
            failure = classify_run_failure(exc, deadline=deadline)
            raise
    assert outer.cancelled_caught
    assert anyio.current_time() - start == 15
    assert not deadline.timed_out
    assert failure.status == "cancelled"


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (RunTimeoutError(5), "timed_out"),
        (KeyboardInterrupt(), "cancelled"),
        (SystemExit(1), "cancelled"),
        (WriteNotRecordedError("ledger"), "fatal_tool_error"),
        (AllRoutesFailedError(()), "providers_exhausted"),
        (NoViableEndpointError(()), "providers_exhausted"),
        (ValueError("bug"), "failed"),
        (TimeoutError("a tool's own timeout"), "failed"),  # not the run's deadline
    ],
)
def test_single_exceptions(exc: BaseException, status: RunFailureStatus) -> None:
    failure = classify_run_failure(exc, is_fatal_tool_error=is_fatal)
    assert failure.status == status
    assert failure.cause is exc
    assert failure.exception is exc


def test_without_the_predicate_a_fatal_error_is_just_a_failure() -> None:
    assert classify_run_failure(WriteNotRecordedError("x")).status == "failed"


def test_a_group_is_decided_by_its_most_telling_leaf() -> None:
    timeout = RunTimeoutError(5)
    group = ExceptionGroup("run", [ValueError("a"), ExceptionGroup("inner", [timeout])])
    failure = classify_run_failure(group)
    assert failure.status == "timed_out"
    assert failure.cause is timeout
    assert failure.exception is group


def test_a_fatal_leaf_beats_a_plain_failure_and_is_the_cause() -> None:
    fatal = WriteNotRecordedError("ledger")
    group = ExceptionGroup("run", [ValueError("a"), fatal, KeyError("b")])
    failure = classify_run_failure(group, is_fatal_tool_error=is_fatal)
    assert (failure.status, failure.cause) == ("fatal_tool_error", fatal)


def test_an_outage_beats_a_plain_failure_but_not_a_fatal_tool_error() -> None:
    outage = AllRoutesFailedError(())
    fatal = WriteNotRecordedError("ledger")
    assert classify_run_failure(ExceptionGroup("g", [ValueError(), outage])).cause is outage
    both = ExceptionGroup("g", [outage, fatal])
    assert classify_run_failure(both, is_fatal_tool_error=is_fatal).cause is fatal


def test_a_base_group_with_a_cancellation_is_cancelled() -> None:
    stop = KeyboardInterrupt()
    group = BaseExceptionGroup("run", [ValueError("a"), stop])
    assert classify_run_failure(group).cause is stop


def test_a_group_that_answers_for_itself_is_not_descended() -> None:
    class TrailError(ExceptionGroup[Exception]):
        pass

    trail = TrailError("every route failed", [ValueError("503"), ValueError("429")])
    failure = classify_run_failure(trail, is_fatal_tool_error=lambda e: e is trail)
    assert (failure.status, failure.cause) == ("fatal_tool_error", trail)


def test_not_an_exception_is_refused_by_name() -> None:
    with pytest.raises(
        TypeError, match=r"^classify_run_failure: exc must be an exception, got 'x'$"
    ):
        classify_run_failure("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="is_fatal_tool_error must be callable, got 3"):
        classify_run_failure(ValueError(), is_fatal_tool_error=3)  # type: ignore[arg-type]
    # refused whatever the exception, not only when a cancellation happens to ask it
    with pytest.raises(TypeError, match="deadline must be a RunDeadline or None, got 30"):
        classify_run_failure(ValueError(), deadline=30)  # type: ignore[arg-type]


# --- the order holds whatever the shape of the group ---------------------------------

_LEAVES: dict[RunFailureStatus, st.SearchStrategy[BaseException]] = {
    "timed_out": st.builds(RunTimeoutError, st.just(1.0)),
    "cancelled": st.builds(KeyboardInterrupt),
    "fatal_tool_error": st.builds(WriteNotRecordedError),
    "providers_exhausted": st.builds(NoViableEndpointError, st.just(())),
    "failed": st.builds(ValueError),
}
_ORDER = ["timed_out", "cancelled", "fatal_tool_error", "providers_exhausted", "failed"]


def _trees() -> st.SearchStrategy[BaseException]:
    leaves = st.one_of(*_LEAVES.values())
    return st.recursive(
        leaves,
        lambda children: st.lists(children, min_size=1, max_size=4).map(
            lambda xs: BaseExceptionGroup("g", xs)
        ),
        max_leaves=12,
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@given(_trees())
def test_the_status_is_the_most_telling_leaf_and_the_cause_is_one_of_them(
    tree: BaseException,
) -> None:
    failure = classify_run_failure(tree, is_fatal_tool_error=is_fatal)
    leaves = _leaves(tree)
    expected = min(
        (classify_run_failure(leaf, is_fatal_tool_error=is_fatal).status for leaf in leaves),
        key=_ORDER.index,
    )
    assert failure.status == expected
    assert any(failure.cause is leaf for leaf in leaves)
    assert failure.exception is tree
