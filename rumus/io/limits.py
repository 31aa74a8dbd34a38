"""The bounds every RUMUS loader checks before it allocates (one place, so errors can name them).

They are module attributes on purpose: a user who trusts a file that needs more can raise one, e.g.
`rumus.io.limits.MAX_INFLATED_BYTES = 8 << 30`, and every loader reads the current value.
"""

from __future__ import annotations

# Bytes that compressed zip entries of one file may inflate to, all entries together. torch.save and
# rumus.save store their entries uncompressed (their size is then bounded by the file itself), so only
# a re-zipped or hostile file ever meets this bound.
MAX_INFLATED_BYTES = 256 << 20

# Bytes of one metadata entry: a checkpoint's pickle (`data.pkl`) or object tree (`tree.json`).
MAX_METADATA_BYTES = 256 << 20

# Elements of a tensor view that reads some storage elements more than once (a stride-0 expand saved by
# torch.save): such a view is kept as a view, never copied, but its element count is still bounded so a
# 494-byte file cannot hand back a tensor that takes hours to sum.
MAX_VIEW_ELEMENTS = 1 << 32

# Ranks of tensors in any file.
MAX_RANK = 64

# Python nesting of a rumus.save object tree (dicts in lists in dicts ...), on save and on load.
MAX_TREE_DEPTH = 64

# Bytes of one integer in a pickle (LONG4) and digits of one integer in a tree.json.
MAX_INT_BYTES = 1024
MAX_INT_DIGITS = 4300  # CPython's own int <-> str limit
