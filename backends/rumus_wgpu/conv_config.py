"""The uniform of every wgpu conv and pooling kernel (shaders/conv_config.wgsl): one field list for im2col /
col2im, the implicit GEMMs, the weight-gradient split sum and the pooling kernels, so the window geometry is
declared and packed once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# shaders/conv_config.wgsl's fields after (n, gx) and the geometry, in order
CONFIG_FIELDS = ("o", "og", "cg", "kg", "m", "kred", "out_ch", "out_h", "out_w", "rows", "chunk", "splits", "tiles",
                 "g0", "a_off", "b_off", "out_off", "sn", "sr", "include_pad", "divisor", "ninf")


def window_words(geo: Sequence[int], **fields: int) -> list[int]:
    """The uniform after (n, gx): the window geometry `geo` (c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo),
    then `fields` (any field not given is 0)."""
    unknown = set(fields) - set(CONFIG_FIELDS)
    if unknown:
        raise KeyError(f"conv_config.wgsl has no field {sorted(unknown)[0]!r}")
    return [*geo, *(int(fields.get(f, 0)) for f in CONFIG_FIELDS)]


def config_words(cv: Any, **fields: int) -> list[int]:
    """window_words of a convolution `cv` (nn_conv._Conv): o, og, cg, kg from cv unless given."""
    return window_words(cv.geo, **{"o": cv.o, "og": cv.og, "cg": cv.k // (cv.kh * cv.kw), "kg": cv.k, **fields})
