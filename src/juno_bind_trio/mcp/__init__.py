"""Tools from Model Context Protocol servers, on trio and asyncio.

Needs the ``mcp`` extra (the official ``mcp`` SDK, which is written on
anyio): ``pip install -e '.[mcp]'`` in the checkout. Each ``open_mcp_*``
block connects to one server — a subprocess over stdio, a URL over
streamable HTTP, or an SDK client you built — and yields an
[MCPToolset][juno_bind_trio.mcp.MCPToolset] to pass to ``Agent(tools=[...])``
beside local tools.
"""

from juno_bind_trio._extras import require as _require

_require("mcp", "juno_bind_trio.mcp")

from juno_bind_trio._errors import MCPConnectionError as MCPConnectionError  # noqa: E402
from juno_bind_trio._errors import MCPToolError as MCPToolError  # noqa: E402
from juno_bind_trio._public import publish as _publish  # noqa: E402

from ._connect import open_mcp_client as open_mcp_client  # noqa: E402
from ._connect import open_mcp_http as open_mcp_http  # noqa: E402
from ._connect import open_mcp_stdio as open_mcp_stdio  # noqa: E402
from ._convert import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS  # noqa: E402
from ._convert import MCPToolInfo as MCPToolInfo  # noqa: E402
from ._toolset import IDEMPOTENCY_KEY_META as IDEMPOTENCY_KEY_META  # noqa: E402
from ._toolset import MCPToolset as MCPToolset  # noqa: E402

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
