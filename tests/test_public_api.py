"""Pins each subpackage's public surface: ``__all__`` complete, resolvable and sorted."""

from __future__ import annotations

import importlib
import types

import pytest

SUBPACKAGES = [
    "juno_bind_trio",
    "juno_bind_trio.completion",
    "juno_bind_trio.loop",
    "juno_bind_trio.run",
    "juno_bind_trio.routing",
    "juno_bind_trio.plugins",
    "juno_bind_trio.transcript",
    "juno_bind_trio.schema",
    "juno_bind_trio.mcp",
    "juno_bind_trio.providers",
    "juno_bind_trio.providers.openai",
    "juno_bind_trio.providers.anthropic",
    "juno_bind_trio.providers.google",
    "juno_bind_trio.providers.bedrock",
    "juno_bind_trio.testing",
    "juno_bind_trio.store",
    "juno_bind_trio.agent",
    "juno_bind_trio.web",
]


def isort_key(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions: the order ruff's RUF022 keeps."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_all_is_sorted_and_has_no_duplicates(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported)
    assert exported == sorted(exported, key=isort_key)


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_public_name_is_exported(name: str) -> None:
    """A public attribute missing from ``__all__`` is an export that drifted."""
    module = importlib.import_module(name)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and attr != "annotations"
    }
    assert public - set(module.__all__) == set()


def test_exceptions_are_one_tree() -> None:
    """Every exception the package defines descends from JunoBindError.

    Except the crash harness's SimulatedCrash, which stands for a killed
    process and so must get past every ``except Exception`` (JunoBindError's).
    """
    from juno_bind_trio import _errors

    for value in vars(_errors).values():
        if isinstance(value, type) and issubclass(value, BaseException):
            if value is _errors.SimulatedCrash:
                assert not issubclass(value, Exception)
                continue
            assert issubclass(value, _errors.JunoBindError), value


# The public members of the classes a host builds its own layer on. A member
# added or removed here is a change of the public API: say so in the CHANGELOG.
PINNED_MEMBERS = {
    ("juno_bind_trio.agent", "AgentResult"): {
        "agent_name",
        "handoffs",
        "iterations",
        "messages",
        "new_messages",
        "output",
        "reason",
        "run_id",
        "stats",
        "suspensions",
        "pending",
    },
    ("juno_bind_trio.loop", "ModelTurn"): {
        "iteration",
        "messages",
        "report_progress",
        "text_stream",
        "tools",
        "turn_id",
        "with_extra_messages",
        "with_messages",
        "with_tools",
    },
    ("juno_bind_trio.providers.openai", "OpenAIChatModel"): {
        "attempt_function",
        "last_route",
        "plan",
        "request_options",
        "route",
        "with_request_options",
    },
}


@pytest.mark.parametrize(("module", "name"), sorted(PINNED_MEMBERS))
def test_public_members_are_pinned(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    members = {attr for attr in dir(cls) if not attr.startswith("_")}
    if name == "ModelTurn":
        # attrs fields without defaults are not class attributes.
        members |= {field.name for field in cls.__attrs_attrs__ if not field.name.startswith("_")}
    assert members == PINNED_MEMBERS[(module, name)]


def test_every_agent_event_is_importable_from_the_agent_package() -> None:
    """A reader matching on events imports each of them from one place."""
    import typing

    from juno_bind_trio import UsageLimitExceeded, agent
    from juno_bind_trio.completion import ResetEvent, TextEvent

    members = typing.get_args(agent.AgentEvent)
    assert TextEvent in members
    assert ResetEvent in members
    for member in members:
        assert getattr(agent, member.__name__) is member
        assert member.__name__ in agent.__all__
    # The limits and the error they raise live together.
    assert agent.UsageLimitExceeded is UsageLimitExceeded
    assert "UsageLimitExceeded" in agent.__all__
