"""The package's version, the one place it is written (pyproject.toml reads it from here), in a
module of its own so that the reports can name it without importing the package's top."""

__version__ = "0.1.0"
