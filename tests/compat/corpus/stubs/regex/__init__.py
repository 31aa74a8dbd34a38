"""Stand-in for the `regex` package: the standard `re` serves what the tokenizers import it for."""

from re import *  # noqa: F403
