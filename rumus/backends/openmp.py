"""torch.backends.openmp's path: `is_available()` is False (RUMUS does not link openmp); flags set here are
kept and change nothing."""

enabled = False


def is_available() -> bool:
    """False: RUMUS does not use openmp."""
    return False
