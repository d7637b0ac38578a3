#!/bin/bash
# run with exp/fused_deferred_stores.patch applied to submission.py (not kept; see exp/README.md)
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 170 python -m pytest -q tests/test_merge.py tests/test_kernel.py -k "merge or leaderboard or fused or combine" -p no:cacheprovider > $OUT/pytest_v9.log 2>&1; echo pytest rc $?; tail -3 $OUT/pytest_v9.log
python eval.py tune benchmarks.txt --runs 20 --json $OUT/tune_v9c.json > $OUT/tune_v9c.log 2>&1; echo tune rc $?
grep -n "^\[" $OUT/tune_v9c.log
cp submission.py $OUT/submission_tuned.py
python eval.py compare baseline/submission_79e9326.py --json $OUT/compare_v9c.json > $OUT/compare_v9c.log 2>&1; echo compare rc $?
tail -14 $OUT/compare_v9c.log
python eval.py benchmark --json $OUT/bench_v9c.json 2>&1 | tail -12
