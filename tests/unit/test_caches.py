"""--compile-cache's plan: which directory each of torch's cache variables gets, and from where."""

from __future__ import annotations

from pathlib import Path

from pytest_torchcompile.caches import (
    FLAG,
    INDUCTOR,
    INI,
    LOCAL_PGO,
    TRITON,
    add_counts,
    apply,
    plan,
    summary,
)

DIR = Path("/ci/.compile-cache")


def test_the_directory_holds_inductor_and_triton_and_local_pgo_is_off() -> None:
    cache = plan(DIR, FLAG, {})
    assert cache.environ == {INDUCTOR: str(DIR), TRITON: str(DIR / "triton"), LOCAL_PGO: "0"}
    assert cache.used == DIR and not cache.kept
    assert cache.describe() == f"{DIR} (--compile-cache)"


def test_the_option_replaces_the_environments_directories() -> None:
    cache = plan(DIR, FLAG, {INDUCTOR: "/mine", TRITON: "/mine/triton"})
    assert cache.environ[INDUCTOR] == str(DIR) and cache.environ[TRITON] == str(DIR / "triton")
    assert cache.used == DIR


def test_the_environment_wins_over_the_ini_key_and_triton_stays_beside_inductor() -> None:
    cache = plan(DIR, INI, {INDUCTOR: "/mine"})
    assert cache.environ == {LOCAL_PGO: "0"}
    assert cache.used == Path("/mine")
    assert cache.describe() == f"/mine ({INDUCTOR} from the environment, over ini compile_cache)"


def test_a_triton_directory_of_the_environment_wins_over_the_ini_key_alone() -> None:
    cache = plan(DIR, INI, {TRITON: "/triton"})
    assert cache.environ == {INDUCTOR: str(DIR), LOCAL_PGO: "0"}
    assert cache.describe() == (
        f"{DIR} (ini compile_cache); Triton's cache /triton ({TRITON} from the environment)"
    )


def test_an_xdist_worker_inherits_the_controllers_directory_as_its_own() -> None:
    controller = plan(DIR, INI, {})
    worker = plan(DIR, INI, dict(controller.environ))
    assert worker == controller


def test_apply_sets_the_variables_and_puts_the_previous_ones_back() -> None:
    environ = {INDUCTOR: "/mine", "OTHER": "x"}
    restore = apply(plan(DIR, FLAG, environ), environ)
    assert environ[INDUCTOR] == str(DIR) and environ[LOCAL_PGO] == "0"
    restore()
    assert environ == {INDUCTOR: "/mine", "OTHER": "x"}


def test_the_summary_counts_hits_misses_and_what_the_directory_holds(tmp_path: Path) -> None:
    (tmp_path / "fxgraph").mkdir()
    (tmp_path / "fxgraph" / "entry").write_bytes(b"x" * 2**20)
    (tmp_path / "kernel.so").write_bytes(b"y" * 2**19)
    counts: dict[str, int] = {}
    add_counts(counts, {"autograd_cache_hit": 2, "fxgraph_cache_hit": 4})
    add_counts(counts, {"autograd_cache_hit": 1, "autograd_cache_miss": 1})
    add_counts(counts, {"fxgraph_cache_bypass": 1})
    assert summary(plan(tmp_path, FLAG, {}), counts) == (
        f"compile cache: {tmp_path} (--compile-cache): AOTAutograd 3 hits, 1 misses; "
        "Inductor FX graphs 4 hits, 0 misses, 1 bypassed; the directory holds 2 files, 1.5 MiB"
    )
