"""Whether requests to real model providers are allowed: ``testing.block_model_requests``.

A process-wide count, so a block covers every task and worker thread of a
test. Each provider client calls ``check_model_request`` here before it sends.
"""

from __future__ import annotations

import threading

from juno_bind_trio._errors import UsageError

__all__ = ["block", "check_model_request", "unblock"]

_lock = threading.Lock()
_blocks = 0


def block() -> None:
    global _blocks
    with _lock:
        _blocks += 1


def unblock() -> None:
    global _blocks
    with _lock:
        _blocks = max(0, _blocks - 1)


def check_model_request(provider: str, model: str) -> None:
    """Raise ``UsageError`` naming the request when model requests are blocked."""
    if _blocks:
        raise UsageError(
            f"a request to {provider} model {model!r} was made inside block_model_requests(): "
            "tests use TestModel, FunctionModel or a fake server (testing.fake_openai_env)"
        )
