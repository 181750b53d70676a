"""juno_bind_trio.schema: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
