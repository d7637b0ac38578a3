#!/bin/bash
cd "$(dirname "$0")/.."
export MLA_TUNE=0
python eval.py tune benchmarks.txt --runs 20 --json $OUT/tune_v9.json > $OUT/tune_v9.log 2>&1; echo rc $?
cp submission.py $OUT/submission_tuned.py
grep -n "^\[" $OUT/tune_v9.log
sed -n '/BEGIN MEASURED/,/END MEASURED/p' submission.py
