"""Only here for what pyproject.toml cannot say: cffi compiles csrc/ into rumus_vision._kernels at build time."""

from setuptools import setup

setup(cffi_modules=["csrc/build_vision_kernels.py:ffibuilder"])
