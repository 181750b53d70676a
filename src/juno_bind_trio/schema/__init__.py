"""Tool-schema sanitization: one JSON schema, rewritten per provider dialect.

See [`sanitize_tool_schema()`][juno_bind_trio.schema.sanitize_tool_schema], and the explanation page
"Tool-schema sanitization" for why each rewrite is the one it is.
"""

from juno_bind_trio._errors import SchemaError as SchemaError
from juno_bind_trio._public import publish as _publish

from ._change import SCHEMA_DIALECTS as SCHEMA_DIALECTS
from ._change import SanitizeResult as SanitizeResult
from ._change import SchemaChange as SchemaChange
from ._change import SchemaChangeAction as SchemaChangeAction
from ._change import SchemaDialect as SchemaDialect
from ._sanitize import sanitize_tool_schema as sanitize_tool_schema

__all__ = [
    "SCHEMA_DIALECTS",
    "SanitizeResult",
    "SchemaChange",
    "SchemaChangeAction",
    "SchemaDialect",
    "SchemaError",
    "sanitize_tool_schema",
]

_publish(__name__, globals(), __all__)
