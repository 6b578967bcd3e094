"""Build the third-party corpus that `corpus.py` runs, from the manifests in `benchmarks/corpus/`.

Each manifest (`benchmarks/corpus/<name>.json`) names a library's release, where its tests come
from and the slice of them that runs:

    {"name": "zuko", "version": "1.6.0",
     "install": ["zuko==1.6.0"],                      # pip requirements besides torch, pinned
     "source": {"sdist": "zuko==1.6.0"},              # or {"github": "owner/repo", "ref": "tag"}
     "copy": ["tests"],                               # paths of the source tree the suite needs
     "tests": ["tests"], "pytest_args": ["-p", "no:xdist"],
     "env": {}, "parity_functions": "zuko",           # or null
     "why": "one line: what in it breaks checkers"}

For each, `<corpus>/<name>/` gets a virtual environment (`venv/`, made with
`--system-site-packages` and installed with the constraint `torch==<the installed torch>`, so pip
never brings another torch), the `copy` paths of the source tree (an sdist unpacked, or
`git archive <ref>` of a repository snapshot under `--mirror`: `<mirror>/<owner>+<repo>/repo`)
and `suite.json`, corpus.py's description of the suite (absolute `python` and `cwd`). What is
built is kept (a stamp per step) unless `--rebuild`; a changed manifest rebuilds its steps.

    python benchmarks/corpus_setup.py --corpus /work/corpus --mirror /work/.mirror
    python benchmarks/corpus_setup.py --corpus /work/corpus --only einops zuko --rebuild
    python benchmarks/corpus.py --corpus /work/corpus --out /tmp/c --backend none --only einops

`--gpu-bundle DIR` writes instead what a GPU host with Python 3.12 and no network needs:
`DIR/whl/` (Python 3.12 wheels of each suite's `install` and their dependencies, less what such a
host already has: torch, triton, nvidia-*, numpy and torch's other dependencies), `DIR/suites/
<name>/` (the copied paths), `DIR/suite-<name>.json` (corpus.py's format, `"python": "python3"`,
`cwd` relative to the repository root: `.corpus/gpu/suites/<name>` where DIR is `.corpus/gpu`),
`DIR/requirements.txt` and `DIR/install.sh`, which installs the wheels there with no index:

    python benchmarks/corpus_setup.py --gpu-bundle .corpus/gpu --only einops kornia
    bash .corpus/gpu/install.sh   # on the GPU host, from the repository root
    mkdir -p .corpus/gpu/c && for f in .corpus/gpu/suite-*.json; do n=${f##*suite-}; \\
        mkdir -p .corpus/gpu/c/${n%.json} && cp $f .corpus/gpu/c/${n%.json}/suite.json; done
    python3 benchmarks/corpus.py --corpus .corpus/gpu/c --out /tmp/c --backend inductor

A github source missing from `--mirror` stops that suite with a message naming what to fetch.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE / "corpus"
KEYS = {
    "name",
    "version",
    "install",
    "source",
    "copy",
    "tests",
    "pytest_args",
    "env",
    "parity_functions",
    "why",
}
# What the GPU host already has (torch and what comes with it): never bundled.
HOST_HAS = {
    "torch",
    "triton",
    "numpy",
    "sympy",
    "networkx",
    "jinja2",
    "filelock",
    "fsspec",
    "typing-extensions",
    "mpmath",
    "markupsafe",
    "setuptools",
}
# The environment Requires-Dist markers are judged in for the GPU host.
GPU_MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}


class SetupError(Exception):
    """A suite that cannot be built, with the reason to show."""


def _log(message: str) -> None:
    print(message, flush=True)


def _run(command: list[str], **kwargs: Any) -> None:
    _log("  $ " + " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise SetupError(f"{command[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def load_manifests(folder: Path, only: list[str] | None) -> list[dict[str, Any]]:
    """The manifests in `folder` (those named by `only`, if given), their keys checked."""
    manifests = []
    for path in sorted(folder.glob("*.json")):
        manifest = json.loads(path.read_text())
        if set(manifest) != KEYS:
            raise SystemExit(f"{path}: keys must be exactly {sorted(KEYS)}")
        if not only or manifest["name"] in only:
            manifests.append(manifest)
    missing = set(only or []) - {manifest["name"] for manifest in manifests}
    if missing:
        raise SystemExit(f"no manifest in {folder} for {', '.join(sorted(missing))}")
    return manifests


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _torch_version() -> str:
    return importlib.metadata.version("torch")


def _mirror_git_dir(mirror: Path, repo: str) -> Path:
    """The git directory of `repo`'s snapshot under `mirror`, or a SetupError saying how to get it."""
    folder = mirror / repo.replace("/", "+")
    for candidate in (folder / "repo" / ".git", folder / "repo", folder):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    raise SetupError(
        f"no snapshot of github:{repo} under {mirror}: fetch it with the agent's fetch tool "
        f"(source github:{repo}, it lands in {folder}/repo), or `git clone --bare "
        f"https://github.com/{repo} {folder}/repo`, then run this again"
    )


