"""Stand-in: the corpus programs import requests at module top for downloads they never make here."""

from typing import Any


def get(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("network access is not available in the corpus run")


head = get
