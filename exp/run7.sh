#!/bin/bash
# run with exp/fused_deferred_stores.patch applied to submission.py (not kept; see exp/README.md)
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 120 python -m pytest -q tests/test_merge.py tests/test_kernel.py -k "merge or fused or leaderboard" -p no:cacheprovider > $OUT/pytest_v9_final.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_v9_final.log
python eval.py benchmark --json $OUT/bench_v9_final.json 2>&1 | tail -11
