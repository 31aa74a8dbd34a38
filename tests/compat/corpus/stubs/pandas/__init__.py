"""Stand-in for pandas (d2l imports it at module top for data loaders the corpus does not use)."""
