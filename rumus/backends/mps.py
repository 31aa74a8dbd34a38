"""torch.backends.mps's path: Apple's Metal Performance Shaders are not a RUMUS backend (on a Mac, the
'wgpu' backend runs on Metal)."""


def is_available() -> bool:
    """False: MPS is not a RUMUS backend."""
    return False


def is_built() -> bool:
    """False: RUMUS is not built with MPS."""
    return False
