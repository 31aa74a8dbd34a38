"""Stand-in for botocore (imported for its exception class only)."""