def _unpack_sdist(requirement: str, into: Path) -> Path:
    """Download `requirement`'s sdist into `into` and unpack it; the unpacked tree's root."""
    download = into / "download"
    download.mkdir(parents=True, exist_ok=True)
    _run(
        [
            *(sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"),
            *("--dest", str(download), requirement),
        ]
    )
    archives = sorted(download.iterdir())
    if len(archives) != 1:
        raise SetupError(f"expected one sdist for {requirement}, got {archives}")
    tree = into / "tree"
    tree.mkdir()
    if archives[0].suffix == ".zip":
        with zipfile.ZipFile(archives[0]) as archive:
            archive.extractall(tree)
    else:
        with tarfile.open(archives[0]) as archive:
            archive.extractall(tree, filter="data")
    roots = list(tree.iterdir())
    return roots[0] if len(roots) == 1 and roots[0].is_dir() else tree


def _present_files(git_dir: Path, ref: str, paths: list[str]) -> list[str]:
    """The files under `paths` at `ref` whose blobs the snapshot holds (the rest are named)."""
    listed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", ref, "--", *paths],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    entries = [entry.split("\t", 1) for entry in listed.split("\0") if entry]
    blobs = [(info.split()[2], path) for info, path in entries if info.split()[1] == "blob"]
    checked = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-check"],
        input="".join(f"{sha}\n" for sha, _ in blobs),
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    present = [
        path
        for (_, path), line in zip(blobs, checked, strict=True)
        if not line.endswith(" missing")
    ]
    missing = sorted({path for _, path in blobs} - set(present))
    if missing:
        _log(f"  the snapshot lacks {len(missing)} file(s), left out: {', '.join(missing[:5])}")
    if not present:
        raise SetupError(f"nothing of {paths} at {ref} in {git_dir}")
    return present


def _unpack_github(source: dict[str, str], paths: list[str], mirror: Path, into: Path) -> Path:
    """`git archive` `paths` at the source's ref from the mirror into `into`; the tree's root.

    Only the paths: a snapshot may lack its largest files (images, data) elsewhere in the tree.
    """
    git_dir = _mirror_git_dir(mirror, source["github"])
    ref = source["ref"]
    found = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode:
        raise SetupError(
            f"the snapshot {git_dir} has no ref {ref!r}: fetch github:{source['github']} again "
            f"with the agent's fetch tool (or `git -C {git_dir} fetch origin tag {ref}`)"
        )
    present = _present_files(git_dir, ref, paths)
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", ref, "--", *present],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None and archive.stderr is not None
    try:
        with tarfile.open(fileobj=archive.stdout, mode="r|") as stream:
            stream.extractall(tree, filter="data")
    except tarfile.TarError as error:
        archive.kill()
        raise SetupError(f"git archive {ref} of {git_dir} broke off ({error})") from error
    finally:
        archive.wait()
    if archive.returncode:
        message = archive.stderr.read().decode()
        raise SetupError(f"git archive {ref} -- {' '.join(paths)} of {git_dir} failed: {message}")
    return tree


def copy_sources(manifest: dict[str, Any], mirror: Path, dest: Path) -> None:
    """Put the manifest's `copy` paths of its source tree into `dest` (replacing them there)."""
    source = manifest["source"]
    with tempfile.TemporaryDirectory(prefix=f"corpus-{manifest['name']}-") as scratch:
        if "sdist" in source:
            root = _unpack_sdist(source["sdist"], Path(scratch))
        elif "github" in source:
            root = _unpack_github(source, manifest["copy"], mirror, Path(scratch))
        else:
            raise SetupError(f"source must be sdist or github, not {source}")
        dest.mkdir(parents=True, exist_ok=True)
        for relative in manifest["copy"]:
            origin, target = root / relative, dest / relative
            if not origin.exists():
                raise SetupError(f"{relative} is not in {manifest['name']}'s source {source}")
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_dir():
                shutil.copytree(origin, target, symlinks=True)
            else:
                shutil.copy2(origin, target)


def _stamp_ok(stamp: Path, value: Any) -> bool:
    return stamp.is_file() and stamp.read_text() == _digest(value)


def build_suite(manifest: dict[str, Any], corpus: Path, mirror: Path, rebuild: bool) -> Path:
    """Build `<corpus>/<name>/` (venv, copied paths, suite.json); its suite.json."""
    folder = (corpus / manifest["name"]).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    torch = _torch_version()
    venv = folder / "venv"
    python = venv / "bin" / "python"
    venv_key = {"install": manifest["install"], "torch": torch, "python": sys.version}
    venv_stamp = folder / ".venv.stamp"
    if rebuild or not _stamp_ok(venv_stamp, venv_key) or not python.exists():
        _log(f"{manifest['name']}: venv")
        venv_stamp.unlink(missing_ok=True)
        if venv.exists():
            shutil.rmtree(venv)
        _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
        constraints = folder / "constraints.txt"
        constraints.write_text(f"torch=={torch}\n")
        if manifest["install"]:
            _run(
                [
                    *(str(python), "-m", "pip", "install", "--disable-pip-version-check"),
                    *("-c", str(constraints), *manifest["install"]),
                ]
            )
        if subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode:
            raise SetupError(f"{manifest['name']}: the venv cannot import torch")
        venv_stamp.write_text(_digest(venv_key))
    source_key = {"source": manifest["source"], "copy": manifest["copy"]}
    source_stamp = folder / ".source.stamp"
    if rebuild or not _stamp_ok(source_stamp, source_key):
        _log(f"{manifest['name']}: sources {manifest['source']}")
        source_stamp.unlink(missing_ok=True)
        copy_sources(manifest, mirror, folder)
        source_stamp.write_text(_digest(source_key))
    suite = folder / "suite.json"
    suite.write_text(json.dumps(_suite(manifest, str(python), str(folder)), indent=1) + "\n")
    return suite


def _suite(manifest: dict[str, Any], python: str, cwd: str) -> dict[str, Any]:
    return {
        "name": manifest["name"],
        "version": manifest["version"],
        "python": python,
        "cwd": cwd,
        "tests": manifest["tests"],
        "pytest_args": manifest["pytest_args"],
        "env": manifest["env"],
        "parity_functions": manifest["parity_functions"],
    }


def _host_has(name: str) -> bool:
    name = canonicalize_name(name)
    return name in HOST_HAS or name.startswith("nvidia-")


def _wheel_requirements(wheel: Path) -> list[Requirement]:
    """The Requires-Dist of `wheel` that apply on the GPU host (no extras)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    requirements = []
    for line in email.parser.HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(GPU_MARKERS):
            requirements.append(requirement)
    return requirements


def _wheel_name(wheel: Path) -> str:
    return canonicalize_name(wheel.name.split("-")[0])


def _wheels(whl: Path, requirement: Requirement) -> list[Path]:
    """The wheels in `whl` that meet `requirement`."""
    name = canonicalize_name(requirement.name)
    return [
        wheel
        for wheel in whl.glob("*.whl")
        if _wheel_name(wheel) == name
        and requirement.specifier.contains(wheel.name.split("-")[1], prereleases=True)
    ]


def download_wheels(requirements: list[str], whl: Path) -> list[str]:
    """Python 3.12 wheels of `requirements` and their dependencies, less what the host has.

    Dependencies are walked here, one `pip download --no-deps` each (pip's own resolver would
    download torch and the CUDA wheels it needs); the first requirement met for a name wins.
    Returns the problems (a requirement with no wheel).
    """
    whl.mkdir(parents=True, exist_ok=True)
    queue = [Requirement(requirement) for requirement in requirements]
    done: set[str] = set()
    problems = []
    while queue:
        requirement = queue.pop(0)
        name = canonicalize_name(requirement.name)
        if name in done or _host_has(name):
            continue
        done.add(name)
        have = _wheels(whl, requirement)
        if not have:
            for other in whl.glob("*.whl"):  # another version, met first as a dependency
                if _wheel_name(other) == name:
                    other.unlink()
            spec = f"{requirement.name}{requirement.specifier}"
            command = [
                *(sys.executable, "-m", "pip", "download", "--disable-pip-version-check"),
                *("--no-deps", "--only-binary", ":all:", "--python-version", "3.12"),
                *("--implementation", "cp", "--platform", "manylinux_2_28_x86_64"),
                *("--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64"),
                *("--dest", str(whl), spec),
            ]
            try:
                _run(command)
            except SetupError as error:
                # Some pure-Python packages publish only an sdist (dtcwt, torch-harmonics): a
                # wheel built here serves the host's Python too if it is tagged none-any.
                if not _pure_wheel_from_sdist(spec, whl):
                    problems.append(f"{spec}: {str(error).splitlines()[-1]}")
                    continue
            have = _wheels(whl, requirement)
        for wheel in have:
            queue += _wheel_requirements(wheel)
    return problems


def _pure_wheel_from_sdist(spec: str, whl: Path) -> bool:
    """Build `spec`'s wheel from its sdist into `whl`; True only if it is pure Python."""
    with tempfile.TemporaryDirectory() as built:
        try:
            _run(
                [
                    *(sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check"),
                    *("--no-deps", "--no-binary", ":all:", "--wheel-dir", built, spec),
                ]
            )
        except SetupError:
            return False
        wheels = list(Path(built).glob("*-none-any.whl"))
        for wheel in wheels:
            shutil.move(str(wheel), whl / wheel.name)
        return bool(wheels)


INSTALL_SH = """#!/bin/bash
# Installs the bundled wheels with no index; torch and its dependencies are the host's own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install --no-index --find-links "$here/whl" -r "$here/requirements.txt" "$@"
"""


def build_bundle(manifests: list[dict[str, Any]], bundle: Path, mirror: Path) -> int:
    """Write the GPU bundle (wheels, suites, suite-<name>.json, install.sh); 1 if a suite failed."""
    bundle.mkdir(parents=True, exist_ok=True)
    whl = bundle / "whl"
    relative = _relative_to_repo(bundle)
    status = 0
    installed = []
    for manifest in manifests:
        name = manifest["name"]
        _log(f"{name}: bundle")
        try:
            problems = download_wheels(manifest["install"], whl)
            if problems:
                raise SetupError("no py3.12 wheel for " + "; ".join(problems))
            copy_sources(manifest, mirror, bundle / "suites" / name)
        except SetupError as error:
            _log(f"{name}: NOT BUNDLED: {error}")
            status = 1
            continue
        installed += manifest["install"]
        suite = _suite(manifest, "python3", f"{relative}/suites/{name}")
        (bundle / f"suite-{name}.json").write_text(json.dumps(suite, indent=1) + "\n")
    old = (
        (bundle / "requirements.txt").read_text().split()
        if (bundle / "requirements.txt").exists()
        else []
    )
    requirements = sorted(set(old) | set(installed))
    (bundle / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (bundle / "install.sh").write_text(INSTALL_SH)
    (bundle / "install.sh").chmod(0o755)
    return status


def _relative_to_repo(bundle: Path) -> str:
    """`bundle` relative to this repository's root (as given, where it lies outside)."""
    try:
        return str(bundle.resolve().relative_to(HERE.parent))
    except ValueError:
        return str(bundle)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="the folder of suite folders to build")
    parser.add_argument("--mirror", default="/work/.mirror", help="repository snapshots")
    parser.add_argument("--manifests", default=str(MANIFESTS), help="the manifests' folder")
    parser.add_argument("--only", nargs="*", help="these suites (their names) alone")
    parser.add_argument("--rebuild", action="store_true", help="rebuild what is built already")
    parser.add_argument("--gpu-bundle", help="write the GPU host's bundle here instead")
    args = parser.parse_args()
    if not args.corpus and not args.gpu_bundle:
        parser.error("give --corpus or --gpu-bundle")
    manifests = load_manifests(Path(args.manifests), args.only)
    mirror = Path(args.mirror)
    if args.gpu_bundle:
        return build_bundle(manifests, Path(args.gpu_bundle), mirror)
    status = 0
    for manifest in manifests:
        try:
            suite = build_suite(manifest, Path(args.corpus), mirror, args.rebuild)
            _log(f"{manifest['name']}: {suite}")
        except SetupError as error:
            _log(f"{manifest['name']}: NOT BUILT: {error}")
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
