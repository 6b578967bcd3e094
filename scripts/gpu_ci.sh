#!/usr/bin/env bash
# CI on a GPU host: the README's two commands, as .ci/run runs them, where CUDA is present.
#
#   bash scripts/gpu_ci.sh            # from the repository root, on the GPU host
#   WORKERS=14 bash scripts/gpu_ci.sh # the tests spread over 14 xdist workers (default: 14)
#   TESTS="tests/gpu tests/plugin/test_docs_blocks.py" EXAMPLES=0 bash scripts/gpu_ci.sh
#                                     # a part of the suite (the device's calls are 10 minutes
#                                     # at most: the whole suite takes about two such calls)
#
# CI has no GPU: this is what stands behind any claim of GPU support. It installs the plugin
# without resolving anything (the host has torch, Triton, pytest, Hypothesis and xdist, and no
# network); the test suite's other needs (expecttest for OpInfo, jsonschema, PyYAML, pytest-split)
# come as wheels in .whl/ where the host lacks them. Each step's log goes to $OUT (or
# ./gpu-ci-logs); the last lines printed are the summary, and the exit status is non-zero when a
# step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${OUT:-gpu-ci-logs}"
mkdir -p "$logs"
workers="${WORKERS:-14}"
# One compile thread and one torch (OpenMP) thread per worker: each xdist worker would otherwise
# start a pool of compile processes and a team of OpenMP threads as large as the host, many times
# over (15 workers x 16 threads on a 16-core H100 host: the suite did not finish in 420 s; with one
# thread each it finished in 296 s).
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)/inductor-cache"

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu-ci-site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/gpu-ci-site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$logs/install.log" 2>&1 || {
    cat "$logs/install.log"
    exit 1
}
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"

status=0
step() {  # step NAME COMMAND...: run it, log it, keep its closing line
    local name="$1"
    shift
    local started=$SECONDS
    "$@" >"$logs/$name.log" 2>&1
    local code=$?
    local closing
    closing=$(grep -E '^=+ .*(passed|failed|error|skipped|no tests ran).* in [0-9.]+s' "$logs/$name.log" | tail -n 1)
    printf '%-10s rc=%s %4ss  %s\n' "$name" "$code" "$((SECONDS - started))" "${closing:-(no closing line)}" >>"$logs/summary.txt"
    [ "$code" -eq 0 ] || status=1
}
: >"$logs/summary.txt"
# shellcheck disable=SC2086  # TESTS is a list of paths
step tests python3 -m pytest -n "$workers" -p no:cacheprovider ${TESTS:-tests} -rfE --durations=25
if [ "${EXAMPLES:-1}" = 1 ]; then
    step examples python3 -m pytest -p no:cacheprovider examples --compile-backend=inductor
fi
cat "$logs/summary.txt"
exit "$status"
