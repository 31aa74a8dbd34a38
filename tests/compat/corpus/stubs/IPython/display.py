"""Stand-in for IPython.display."""

from typing import Any


def display(*args: Any, **kwargs: Any) -> None:
    pass


def clear_output(*args: Any, **kwargs: Any) -> None:
    pass
