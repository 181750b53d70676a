"""Provider adapters on one seam, and the model that routes across them.

[`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter] is the seam: one provider's SDK
as routing drives it (stream a turn; judge a failure).
[`RoutedModel`][juno_bind_trio.providers.RoutedModel] routes each turn over a
[`RoutePlan`][juno_bind_trio.routing.RoutePlan] whose candidates name adapters, so a plan
may fall back from one provider to another mid-stream. Each provider is a subpackage:
``providers.openai`` (chat completions), ``providers.anthropic`` (the ``[anthropic]`` extra), and
the others; none is imported until used.
[`StringModel`][juno_bind_trio.providers.StringModel] is what a model string
(``"anthropic:claude-…"``, or a list of them as a fallback plan) builds: a
``RoutedModel`` over adapters whose clients it opens and owns.
"""

from juno_bind_trio._options import RESERVED_REQUEST_OPTIONS as RESERVED_REQUEST_OPTIONS
from juno_bind_trio._public import publish as _publish

from ._adapter import PROVIDER_STATE_KEY as PROVIDER_STATE_KEY
from ._adapter import ProviderAdapter as ProviderAdapter
from ._adapter import ProviderRequest as ProviderRequest
from ._adapter import provider_state_of as provider_state_of
from ._adapter import strip_provider_state as strip_provider_state
from ._routed import RoutedModel as RoutedModel
from ._routed import messages_for as messages_for
from ._strings import MODEL_STRING_PREFIXES as MODEL_STRING_PREFIXES
from ._strings import StringModel as StringModel

__all__ = [
    "MODEL_STRING_PREFIXES",
    "PROVIDER_STATE_KEY",
    "RESERVED_REQUEST_OPTIONS",
    "ProviderAdapter",
    "ProviderRequest",
    "RoutedModel",
    "StringModel",
    "messages_for",
    "provider_state_of",
    "strip_provider_state",
]

_publish(__name__, globals(), __all__)
