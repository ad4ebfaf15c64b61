#!/usr/bin/env bash
# The one command of a GPU check (issue 29): the CUDA tests, then benchmarks/gpu.py, on one
# device, each under its own time limit inside a global one, so that the whole run ends in
# GPU_CHECK_SECONDS (default 360 s; the tests get at most GPU_TEST_SECONDS, 140) and a failing part does not stop the other.
#
#   OUT=/tmp/gpuout bash scripts/gpu_check.sh            # also runs on a CPU: CUDA tests skip,
#                                                         # the benchmark runs at --quick size
#
# Wheels in .whl/ (pyro-ppl and pyro-api, for a machine without them) are installed into
# /tmp/site first. MNIST for part (d) is read from $PYRO_AR_MNIST or .gpudata/mnist when there.
# Writes $OUT/env.log, $OUT/tests.log, $OUT/bench.log and $OUT/gpu.json (or gpu_quick.json);
# BENCH_ARGS adds options to benchmarks/gpu.py (e.g. "--skip d" or "--budget 45").
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pyro_ar_gpu_check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
TOTAL=${GPU_CHECK_SECONDS:-360}
TEST_SECONDS=${GPU_TEST_SECONDS:-140}
start=$(date +%s)
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:$PWD || echo "gpu_check: installing the wheels in .whl failed" >&2
fi
export PYTHONPATH=${PYTHONPATH:-$PWD}
case ":$PYTHONPATH:" in *":$PWD:"*) ;; *) export PYTHONPATH=$PYTHONPATH:$PWD ;; esac

$PY - <<'EOF' 2>&1 | tee "$OUT/env.log"
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"{p.total_memory / 2**30:.1f} GiB", "SMs", p.multi_processor_count)
try:
    import pyro, pyro_ar
    print("pyro", pyro.__version__, "pyro_ar", pyro_ar.__version__, pyro_ar.__file__)
except Exception as e:  # reported, the parts below still run (and fail with the reason)
    print("import failed:", repr(e))
EOF
cuda=$($PY -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
[ "$cuda" = 1 ] || export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # a CPU run: one thread (a shared machine)

# 1. the CUDA tests: every test id with "cuda" in it (the DEVICES parametrisation of
#    tests/helpers.py and the test_cuda_* functions), in the files that have them, in both
#    test tiers (-m "": the slow tier too)
files=$(grep -rlE "requires_cuda|DEVICES|cuda.is_available" tests --include='test_*.py' | sort)
per_test=()
$PY -c "import pytest_timeout" 2>/dev/null && per_test=(--timeout=90)
timeout -k 10 "$TEST_SECONDS" $PY -m pytest -q -p no:cacheprovider -m "" -k cuda -rfEs "${per_test[@]}" $files \
    > "$OUT/tests.log" 2>&1
rc_tests=$?
tail -n 40 "$OUT/tests.log"
echo "gpu_check: CUDA tests exit code $rc_tests (124: the $TEST_SECONDS s limit)"

# 2. the benchmark, in what is left of the global limit
left=$((TOTAL - ($(date +%s) - start) - 5))
size=()
[ "$cuda" = 1 ] || size=(--quick)
mnist=${PYRO_AR_MNIST:-.gpudata/mnist}
if [ "$left" -gt 20 ]; then
    # shellcheck disable=SC2086  # BENCH_ARGS: several options
    timeout -k 10 "$left" $PY -m benchmarks.gpu "${size[@]}" --out "$OUT" --mnist "$mnist" ${BENCH_ARGS:-} \
        > "$OUT/bench.log" 2>&1
    rc_bench=$?
    cat "$OUT/bench.log" | grep -v "^PROGRESS" | tail -n 60
else
    rc_bench=124
fi
echo "gpu_check: benchmark exit code $rc_bench (124: cut at the global limit; the JSON keeps the parts done)"
echo "gpu_check: $(($(date +%s) - start)) s in all"
[ "$rc_tests" = 0 ] && [ "$rc_bench" = 0 ]
