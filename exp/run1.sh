#!/bin/bash
# prefetch: correctness on the GPU, then side-by-side sweeps
cd "$(dirname "$0")/.."
export MLA_TUNE=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 150 python -m pytest -q -x tests/test_kernel.py -k "prefetch or leaderboard_cases" 2>&1 | tail -4
S="python tools/sweep.py --rounds 20"
$S --cases 4x1024 --choices 'table;triton,64,8,16,1,0,1,1;triton,64,4,16,1,0,1,1;triton,64,4,8,1,0,1,1;triton,64,8,8,1,0,1,1;triton,32,4,16,1,0,1,1' --json $OUT/s_4x1024.json 2>&1 | grep -v Warn
$S --cases 4x8192 --choices 'table;triton,64,4,32,1,0,1,1;triton,64,4,16,1,0,1,1;triton,64,8,16,1,0,1,1;triton,64,8,32,1,0,1,1;triton,64,4,64,1,0,1,1;triton,32,4,32,1,0,1,1' --json $OUT/s_4x8192.json 2>&1 | grep -v Warn
$S --cases 32x1024 --choices 'table;triton,64,4,8,1,0,1,1;triton,64,4,4,1,0,1,1;triton,64,8,4,1,0,1,1;triton,64,8,8,1,0,1,1;triton,32,4,8,1,0,1,1' --json $OUT/s_32x1024.json 2>&1 | grep -v Warn
$S --cases 64x1024 --choices 'table;triton,64,4,4,1,0,1,1;triton,64,4,2,1,0,1,1;triton,64,8,4,1,0,1,1;triton,64,8,2,1,0,1,1;triton,32,4,4,1,0,1,1' --json $OUT/s_64x1024.json 2>&1 | grep -v Warn
$S --rounds 10 --cases 32x8192,64x8192,256x1024,256x8192 --choices 'table;triton,same,same,same,same,same,same,1;triton,64,8,same,1,0,same,1;triton,32,4,same,1,0,same,1' --json $OUT/s_large.json 2>&1 | grep -v Warn
python tools/phase_probe.py --cases 4x8192,64x1024 --choices 'table;triton,same,same,same,same,same,same,1;triton,64,8,same,1,0,same,1' --json $OUT/probe_pf.json 2>&1 | grep -v Warn > $OUT/probe_pf.log; tail -60 $OUT/probe_pf.log
