#!/bin/bash
# v11 (issue 24), two device calls of at most ~8 minutes each:
#   bash exp/run13.sh tests    GPU tests of both families (the SCALED family as its portable twin on
#                              NVIDIA, its early-first-tile form included), then `eval.py compare`
#                              against main's submission (before running: git show main:submission.py
#                              > baseline/submission_main.py): no case may be slower
#   bash exp/run13.sh probe    phase probes of the dispatched choices, and the static latency counts
#                              of the same source beside them (tools/latency_calibration.py)
cd "$(dirname "$0")/.."
export MLA_TUNE=0
if [ "$1" = tests ]; then
  timeout 280 python -m pytest -q tests/test_kernel.py tests/test_merge.py tests/test_checks.py tests/test_fallback.py \
      -p no:cacheprovider > $OUT/pytest_gpu_v11.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_gpu_v11.log
  timeout 200 python eval.py compare baseline/submission_main.py --json $OUT/compare_v11_vs_main.json \
      > $OUT/compare_v11_vs_main.log 2>&1; echo compare rc $?; tail -12 $OUT/compare_v11_vs_main.log
elif [ "$1" = probe ]; then
  timeout 300 python tools/phase_probe.py --runs 10 --json $OUT/probe_v11.json > $OUT/probe_v11.log 2>&1
  echo probe rc $?; grep -E "^\(|event" $OUT/probe_v11.log | head -20
  timeout 150 python tools/latency_calibration.py --probe $OUT/probe_v11.json --json $OUT/latency_calibration_v11.json
else
  echo "usage: bash exp/run13.sh tests|probe"; exit 2
fi
