#!/bin/bash
# v10: the combine's dependent launch (PDL) signalled at the split program's end (the
# committed submission.py) against its start, and the L2 prefetch of the guessed first tile
# (both in exp/sub_start.py = submission.py + exp/pdl_start_prefetch.patch). As it ran, the
# two forms were the other way round (submission.py had the start form, a copy the end form);
# the kernels are the same.
cd "$(dirname "$0")/.."
export MLA_TUNE=0
patch -s -o exp/sub_start.py submission.py exp/pdl_start_prefetch.patch
S=exp/sub_start.py
python exp/tsweep.py '{"4x1024": [[1,64,8,16,1],[1,64,8,16,1,"pdl","'$S'"],[1,64,8,16,1,"pdl","prefetch","'$S'"],[1,64,8,16,1,"pdl"]],
 "4x8192": [[1,128,8,32,1],[1,128,8,32,1,"pdl","'$S'"],[1,128,8,32,1,"prefetch","'$S'"],[1,128,8,32,1,"pdl"]],
 "32x1024": [[1,128,8,4,1],[1,128,8,4,1,"pdl","'$S'"],[1,128,8,4,1,"pdl","prefetch","'$S'"],[1,128,8,4,1,"pdl"]],
 "64x1024": [[1,64,4,4,1],[1,64,4,4,1,"pdl","'$S'"],[1,64,4,4,1,"pdl","prefetch","'$S'"],[1,64,4,4,1,"pdl"]],
 "256x1024": [[1,64,4,1,1],[1,64,4,1,1,"prefetch","'$S'"]]}' 40 $OUT/sweep_v10_hints2.json 2>&1 | grep -v Warn
rm -f $S
