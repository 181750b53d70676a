"""juno_bind_trio.transcript: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
