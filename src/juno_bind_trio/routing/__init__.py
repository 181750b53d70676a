"""juno_bind_trio.routing: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
