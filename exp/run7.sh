#!/bin/bash
# the committed code after the FUSED CHUNK == 1 split (BF16 binaries unchanged): GPU merge tests, benchmark
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 120 python -m pytest -q tests/test_merge.py tests/test_kernel.py -k "merge or fused or leaderboard" -p no:cacheprovider > $OUT/pytest_v9_final.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_v9_final.log
python eval.py benchmark --json $OUT/bench_v9_final.json 2>&1 | tail -11
