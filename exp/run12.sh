#!/bin/bash
# v10, the committed code: GPU tests, the combine's wait removed (a GPU-only deliberate bug:
# do the merge tests see the race?), and a second compare against 79e9326
cd "$(dirname "$0")/.."
export MLA_TUNE=0
timeout 240 python -m pytest -q tests/test_merge.py tests/test_fallback.py tests/test_kernel.py tests/test_first_call_tuning.py -p no:cacheprovider > $OUT/pytest_v10_final.log 2>&1; echo pytest rc $?; tail -2 $OUT/pytest_v10_final.log
rm -rf /tmp/mut && mkdir /tmp/mut && cp -r submission.py reference.py task.py utils.py tests /tmp/mut/
sed -i 's/        _griddepcontrol(True)/        pass/' /tmp/mut/submission.py; grep -c "_griddepcontrol(True)" /tmp/mut/submission.py
(cd /tmp/mut && for i in 1 2 3; do timeout 100 python -m pytest -q tests/test_merge.py -k "combine" -p no:cacheprovider 2>&1 | tail -1; done) > $OUT/pytest_v10_no_wait.log; echo "no-wait mutation:"; cat $OUT/pytest_v10_no_wait.log
python eval.py compare baseline/submission_79e9326.py --json $OUT/compare_v10c.json > $OUT/compare_v10c.log 2>&1; echo compare rc $?
tail -12 $OUT/compare_v10c.log
