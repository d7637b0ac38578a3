#!/bin/bash
# v10: PDL combine and the L2 prefetch of the guessed range, each on and off, side by side
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 200 python -m pytest -q tests/test_merge.py tests/test_kernel.py -k "merge or fused or leaderboard or combine" -p no:cacheprovider > $OUT/pytest_v10_hints.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_v10_hints.log
python exp/tsweep.py '{"4x1024": [[1,64,8,16,1],[1,64,8,16,1,"pdl"],[1,64,8,16,1,"pdl","prefetch"]],
 "4x8192": [[1,128,8,32,1],[1,128,8,32,1,"pdl"],[1,128,8,32,1,"pdl","prefetch"],[1,128,4,32,1,"pdl","prefetch"]],
 "32x1024": [[1,128,8,4,1],[1,128,8,4,1,"pdl"],[1,128,8,4,1,"pdl","prefetch"],[1,64,4,8,1,"pdl","prefetch"]],
 "64x1024": [[1,64,4,4,1],[1,64,4,4,1,"pdl"],[1,64,4,4,1,"pdl","prefetch"]],
 "32x8192": [[1,64,4,8,1,"pdl"],[1,64,4,8,1,"pdl","prefetch"]],
 "256x1024": [[1,64,4,1,1],[1,64,4,1,1,"prefetch"]]}' 40 $OUT/sweep_v10_hints.json 2>&1 | grep -v Warn
