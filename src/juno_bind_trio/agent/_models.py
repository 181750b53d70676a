"""Model strings of every provider, and a list of them as a fallback plan.

``Agent("anthropic:claude-sonnet-4-5")``, ``Agent("google:gemini-2.5-flash")``,
``Agent("openai-responses:gpt-5")``, ``Agent("bedrock:<model id>")``, and
``Agent(["anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini"])``: the first
model, then the next as the fallback, each stage served by its provider.

Each provider's subpackage is imported when a string names it (never
before: an agent on OpenAI does not import the Anthropic SDK), and gives an
``open_string_adapter(owner, base_url=, api_key=)``: an async context manager
that opens the provider's client from the arguments or from the SDK's own
environment variables, with the SDK's retries off, and yields its adapter.
The agent owns what it opens, as it owns the client of an ``"openai:"``
string: one per event loop, opened at the first run (or by ``prepare()``),
closed by ``aclose()`` or with the loop (see ``providers/_owned.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, final

import anyio

from juno_bind_trio._validate import shown
from juno_bind_trio.providers import ProviderAdapter, RoutedModel
from juno_bind_trio.providers._owned import OwnedAdapter
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage

__all__ = ["PROVIDER_PREFIXES", "OwnedAdapters", "parse_model_string", "routed_model_source"]

PROVIDER_PREFIXES: Final = {
    "openai": "juno_bind_trio.providers.openai._string",
    "openai-responses": "juno_bind_trio.providers.openai._responses_string",
    "anthropic": "juno_bind_trio.providers.anthropic._string",
    "google": "juno_bind_trio.providers.google._string",
    "bedrock": "juno_bind_trio.providers.bedrock._string",
}
"""Each model string prefix, and the module whose ``open_string_adapter`` serves it."""

_SHAPE: Final = "'<provider>:<model>' with provider one of " + ", ".join(
    repr(p) for p in PROVIDER_PREFIXES
)


def parse_model_string(owner: str, text: str) -> tuple[str, str]:
    """``(provider, model)`` of a model string, or a ``ValueError`` naming it."""
    provider, colon, name = text.partition(":")
    if not colon or provider not in PROVIDER_PREFIXES or not name.strip():
        raise ValueError(
            f"{owner}: a model string must be 'openai:<model-name>' or another provider's "
            f"{_SHAPE}, got {text!r}; for anything else pass a RoutedModel or an OpenAIChatModel"
        )
    return provider, name


Opener = Callable[..., AbstractAsyncContextManager[ProviderAdapter]]


def _opener(owner: str, provider: str) -> Opener:
    module_name = PROVIDER_PREFIXES[provider]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ValueError(
                f"{owner}: provider {provider!r} is not available in this version of the package"
            ) from None
        raise  # the provider's extra is missing: its ImportError names it
    opener: Opener = module.open_string_adapter
    return opener


@final
class OwnedAdapters:
    """The adapters an agent's model strings opened, per event loop: opened and closed together."""

    __slots__ = ("_owned",)

    def __init__(self, owned: Mapping[str, OwnedAdapter]) -> None:
        self._owned = dict(owned)

    async def adapters(self) -> dict[str, ProviderAdapter]:
        """This event loop's adapter of each provider, opened now where it has none."""
        return {provider: await owned.adapter() for provider, owned in self._owned.items()}

    async def client(self) -> None:
        """Open them all (the agent's ``prepare()``)."""
        await self.adapters()

    async def aclose(self) -> None:
        """Close every client this event loop opened, each however the others fare."""
        with anyio.CancelScope(shield=True):
            for owned in self._owned.values():
                await owned.aclose()

    def is_open(self) -> bool:
        """Whether the current event loop has any of them open."""
        return any(owned.is_open() for owned in self._owned.values())


def routed_model_source(
    owner: str,
    model: str | Sequence[str],
    request_options: Mapping[str, Any],
    *,
    base_url: object,
    api_key: object,
) -> tuple[Callable[[], AbstractAsyncContextManager[Any]], str, OwnedAdapters]:
    """The model source of a model string (or a list of them, a fallback plan), its
    description, and what the agent owns."""
    texts = [model] if isinstance(model, str) else list(model)
    if not texts:
        raise ValueError(f"{owner}: a list of model strings must not be empty")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"{owner}: model[{index}] must be a model string ({_SHAPE}), got {shown(text)}"
            )
    for name, value in (("base_url", base_url), ("api_key", api_key)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{owner}: {name} must be a str or None, got {shown(value)}")
    parsed = [parse_model_string(owner, text) for text in texts]
    providers = list(dict.fromkeys(provider for provider, _ in parsed))
    if (base_url is not None or api_key is not None) and len(providers) > 1:
        raise ValueError(
            f"{owner}: base_url=/api_key= configure one provider, and {providers!r} are named; "
            "set each provider's environment variables, or pass a RoutedModel"
        )
    stages: list[RouteStage] = []
    for provider, name in parsed:
        if stages and stages[-1].model == name:
            raise ValueError(f"{owner}: model {name!r} is named twice in a row")
        stages.append(RouteStage(name, [Candidate(provider)]))
    plan = RoutePlan(stages)
    owned = OwnedAdapters(
        {
            provider: OwnedAdapter(
                _bind(_opener(owner, provider), owner, base_url=base_url, api_key=api_key)
            )
            for provider in providers
        }
    )
    # One model per set of adapters: a loop's runs share both.
    built: list[tuple[tuple[int, ...], RoutedModel]] = []

    @asynccontextmanager
    async def routed() -> AsyncIterator[RoutedModel]:
        adapters = await owned.adapters()
        key = tuple(id(adapter) for adapter in adapters.values())
        if not built or built[0][0] != key:
            built[:] = [
                (key, RoutedModel(plan=plan, adapters=adapters, request_options=request_options))
            ]
        yield built[0][1]

    described = model if isinstance(model, str) else repr(texts)
    return routed, described, owned


def _bind(
    opener: Opener, owner: str, *, base_url: object, api_key: object
) -> Callable[[], AbstractAsyncContextManager[ProviderAdapter]]:
    def open_adapter() -> AbstractAsyncContextManager[ProviderAdapter]:
        return opener(owner, base_url=base_url, api_key=api_key)

    return open_adapter
