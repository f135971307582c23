"""setup.py - installs the aicraft package and builds its compiled core via build_ffi.py.

The package also carries libac for C users: the public header (aicraft/include/ac.h)
and a static libac.a (aicraft/lib/) archived from the very objects the extension was
built from, so a C program or extension builds against an installed aicraft
(aicraft.get_include(), aicraft.get_lib()). The version is __version__ in
aicraft/__init__.py, read here and by the Makefile.
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "aicraft", "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.MULTILINE).group(1)


class build_ext_with_libac(build_ext):
    """build_ext, then libac.a from the extension's libac objects and ac.h, in the package
    (in build_lib; --inplace copies them to the source tree with the extension). With
    CUDA (build_ffi.NVCC), the .cu files are compiled by nvcc first and linked in, and
    libac.a carries CUDA's static runtime (its one object, cudart_static.o), so C programs
    link with get_lib()/libac.a -lm -lpthread and no CUDA install, CUDA build or not."""

    def build_extension(self, ext):
        sys.path.insert(0, ROOT)
        import build_ffi
        sys.path.pop(0)
        cuda_objects = []
        for source in build_ffi.cuda_sources():
            obj = os.path.join(self.build_temp, os.path.splitext(source)[0] + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            if self.force or not os.path.exists(obj) or os.path.getmtime(obj) < max(
                    os.path.getmtime(p) for p in [source] + ext.depends):
                subprocess.run(build_ffi.nvcc_command(source, obj), cwd=ROOT, check=True)
            cuda_objects.append(obj)
        ext.extra_objects = list(ext.extra_objects or []) + cuda_objects
        super().build_extension(ext)
        sources = [s for s in ext.sources if s.startswith("libac")]
        objects = self.compiler.object_filenames(sources, output_dir=self.build_temp)
        missing = [s for s, o in zip(sources, objects) if not os.path.exists(o)]
        if missing:   # the extension was up to date: its objects may be gone
            self.compiler.compile(missing, output_dir=self.build_temp, include_dirs=ext.include_dirs,
                                  macros=ext.define_macros, extra_postargs=ext.extra_compile_args)
        package_dir = os.path.dirname(self.get_ext_fullpath(ext.name))
        os.makedirs(os.path.join(package_dir, "lib"), exist_ok=True)
        os.makedirs(os.path.join(package_dir, "include"), exist_ok=True)
        if cuda_objects:
            subprocess.run(["ar", "x", os.path.join(build_ffi.CUDA_LIB_DIR, "libcudart_static.a"),
                            "cudart_static.o"], cwd=self.build_temp, check=True)
            cuda_objects.append(os.path.join(self.build_temp, "cudart_static.o"))
        self.compiler.create_static_lib(objects + cuda_objects, "ac", output_dir=os.path.join(package_dir, "lib"))
        shutil.copy(os.path.join(ROOT, "libac", "include", "ac.h"), os.path.join(package_dir, "include"))

    def copy_extensions_to_source(self):   # build_ext --inplace
        super().copy_extensions_to_source()
        for folder in ("include", "lib"):
            shutil.copytree(os.path.join(self.build_lib, "aicraft", folder),
                            os.path.join(ROOT, "aicraft", folder), dirs_exist_ok=True)


setup(
    name="aicraft",
    version=version(),
    description="A small, fast machine-learning library: a C99 core with a PyTorch-shaped Python API",
    long_description=open(os.path.join(ROOT, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["aicraft", "aicraft.*"]),
    package_data={"aicraft": ["py.typed"]},
    python_requires=">=3.8",
    install_requires=["numpy", "cffi>=1.15"],
    # pip install aicraft[mpi]: data-parallel training (aicraft.distributed) over MPI;
    # the mpich wheel brings mpiexec, libmpi and mpicc.
    # pip install aicraft[serve]: aicraft.serve and python -m aicraft.serve (docs/serving.md).
    extras_require={"mpi": ["mpi4py", "mpich"], "serve": ["gunicorn>=25.1", "orjson>=3.9"]},
    cffi_modules=["build_ffi.py:ffibuilder"],
    cmdclass={"build_ext": build_ext_with_libac},
    zip_safe=False,
)
