"""``"bedrock:<model id>"``: the adapter a model string opens, from arguments or the environment."""

from __future__ import annotations

import os
from typing import Final

from juno_bind_trio._errors import UsageError
from juno_bind_trio.providers._adapter import ProviderAdapter
from juno_bind_trio.providers._owned import AdapterCloser, StringAdapterOpener

__all__ = ["string_adapter_opener"]

_URL: Final = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"


def string_adapter_opener(
    owner: str, *, base_url: str | None, api_key: str | None
) -> StringAdapterOpener:
    """Opens a [`BedrockAdapter`][juno_bind_trio.providers.bedrock.BedrockAdapter] over a client
    of its own.

    *base_url* is the endpoint (else ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, then
    ``AWS_ENDPOINT_URL``, then the region's); the region is ``AWS_REGION`` /
    ``AWS_DEFAULT_REGION``; the credentials the AWS variables
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), then
    botocore's chain (profiles, SSO, instance roles), looked up when the
    opener runs (``UsageError`` when none is found).

    :raises UsageError: *api_key* given: AWS has no single API key.
    """
    if api_key is not None:
        raise UsageError(
            f"{owner}: a 'bedrock:' model signs its requests with AWS credentials, not an "
            "api_key: set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or a profile), or pass a "
            "RoutedModel with a BedrockAdapter over open_bedrock_client(...)"
        )

    async def open_adapter() -> tuple[ProviderAdapter, AdapterCloser]:
        import botocore.exceptions

        from ._adapter import BedrockAdapter
        from ._client import enter_bedrock_client

        url = base_url if base_url is not None else (os.environ.get(_URL) or None)
        try:
            client, close = await enter_bedrock_client(endpoint_url=url)
        except botocore.exceptions.NoCredentialsError:
            raise UsageError(
                f"{owner}: no AWS credentials for the Bedrock endpoint: set AWS_ACCESS_KEY_ID "
                f"and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), and {_URL} for another endpoint; "
                "in tests and examples, run inside juno_bind_trio.testing.fake_bedrock_env(...)"
            ) from None
        return BedrockAdapter(client), close

    return open_adapter
