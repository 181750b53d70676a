"""Tools from Model Context Protocol servers, on trio and asyncio.

``pip install 'juno-bind-trio[mcp]'`` (the official ``mcp`` SDK, which is
written on anyio). Each ``open_mcp_*`` block connects to one server — a
subprocess over stdio, a URL over streamable HTTP, or an SDK client you
built — and yields an [MCPToolset][juno_bind_trio.mcp.MCPToolset] to pass to
``Agent(tools=[...])`` beside local tools.
"""

from juno_bind_trio._errors import MCPConnectionError as MCPConnectionError
from juno_bind_trio._errors import MCPToolError as MCPToolError
from juno_bind_trio._public import publish as _publish

from ._convert import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS
from ._convert import MCPToolInfo as MCPToolInfo
from ._toolset import IDEMPOTENCY_KEY_META as IDEMPOTENCY_KEY_META
from ._toolset import MCPToolset as MCPToolset
from ._toolset import open_mcp_client as open_mcp_client
from ._toolset import open_mcp_http as open_mcp_http
from ._toolset import open_mcp_stdio as open_mcp_stdio

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "IDEMPOTENCY_KEY_META",
    "MCPConnectionError",
    "MCPToolError",
    "MCPToolInfo",
    "MCPToolset",
    "open_mcp_client",
    "open_mcp_http",
    "open_mcp_stdio",
]

_publish(__name__, globals(), __all__)
