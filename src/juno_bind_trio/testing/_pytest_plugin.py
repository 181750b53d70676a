"""The pytest fixture ``block_model_requests``, registered as a pytest plugin by this package.

Loaded by pytest from the package's ``pytest11`` entry point; it imports
nothing of the harness until a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

__all__ = ["block_model_requests"]


@pytest.fixture
def block_model_requests() -> Iterator[None]:
    """Any request through a real provider client in this test raises ``UsageError``."""
    from juno_bind_trio.testing._doubles import block_model_requests as blocked

    with blocked():
        yield
