"""setup.py - installs the aicraft package and builds its compiled core via build_ffi.py."""
from setuptools import find_packages, setup

setup(
    name="aicraft",
    version="0.1.0",
    description="A small, fast machine-learning library: a C99 core with a PyTorch-shaped Python API",
    packages=find_packages(include=["aicraft", "aicraft.*"]),
    python_requires=">=3.8",
    install_requires=["numpy", "cffi>=1.15"],
    cffi_modules=["build_ffi.py:ffibuilder"],
    zip_safe=False,
)
