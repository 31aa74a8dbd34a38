"""Only here for what pyproject.toml cannot say: `cffi_modules` compiles csrc/ into the wheel."""

from setuptools import setup

setup(cffi_modules=["csrc/build_graph_kernels.py:ffibuilder"])
