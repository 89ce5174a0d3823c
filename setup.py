"""Build script for seglog's Cython extensions (metadata lives in pyproject.toml).

Each ``src/_native/<name>.pyx`` becomes ``seglog._native.<name>``; its ``.pxd`` (what other
native modules cimport from it) is ``src/seglog/_native/<name>.pxd``, beside the built module,
because Cython finds a module's .pxd by the module's qualified name: with ``src`` on the
cimport path, ``from seglog._native.index cimport offset_lookup`` links segment to index.
Header-only helpers (``_bigendian.pxd``, ``varint.pxd``, ``_records.pxd``) stay in src/_native
and are cimported by file name. ``SEGLOG_DEBUG=1`` builds
with Cython annotations (HTML beside each .pyx), line tracing and ``-Wall -Wextra``.
``SEGLOG_ONLY=a,b`` builds only the named modules (for working on one module at a time).
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE_MODULES = ["_crc32c", "codec", "index", "segment", "keymap", "accumulator", "wire"]
DEBUG = os.environ.get("SEGLOG_DEBUG", "") not in ("", "0")
ONLY = [name for name in os.environ.get("SEGLOG_ONLY", "").split(",") if name]

compile_args = ["-O3", "-fno-strict-aliasing"]
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
directives = {"language_level": 3, "embedsignature": True}
if DEBUG:
    compile_args = ["-O1", "-g", "-Wall", "-Wextra", "-Wno-unused-function"]
    macros.append(("CYTHON_TRACE_NOGIL", "1"))
    directives.update(linetrace=True, binding=True)

extensions = [
    Extension(
        f"seglog._native.{name}",
        [f"src/_native/{name}.pyx"],
        include_dirs=["src/_native", numpy.get_include()],
        extra_compile_args=compile_args,
        define_macros=macros,
    )
    for name in NATIVE_MODULES
    if os.path.exists(f"src/_native/{name}.pyx") and (not ONLY or name in ONLY)
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        annotate=DEBUG,
        # "src" first: seglog/_native/<name>.pxd, each module's own and cimported .pxd.
        include_path=["src", "src/_native"],
    ),
)
