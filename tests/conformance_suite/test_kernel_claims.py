"""A kernel registered with dtypes=None claims only the dtypes its backend holds; packed dtypes only
when named. Named dtypes are claimed as named (the conformance suite then finds the untestable ones)."""

from __future__ import annotations

from rumus_contracts import KernelRegistry, bfloat16, fixed_i16, float16, float32, float64, q8


def _kernel(outputs, inputs, attrs):  # never called
    raise AssertionError


def test_dtypes_none_is_intersected_with_the_held_dtypes():
    reg = KernelRegistry()
    reg.register("op", "lean", _kernel, dtypes=None)
    held = (float32, float64)
    assert reg.claiming_entry("op", "lean", float32, held) is not None
    assert reg.claiming_entry("op", "lean", float16, held) is None  # the backend does not hold float16
    assert reg.claiming_entry("op", "lean", fixed_i16(3), held) is None  # packed: only when named
    assert reg.find_entry("op", "lean", fixed_i16(3)) is None  # and the dispatcher agrees
    assert reg.find_entry("op", "lean", float16) is not None  # a plain dtype never reaches an unheld backend


def test_named_dtypes_are_claimed_as_named():
    reg = KernelRegistry()
    reg.register("op", "lean", _kernel, dtypes=[float32, bfloat16, q8(32)])
    held = (float32,)
    assert reg.claiming_entry("op", "lean", bfloat16, held) is not None  # named: claimed, held or not
    assert reg.claiming_entry("op", "lean", q8(32), held) is not None
    assert reg.claiming_entry("op", "lean", float64, held) is None


def test_the_conformance_claims_use_the_backend_capabilities():
    from rumus import backend_api as api
    from rumus_conformance.harness import claims
    be = api.backend("cpu")
    held = set(be.capabilities(be.devices()[0]).dtypes)
    for claim in claims("cpu"):
        if claim.status == "claimed" and not claim.dtype.is_packed:
            assert claim.dtype in held, claim
