"""Stand-in for matplotlib_inline.backend_inline."""

from typing import Any


def set_matplotlib_formats(*args: Any, **kwargs: Any) -> None:
    pass
