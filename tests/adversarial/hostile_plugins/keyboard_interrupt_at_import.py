"""Raises KeyboardInterrupt at import: deliberately NOT contained (see rumus_contracts.plugins)."""

raise KeyboardInterrupt
