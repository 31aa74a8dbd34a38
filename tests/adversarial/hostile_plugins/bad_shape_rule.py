"""An op whose shape rule raises on the op's own samples."""

from rumus_contracts import OpRegistry, hookimpl

from ._common import schema


def broken_shape(shapes, attrs):  # type: ignore[no-untyped-def]
    return [shapes[0][5]]  # IndexError for every rank below 6


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(schema("bad_shape_op", shape=broken_shape))
