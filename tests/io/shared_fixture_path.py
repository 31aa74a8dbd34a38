"""Where the shared canonical fixture lives (beside the checkout in the workspace, else /work/shared)."""

import os

CANONICAL = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "canonical_fixed_mlp.json")
if not os.path.exists(CANONICAL):
    CANONICAL = "/work/shared/fixtures/canonical_fixed_mlp.json"
