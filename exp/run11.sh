#!/bin/bash
# v10: the combine as a dependent launch signalled at each split program's end (committed
# form): GPU tests, tune, compare against 79e9326, benchmark, leaderboard
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 200 python -m pytest -q tests/test_merge.py tests/test_fallback.py tests/test_kernel.py -k "merge or fused or leaderboard or combine or dependent" -p no:cacheprovider > $OUT/pytest_v10.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_v10.log
python eval.py tune benchmarks.txt --runs 20 --json $OUT/tune_v10.json > $OUT/tune_v10.log 2>&1; echo tune rc $?
cp submission.py $OUT/submission_tuned.py
sed -n '/BEGIN MEASURED/,/END MEASURED/p' submission.py
python eval.py compare baseline/submission_79e9326.py --json $OUT/compare_v10.json > $OUT/compare_v10.log 2>&1; echo compare rc $?
tail -12 $OUT/compare_v10.log
python eval.py benchmark --json $OUT/bench_v10.json 2>&1 | tail -11
python eval.py leaderboard --json $OUT/lb_v10.json 2>&1 | tail -11
