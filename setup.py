"""Build of the optional native core (``replicator/binlog/_rowcore_c/``, one C file per job).

Everything else is declared in pyproject.toml. The extension is optional: when it cannot be
compiled (no C compiler), the install still succeeds and the pure-Python decoders are used.
"""

from setuptools import Extension, setup

SOURCES = "replicator/binlog/_rowcore_c"

setup(
    ext_modules=[
        Extension(
            "replicator.binlog._rowcore",
            sources=[
                f"{SOURCES}/{name}.c" for name in ("module", "rows", "framing", "runs", "text", "buffers")
            ],
            # rebuilt when a header changes; shipped in the sdist with the sources
            depends=[f"{SOURCES}/rowcore.h", f"{SOURCES}/formats.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
