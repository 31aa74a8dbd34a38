"""torch.backends.opt_einsum's path: `is_available()` is False (RUMUS does not link opt_einsum); flags set here are
kept and change nothing."""

enabled = False


def is_available() -> bool:
    """False: RUMUS does not use opt_einsum."""
    return False
