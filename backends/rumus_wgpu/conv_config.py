"""The uniform of every wgpu conv kernel (shaders/conv_config.wgsl): one field list for im2col / col2im,
the implicit GEMMs and the weight-gradient split sum, so the geometry is declared and packed once."""

from __future__ import annotations

from typing import Any

# shaders/conv_config.wgsl's fields after (n, gx) and the geometry, in order
CONFIG_FIELDS = ("o", "og", "cg", "kg", "m", "kred", "out_ch", "out_h", "out_w", "rows", "chunk", "splits", "tiles",
                 "g0", "a_off", "b_off", "out_off", "sn", "sr")


def config_words(cv: Any, **fields: int) -> list[int]:
    """The uniform after (n, gx): the geometry of `cv` (nn_conv._Conv), then `fields` (o, og, cg, kg
    from cv unless given; any other field not given is 0)."""
    given = {"o": cv.o, "og": cv.og, "cg": cv.k // (cv.kh * cv.kw), "kg": cv.k, **fields}
    unknown = set(given) - set(CONFIG_FIELDS)
    if unknown:
        raise KeyError(f"conv_config.wgsl has no field {sorted(unknown)[0]!r}")
    return [*cv.geo, *(int(given.get(f, 0)) for f in CONFIG_FIELDS)]
