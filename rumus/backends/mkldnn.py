"""torch.backends.mkldnn's path: `is_available()` is False (RUMUS does not link mkldnn); flags set here are
kept and change nothing."""

enabled = False


def is_available() -> bool:
    """False: RUMUS does not use mkldnn."""
    return False
