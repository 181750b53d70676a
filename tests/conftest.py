"""Every async test runs on both anyio backends, each on a virtual clock.

* trio: ``trio.testing.MockClock(autojump_threshold=0)``.
* asyncio: :class:`virtual_asyncio.VirtualClockEventLoop`, which jumps the same way.

``--backend trio`` / ``--backend asyncio`` narrows the run (the nox sessions
use it). Tests that want a plain synchronous body (hypothesis over whole
scenarios) call :func:`run_on` with the ``backend`` fixture's value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pytest
import trio.testing

from virtual_asyncio import VirtualClockEventLoop

T = TypeVar("T")
BACKENDS = ("trio", "asyncio")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("all", *BACKENDS),
        default="all",
        help="which anyio backend(s) to run async tests on (default: all)",
    )


def selected_backends(config: pytest.Config) -> list[str]:
    choice = config.getoption("--backend")
    return list(BACKENDS) if choice == "all" else [choice]


def backend_options(name: str) -> dict[str, Any]:
    if name == "trio":
        return {"clock": trio.testing.MockClock(autojump_threshold=0)}
    return {"loop_factory": VirtualClockEventLoop}


@pytest.fixture(scope="module")
def anyio_backend() -> object:  # pragma: no cover - always replaced by the parametrization below
    raise AssertionError("anyio_backend is parametrized in pytest_generate_tests")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = selected_backends(metafunc.config)
    if "anyio_backend" in metafunc.fixturenames:
        metafunc.parametrize(
            "anyio_backend",
            [pytest.param((n, backend_options(n)), id=n) for n in names],
            scope="module",
        )
    elif "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", names)


def run_on(backend: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` to completion on *backend*, on a fresh virtual clock."""
    return anyio.run(fn, *args, backend=backend, backend_options=backend_options(backend))
