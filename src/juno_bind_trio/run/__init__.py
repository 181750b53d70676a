"""juno_bind_trio.run: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
