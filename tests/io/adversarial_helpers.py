"""Paths shared by the io tests."""

import os

CANONICAL = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "canonical_fixed_mlp.json")
if not os.path.exists(CANONICAL):
    CANONICAL = "/work/shared/fixtures/canonical_fixed_mlp.json"
