"""The zoo's test suites, written as a user of pytest-torchcompile would write them.

Makes ``zoo.models`` (benchmarks/) and the planted backends (tests/planted.py, for
``--compile-backend=planted:NAME``) importable, and registers the Hypothesis profile the zoo
runner uses: as many examples per property test as baseline B gets, no example database, and
no shrinking (as for B: the first failing example decides; shrinking would only cost time).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import Phase, settings

_REPO = Path(__file__).resolve().parents[3]
for path in (_REPO / "benchmarks", _REPO / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from zoo import EXAMPLES  # noqa: E402 (importable only once the path is set)

settings.register_profile(
    "zoo", max_examples=EXAMPLES, database=None, phases=(Phase.explicit, Phase.generate)
)
