"""A Griffe extension: label what the reference must say about how a name is used.

Griffe already labels ``async def`` functions ``async``. This adds the label
``async with`` to a function decorated with ``contextlib.asynccontextmanager``
(``open_openai_client`` is entered with ``async with``, not awaited) and to a
class that defines ``__aenter__``. mkdocs.yml loads it for the reference pages.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

ASYNC_WITH = "async with"


class AsyncUsageLabels(griffe.Extension):
    """Label async context managers in the rendered reference."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for decorator in func.decorators:
            if str(decorator.value).rsplit(".", 1)[-1] == "asynccontextmanager":
                func.labels.add(ASYNC_WITH)
                func.labels.discard("async")

    def on_class_members(
        self, *, node: ast.AST | griffe.ObjectNode, cls: griffe.Class, **kwargs: Any
    ) -> None:
        if "__aenter__" in cls.members:
            cls.labels.add(ASYNC_WITH)
