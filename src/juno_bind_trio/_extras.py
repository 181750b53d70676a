"""The optional extras, and the error that says which one to install and how.

A subpackage built on an optional dependency calls
``require("web", "juno_bind_trio.web", "starlette", "hypercorn")`` before it
imports any of it. Without the guard, a base install meets the first import
that fails deep inside, whose name need not be the extra's (the MCP adapter
used to fail on ``jsonschema``), and no word of how to get it.

The install line is the one that works: the package is installed from a
checkout (it is on no package index), so ``pip install -e '.[web]'`` in it.

The guard finds the modules without running them (``importlib.util.find_spec``):
a subpackage that imports its SDK where it is used (the providers do) costs no SDK
import until then. ``import anthropic`` alone is some two seconds of CPU, which every
``import juno_bind_trio.providers.anthropic`` paid before it was needed, and every
test process and script that never opened a client.
"""

from __future__ import annotations

import importlib.util
from typing import Final

__all__ = ["EXTRAS", "install_line", "require"]

EXTRAS: Final = {
    "anthropic": ("anthropic",),
    "bedrock": ("aiobotocore", "botocore"),
    "google": ("google.genai",),
    "web": ("starlette", "hypercorn", "ag_ui"),
    "mcp": ("mcp", "mcp_types", "jsonschema"),
    "otel": ("opentelemetry",),
    "postgres": ("psycopg", "psycopg_pool"),
}
"""Each extra and the modules whose absence means it is not installed."""


def install_line(extra: str) -> str:
    """How to install *extra*: in the checkout the package was installed from."""
    return f"pip install -e '.[{extra}]' (in the juno-bind-trio checkout)"


def _missing(module: str) -> str | None:
    """The name of what is not installed of *module*, or ``None`` if it is (found, not run)."""
    try:
        spec = importlib.util.find_spec(module)
    except ImportError as exc:  # a parent package is missing, or a finder refused it
        return exc.name or module
    except ValueError:  # in sys.modules without a spec: it is there
        return None
    return module if spec is None else None


def require(extra: str, feature: str, *modules: str) -> None:
    """Find *modules* (default: the extra's), or raise ``ImportError`` naming *extra*.

    Found, not imported (only a dotted name's parent packages are): the caller
    imports each where it uses it. The error names the feature, the module that
    is missing and the install line; it is raised ``from None``, since the
    missing module is in its text.
    """
    for module in modules or EXTRAS[extra]:
        missing = _missing(module)
        if missing is not None:
            raise ImportError(
                f"{feature} needs the [{extra}] extra ({missing} is not installed): "
                f"{install_line(extra)}",
                name=missing,
            ) from None
