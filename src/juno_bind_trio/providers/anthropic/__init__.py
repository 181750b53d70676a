"""The ``anthropic`` SDK on the provider seam: the Messages API, streamed (``[anthropic]`` extra).

[`AnthropicAdapter`][juno_bind_trio.providers.anthropic.AnthropicAdapter] streams one turn per
attempt (text, ``tool_use`` calls, thinking blocks kept with their signatures and sent back on the
next turn) and judges its failures with
[`classify_anthropic_error()`][juno_bind_trio.providers.anthropic.classify_anthropic_error]; give
it to a [`RoutedModel`][juno_bind_trio.providers.RoutedModel], or use the model string
``"anthropic:<model>"`` with an [`Agent`][juno_bind_trio.agent.Agent].
[`open_anthropic_client()`][juno_bind_trio.providers.anthropic.open_anthropic_client] makes the
client the way routing needs it.
"""

from juno_bind_trio._extras import require as _require

_require("anthropic", "juno_bind_trio.providers.anthropic")

from juno_bind_trio._public import publish as _publish  # noqa: E402

from ._adapter import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS  # noqa: E402
from ._adapter import AnthropicAdapter as AnthropicAdapter  # noqa: E402
from ._client import open_anthropic_client as open_anthropic_client  # noqa: E402
from ._convert import STRUCTURED_OUTPUT_TOOL as STRUCTURED_OUTPUT_TOOL  # noqa: E402
from ._errors import PROMPT_TOO_LONG_MARKERS as PROMPT_TOO_LONG_MARKERS  # noqa: E402
from ._errors import classify_anthropic_error as classify_anthropic_error  # noqa: E402

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "PROMPT_TOO_LONG_MARKERS",
    "STRUCTURED_OUTPUT_TOOL",
    "AnthropicAdapter",
    "classify_anthropic_error",
    "open_anthropic_client",
]

_publish(__name__, globals(), __all__)
