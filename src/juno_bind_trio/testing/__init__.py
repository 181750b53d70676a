"""juno_bind_trio.testing: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
