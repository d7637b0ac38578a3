#!/bin/bash
# v10: the combine as a programmatic dependent launch (PDL) on the H200
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 150 python -m pytest -q tests/test_merge.py tests/test_kernel.py -k "merge or fused or leaderboard or combine" -p no:cacheprovider > $OUT/pytest_v10_pdl.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_v10_pdl.log
python exp/tsweep.py '{"4x1024": [[1,32,4,32,1],[1,32,4,32,1,"pdl"],[1,64,4,16,1,"pdl"]],
 "4x8192": [[1,128,8,32,1],[1,128,8,32,1,"pdl"],[1,128,8,16,1,"pdl"]],
 "32x1024": [[1,128,8,4,1],[1,128,8,4,1,"pdl"],[1,64,4,8,1,"pdl"]],
 "64x1024": [[1,64,4,4,1],[1,64,4,4,1,"pdl"],[1,64,4,8,1,"pdl"]],
 "32x8192": [[1,64,4,8,1],[1,64,4,8,1,"pdl"]]}' 30 $OUT/sweep_v10_pdl.json 2>&1 | grep -v Warn
python eval.py tune benchmarks.txt --runs 20 --json $OUT/tune_v10.json > $OUT/tune_v10.log 2>&1; echo tune rc $?
cp submission.py $OUT/submission_tuned.py
sed -n '/BEGIN MEASURED/,/END MEASURED/p' submission.py
python eval.py compare baseline/submission_79e9326.py --json $OUT/compare_v10.json > $OUT/compare_v10.log 2>&1; echo compare rc $?
tail -16 $OUT/compare_v10.log
