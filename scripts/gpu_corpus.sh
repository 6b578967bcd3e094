#!/usr/bin/env bash
# The third-party corpus on a GPU host: every suite of a bundle at once, on inductor and beside
# the peer (PyTorch CI's way), each suite's runs under its own Inductor cache.
#
#   python benchmarks/corpus_setup.py --gpu-bundle .corpus/gpu --only kornia zuko   # here
#   bash scripts/gpu_corpus.sh                                                     # there
#   BUNDLE=.corpus/gpu WORKERS=2 RUN_TIMEOUT=150 ONLY="kornia zuko" bash scripts/gpu_corpus.sh
#
# The host has torch, Triton, pytest, Hypothesis and xdist and no network: the bundle's wheels
# (and .whl/'s, as scripts/gpu_ci.sh takes them) go to /tmp/site with no index. A suite runs on
# CUDA where its own tests choose it (kornia's `--device cuda`, pytorch-metric-learning's
# TEST_DEVICE=cuda: copy its suite-<name>.json under another name with that set). WORKERS is
# each suite's xdist workers, RUN_TIMEOUT the cap of each pytest run (plain, inductor, peer),
# BACKENDS more corpus.py specs. The tables land in $OUT/gpu-corpus.tgz (or /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."
bundle="${BUNDLE:-.corpus/gpu}"
run_timeout="${RUN_TIMEOUT:-150}"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p /tmp/site /tmp/gc /tmp/gcout
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    "$bundle"/whl/*.whl .whl/*.whl >/tmp/site.log 2>&1 || tail -5 /tmp/site.log
export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 || tail -5 /tmp/install.log
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
for described in "$bundle"/suite-*.json; do
    name=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['name'])" "$described")
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
    mkdir -p "/tmp/gc/$name"
    # Absolute cwd, the host's python, xdist in place of -p no:xdist.
    python3 - "$described" "/tmp/gc/$name/suite.json" "$(pwd)" "${WORKERS:-2}" <<'PY'
import json
import sys

suite = json.load(open(sys.argv[1]))
suite["cwd"] = f"{sys.argv[3]}/{suite['cwd']}"
suite["python"] = "python3"
args = list(suite.get("pytest_args", []))
while "-p" in args and args[args.index("-p") + 1] == "no:xdist":
    del args[args.index("-p") : args.index("-p") + 2]
suite["pytest_args"] = [*args, "-n", sys.argv[4]]
json.dump(suite, open(sys.argv[2], "w"))
PY
    # shellcheck disable=SC2086  # BACKENDS is a list of arguments
    (TORCHINDUCTOR_CACHE_DIR="/tmp/ind-$name" timeout $((run_timeout * 3 + 60)) \
        python3 benchmarks/corpus.py --corpus /tmp/gc --only "$name" --out "/tmp/gcout/$name" \
        --timeout "$run_timeout" --backend inductor --peer inductor ${BACKENDS:-} \
        >"/tmp/gcout/$name.log" 2>&1) &
done
wait
for table in /tmp/gcout/*/corpus.md; do tail -n +3 "$table"; done
tar -czf "${OUT:-/tmp}/gpu-corpus.tgz" -C /tmp gcout
