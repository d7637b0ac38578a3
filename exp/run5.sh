#!/bin/bash
cd "$(dirname "$0")/.."
export MLA_TUNE=0
python eval.py tune benchmarks.txt --runs 20 --json $OUT/tune_v9b.json > $OUT/tune_v9b.log 2>&1; echo tune rc $?
grep -n "^\[" $OUT/tune_v9b.log
cp submission.py $OUT/submission_tuned.py
sed -n '/BEGIN MEASURED/,/END MEASURED/p' submission.py
python eval.py compare baseline/submission_79e9326.py --json $OUT/compare_v9.json > $OUT/compare_v9.log 2>&1; echo compare rc $?
tail -16 $OUT/compare_v9.log
python eval.py benchmark --json $OUT/bench_v9.json 2>&1 | tail -12
python eval.py leaderboard --json $OUT/lb_v9.json 2>&1 | tail -12
