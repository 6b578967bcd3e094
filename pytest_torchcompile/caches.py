"""--compile-cache: a suite's compile caches in one directory, shared by xdist workers, kept by CI.

torch already keeps on disk what is slow to make: AOTAutograd's compiled forward and backward,
Inductor's FX graph cache (the generated code), the C++ kernels built from it and Triton's
kernels. The plugin only says where, through the environment variables torch reads when it
compiles, set in pytest_configure: before any test imports torch, and before pytest-xdist starts
its workers, which inherit them. Nothing here imports torch.

Dynamo's tracing is not cached (torch's Dynamo cache, `caching_precompile`, drops guards on
globals and closures and never calls the backend, which counts the graphs), so a warm run traces
again and counts the same graphs, breaks and recompiles. Automatic-dynamic profiles (Dynamo's
local PGO, active only with a job id) are kept off: a warm run would start from the shapes a
cold run found dynamic, and count fewer recompiles.

Precedence, for each variable: --compile-cache > the environment > ini compile_cache > torch's
own default; Triton's cache follows Inductor's unless TRITON_CACHE_DIR says otherwise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

INDUCTOR = "TORCHINDUCTOR_CACHE_DIR"
TRITON = "TRITON_CACHE_DIR"
LOCAL_PGO = "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO"
FLAG = "--compile-cache"
INI = "ini compile_cache"
# The caches whose hits and misses the summary reports: torch's counter names, less _hit/_miss.
COUNTED = {"AOTAutograd": "autograd_cache", "Inductor FX graphs": "fxgraph_cache"}


@dataclass(frozen=True)
class CachePlan:
    """Where this session's compile caches go, and the environment that sends them there."""

    directory: Path  # absolute
    source: str  # FLAG or INI
    environ: Mapping[str, str]  # the variables the session sets
    kept: Mapping[str, str]  # variables of the environment that win over the ini key's directory

    @property
    def used(self) -> Path:
        """The directory Inductor's caches go to: the plan's, or the environment's that won."""
        return Path(self.kept.get(INDUCTOR, self.directory))

    def describe(self) -> str:
        """`/ci/.compile-cache (--compile-cache)`, or where the environment won."""
        if INDUCTOR in self.kept:
            where = f"{self.kept[INDUCTOR]} ({INDUCTOR} from the environment, over {self.source})"
        else:
            where = f"{self.directory} ({self.source})"
        if TRITON in self.kept:
            where += f"; Triton's cache {self.kept[TRITON]} ({TRITON} from the environment)"
        return where


def plan(directory: Path, source: str, environ: Mapping[str, str]) -> CachePlan:
    """The environment for caches in `directory`. From the ini key, a variable the environment
    already sets to another directory is kept (a machine's own setting beats the project's);
    Triton's then stays beside Inductor's, as torch places it."""
    wanted = {INDUCTOR: str(directory), TRITON: str(directory / "triton")}
    kept = {}
    if source == INI:
        kept = {
            name: environ[name]
            for name in (INDUCTOR, TRITON)
            if environ.get(name, wanted[name]) != wanted[name]
        }
        if INDUCTOR in kept:
            del wanted[TRITON]
    chosen = {name: value for name, value in wanted.items() if name not in kept}
    return CachePlan(directory, source, {**chosen, LOCAL_PGO: "0"}, kept)


def apply(cache: CachePlan, environ: MutableMapping[str, str]) -> Callable[[], None]:
    """Set the plan's variables; returns what puts the previous values back. A Dynamo config
    loaded before (a conftest that compiled on import) has read its variables already, so its
    local PGO switch is set there too."""
    before = {name: environ.get(name) for name in cache.environ}
    environ.update(cache.environ)
    restore_pgo = _pgo_off_in_loaded_config()

    def restore() -> None:
        restore_pgo()
        for name, value in before.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value

    return restore


def _pgo_off_in_loaded_config() -> Callable[[], None]:
    if "torch" not in sys.modules:
        return lambda: None
    from pytest_torchcompile import _compat

    return _compat.local_pgo_off()


def use_counts() -> dict[str, int]:
    """This process's hits and misses of the caches in COUNTED (nothing compiled: none)."""
    if "torch" not in sys.modules:
        return {}
    from pytest_torchcompile import _compat

    return _compat.compile_cache_counts()


def add_counts(total: dict[str, int], counts: Mapping[str, int]) -> None:
    """Add one process's counts (an xdist worker's) to the session's."""
    for name, count in counts.items():
        total[name] = total.get(name, 0) + count


def summary(cache: CachePlan, counts: Mapping[str, int]) -> str:
    """The summary's line: where the caches were, their hits and misses, and what the
    directory holds now (what CI saves)."""
    uses = []
    for label, prefix in COUNTED.items():
        found = {kind: counts.get(f"{prefix}_{kind}", 0) for kind in ("hit", "miss", "bypass")}
        text = f"{label} {found['hit']} hits, {found['miss']} misses"
        uses.append(text + (f", {found['bypass']} bypassed" if found["bypass"] else ""))
    files, size = _contents(cache.used)
    return (
        f"compile cache: {cache.describe()}: {'; '.join(uses)}; "
        f"the directory holds {files} files, {size / 2**20:.1f} MiB"
    )


def _contents(directory: Path) -> tuple[int, int]:
    """Files under `directory` and their total size in bytes."""
    files = size = 0
    for root, _, names in os.walk(directory):
        for name in names:
            try:
                size += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:  # removed meanwhile (a temporary file)
                continue
            files += 1
    return files, size
