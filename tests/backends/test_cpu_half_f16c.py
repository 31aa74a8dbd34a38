"""csrc/internal/half.h's two float16 paths give the same bits: the portable one (what the default build
uses) against the F16C instructions (what a build for F16C machines uses), on every float16 and on the
float32 values around every rounding boundary. Compiled here with the system C compiler; skipped where
there is none or the CPU lacks F16C."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

CSRC = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "csrc")

PROGRAM = r"""
#include <stdio.h>
#include <immintrin.h>
#include "internal/half.h"
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) { return (uint16_t)_cvtss_sh(f, 0); }
int main(void) {
    long bad = 0, checked = 0;
    for (uint32_t h = 0; h < 65536; h++, checked++)
        bad += rumus_f32_bits(rumus_h2f_soft((uint16_t)h)) != rumus_f32_bits(hw_h2f((uint16_t)h));
    /* float32 values at and next to every float16 rounding boundary of the normal range (low 13 bits),
       a stride through all of them, and a dense stride through the subnormal range (both signs) */
    static const uint32_t near[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff};
    for (uint32_t top = 0; top < (1u << 19); top++)
        for (int j = 0; j < 6; j++, checked++) {
            const float f = rumus_f32_from_bits((top << 13) | near[j]);
            bad += rumus_f2h_soft(f) != hw_f2h(f);
        }
    for (uint64_t x = 0; x < 0x100000000ull; x += 4093, checked++) {
        const float f = rumus_f32_from_bits((uint32_t)x);
        bad += rumus_f2h_soft(f) != hw_f2h(f);
    }
    for (uint32_t x = 0x33000000u; x < 0x38800000u; x += 7, checked += 2) {
        bad += rumus_f2h_soft(rumus_f32_from_bits(x)) != hw_f2h(rumus_f32_from_bits(x));
        bad += rumus_f2h_soft(rumus_f32_from_bits(x | 0x80000000u)) != hw_f2h(rumus_f32_from_bits(x | 0x80000000u));
    }
    printf("%ld %ld\n", bad, checked);
    return 0;
}
"""


def _has_f16c() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " f16c" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(shutil.which("cc") is None or not _has_f16c(), reason="needs a C compiler and an F16C CPU")
def test_portable_float16_conversions_match_f16c(tmp_path: os.PathLike[str]) -> None:
    src, exe = os.path.join(tmp_path, "f16c.c"), os.path.join(tmp_path, "f16c")
    with open(src, "w") as f:
        f.write(PROGRAM)
    subprocess.run(["cc", "-O2", "-std=c11", "-I", CSRC, src, "-o", exe, "-lm"], check=True, timeout=120)
    out = subprocess.run([exe], check=True, capture_output=True, text=True, timeout=300).stdout.split()
    bad, checked = int(out[0]), int(out[1])
    assert checked > 4_000_000 and bad == 0, f"{bad} of {checked} conversions differ"
