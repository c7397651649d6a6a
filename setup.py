"""Build of the optional native row decoders (``replicator/binlog/_rowcore.c``).

Everything else is declared in pyproject.toml. The extension is optional: when it cannot be
compiled (no C compiler), the install still succeeds and the pure-Python decoders are used.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "replicator.binlog._rowcore",
            sources=["replicator/binlog/_rowcore.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
