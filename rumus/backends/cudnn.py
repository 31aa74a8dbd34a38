"""torch.backends.cudnn's path: `cudnn.benchmark = True` and friends are accepted and change nothing
(RUMUS does not use cuDNN; its convolutions are deterministic)."""

benchmark = False
deterministic = False
enabled = True
allow_tf32 = True


def is_available() -> bool:
    """False: cuDNN is not used by RUMUS."""
    return False


def version() -> None:
    """None, as torch answers without cuDNN."""
    return None
