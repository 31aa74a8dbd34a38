"""Only here for cffi: `cffi_modules` compiles the C kernels in csrc/ at install time."""

from setuptools import setup

setup(cffi_modules=["csrc/build_cpu_kernels.py:ffibuilder"])
