"""Hostile plugin packages: each module is a plugin that breaks one rule of the plugin contract.

tests/adversarial/test_plugins_hostile.py loads them next to the core and the built-in backends
with `rumus.backend_api.load_fresh([Candidate(name, "hostile_plugins.<module>", False)])`, the same
containment and validation path an entry point goes through.
"""
