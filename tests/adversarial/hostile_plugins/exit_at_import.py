"""Calls sys.exit() while being imported: must not end the process."""

import sys

sys.exit(3)
