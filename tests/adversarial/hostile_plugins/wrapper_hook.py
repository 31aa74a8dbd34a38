"""Declares its hook as a wrapper, to run around (and after) everyone else's registrations."""

from rumus_contracts import hookimpl


@hookimpl(wrapper=True)
def rumus_register_ops(registry):  # type: ignore[no-untyped-def]
    yield
