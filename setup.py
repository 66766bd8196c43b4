"""Build the compiled hot path of tracker_core.

Set TRACKER_NO_EXTENSIONS=1 to build no extension: the pure-Python twins then take over.
"""

import os

from setuptools import setup

COMPILED_MODULES = ["_protocol_c", "_bloom_c", "_classify_c"]


def extensions():
    if os.environ.get("TRACKER_NO_EXTENSIONS") == "1":
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    modules = [
        Extension(
            f"tracker_core.compiled.{name}",
            [f"src/tracker_core/compiled/{name}.pyx"],
            extra_compile_args=["-O3"],
        )
        for name in COMPILED_MODULES
    ]
    return cythonize(
        modules,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )


setup(ext_modules=extensions())
