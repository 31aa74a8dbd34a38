"""Stand-in: the corpus programs import this at module top for downloads they never make here."""


def resource(*args: object, **kwargs: object) -> object:
    raise RuntimeError("network access is not available in the corpus run")
