"""``"bedrock:<model id>"``: the adapter a model string opens, from arguments or the environment."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Final

from juno_bind_trio._errors import UsageError
from juno_bind_trio.providers._adapter import ProviderAdapter

__all__ = ["open_string_adapter"]

_URL: Final = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"


@asynccontextmanager
async def open_string_adapter(
    owner: str, *, base_url: str | None, api_key: str | None
) -> AsyncIterator[ProviderAdapter]:
    """A [`BedrockAdapter`][juno_bind_trio.providers.bedrock.BedrockAdapter] over a client of its
    own, closed on the way out.

    *base_url* is the endpoint (else ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, then
    ``AWS_ENDPOINT_URL``, then the region's); the region is ``AWS_REGION`` /
    ``AWS_DEFAULT_REGION``; the credentials the AWS variables
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), then
    botocore's chain (profiles, SSO, instance roles). AWS has no single API key:
    *api_key* is refused.

    :raises UsageError: *api_key* given, or no credentials found anywhere.
    """
    import botocore.exceptions

    from ._adapter import BedrockAdapter
    from ._client import open_bedrock_client

    if api_key is not None:
        raise UsageError(
            f"{owner}: a 'bedrock:' model signs its requests with AWS credentials, not an "
            "api_key: set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or a profile), or pass a "
            "RoutedModel with a BedrockAdapter over open_bedrock_client(...)"
        )
    url = base_url if base_url is not None else (os.environ.get(_URL) or None)
    async with AsyncExitStack() as stack:
        try:
            client = await stack.enter_async_context(open_bedrock_client(endpoint_url=url))
        except botocore.exceptions.NoCredentialsError:
            raise UsageError(
                f"{owner}: no AWS credentials for the Bedrock endpoint: set AWS_ACCESS_KEY_ID "
                f"and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), and {_URL} for another endpoint; "
                "in tests and examples, run inside juno_bind_trio.testing.fake_bedrock_env(...)"
            ) from None
        yield BedrockAdapter(client)
