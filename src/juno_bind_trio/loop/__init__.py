"""juno_bind_trio.loop: see DESIGN (filled in by its issue)."""

__all__: list[str] = []
