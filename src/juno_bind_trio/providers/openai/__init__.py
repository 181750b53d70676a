"""juno_bind_trio.providers.openai: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
