"""Provider routing: route plans, the deterministic executor, the circuit breaker, the taxonomy.

The TypeScript package's routing layer (``executeRoutePlan``). Build a
[`RoutePlan`][juno_bind_trio.routing.RoutePlan] once, classify each attempt's failure (for the
openai SDK,
[`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error]), and let
[`execute_route_plan()`][juno_bind_trio.routing.execute_route_plan] walk the plan. See the
explanation page "Routing" for the design.

``classify_openai_error`` and ``MODEL_LIMIT_ERROR_CODES`` are provider code and live in
``juno_bind_trio.providers.openai``; they are still importable from here for one release,
resolved on first use so routing itself imports no provider (docs/explanation/layering.md).
"""

import typing as _typing

from juno_bind_trio._errors import AllRoutesFailedError as AllRoutesFailedError
from juno_bind_trio._errors import NoViableEndpointError as NoViableEndpointError
from juno_bind_trio._errors import RoutingError as RoutingError
from juno_bind_trio._public import publish as _publish

from ._breaker import DEFAULT_FAILURE_THRESHOLD as DEFAULT_FAILURE_THRESHOLD
from ._breaker import DEFAULT_RESET_TIMEOUT as DEFAULT_RESET_TIMEOUT
from ._breaker import BreakerPermit as BreakerPermit
from ._breaker import BreakerState as BreakerState
from ._breaker import CircuitBreaker as CircuitBreaker
from ._breaker import CircuitBreakerStatistics as CircuitBreakerStatistics
from ._breaker import EndpointStatistics as EndpointStatistics
from ._executor import AdjustmentReason as AdjustmentReason
from ._executor import AttemptFn as AttemptFn
from ._executor import AttemptRecord as AttemptRecord
from ._executor import RouteResult as RouteResult
from ._executor import RouteStatus as RouteStatus
from ._executor import SkippedCandidate as SkippedCandidate
from ._executor import execute_route_plan as execute_route_plan
from ._plan import DEFAULT_MAX_RETRIES as DEFAULT_MAX_RETRIES
from ._plan import DEFAULT_MAX_RETRY_WAIT as DEFAULT_MAX_RETRY_WAIT
from ._plan import Candidate as Candidate
from ._plan import RouteCursor as RouteCursor
from ._plan import RoutePlan as RoutePlan
from ._plan import RouteStage as RouteStage
from ._retry_after import parse_retry_after as parse_retry_after
from ._taxonomy import AttemptFailure as AttemptFailure
from ._taxonomy import AttemptSuccess as AttemptSuccess
from ._taxonomy import ClassifiedError as ClassifiedError
from ._taxonomy import RouteAction as RouteAction

__all__ = [
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_WAIT",
    "DEFAULT_RESET_TIMEOUT",
    "MODEL_LIMIT_ERROR_CODES",
    "AdjustmentReason",
    "AllRoutesFailedError",
    "AttemptFailure",
    "AttemptFn",
    "AttemptRecord",
    "AttemptSuccess",
    "BreakerPermit",
    "BreakerState",
    "Candidate",
    "CircuitBreaker",
    "CircuitBreakerStatistics",
    "ClassifiedError",
    "EndpointStatistics",
    "NoViableEndpointError",
    "RouteAction",
    "RouteCursor",
    "RoutePlan",
    "RouteResult",
    "RouteStage",
    "RouteStatus",
    "RoutingError",
    "SkippedCandidate",
    "classify_openai_error",
    "execute_route_plan",
    "parse_retry_after",
]

if _typing.TYPE_CHECKING:
    from juno_bind_trio.providers.openai._classify import (
        MODEL_LIMIT_ERROR_CODES as MODEL_LIMIT_ERROR_CODES,
    )
    from juno_bind_trio.providers.openai._classify import (
        classify_openai_error as classify_openai_error,
    )

# Moved to juno_bind_trio.providers.openai; re-exported here until the next release.
_MOVED = frozenset({"MODEL_LIMIT_ERROR_CODES", "classify_openai_error"})


def __getattr__(name: str) -> _typing.Any:
    if name in _MOVED:
        # The module, not the package: this may run while juno_bind_trio.providers.openai
        # is itself being imported (a module of it that still names the old path).
        from juno_bind_trio.providers.openai import _classify

        return getattr(_classify, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_publish(__name__, globals(), [name for name in __all__ if name not in _MOVED])
