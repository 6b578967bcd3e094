"""``python -m pytest_torchcompile``: merging the reports of a sharded run (see cli.py)."""

from __future__ import annotations

from pytest_torchcompile.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
