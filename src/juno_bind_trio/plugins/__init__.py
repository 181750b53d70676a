"""juno_bind_trio.plugins: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
