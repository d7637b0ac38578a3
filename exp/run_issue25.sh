#!/bin/bash
# Issue 25: the ONCE family's standard-Triton twin of the gfx950 Gluon kernel on the H200 (the
# Gluon kernel itself cannot run on NVIDIA), and the GPU tests of the files the change touched.
# One device call, ~5-8 minutes; results under $OUT.
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_kernel.py tests/test_merge.py -k "once" \
    > $OUT/pytest_issue25_once_gpu.log 2>&1; echo "once twin tests rc $?"; tail -3 $OUT/pytest_issue25_once_gpu.log
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_fallback.py tests/test_merge.py tests/test_checks.py \
    -k "not once" > $OUT/pytest_issue25_others_gpu.log 2>&1; echo "fallback/merge/checks rc $?"; tail -3 $OUT/pytest_issue25_others_gpu.log
