"""Adapters from a model provider's SDK to routing and the loop (``providers.openai``)."""

__all__: list[str] = []
