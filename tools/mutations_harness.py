"""Deliberate bugs in eval.py and the tests that must catch each one.

MUTATIONS: one dict per bug: name, path (relative to the repository root), old (a snippet that
occurs exactly once in that file), new (its replacement: the bug) and tests (pytest node ids,
relative to the repository root, each of which must fail with the bug in place). tools/mutate.py
applies each to a temporary copy of the repository and runs its tests.

    python tools/mutations_harness.py    # checks that every `old` occurs exactly once
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES_TESTS = "tests/test_eval_modes.py"
MALFORMED = f"{MODES_TESTS}::test_malformed_case_line_exits_113_before_any_worker"
BAD_ARGUMENTS = f"{MODES_TESTS}::test_bad_arguments_exit_2"
TUNE_RANKS = f"{MODES_TESTS}::test_tune_ranks_only_checked_candidates"
TUNE_WRITES = f"{MODES_TESTS}::test_tune_writes_only_a_checked_choice_and_keeps_other_cases"
TUNE_IN_PROCESS = f"{MODES_TESTS}::test_tune_case_in_process_with_the_real_submission"
WRITE_ONE_CASE = f"{MODES_TESTS}::test_writing_one_case_keeps_the_others"
WRITE_REAL = f"{MODES_TESTS}::test_writing_the_real_submission_round_trips"
LEADERBOARD_PROTOCOL = f"{MODES_TESTS}::test_leaderboard_on_cpu_writes_the_protocol"
LEADERBOARD_JSON = f"{MODES_TESTS}::test_leaderboard_json_has_provenance_and_rows"
LEADERBOARD_RECHECK = f"{MODES_TESTS}::test_leaderboard_checks_every_timed_call"

MUTATIONS = [
    # --- case file validation
    {"name": "case validation removed: only the runner's key: value pattern",
     "path": "eval.py",
     "old": "        if problems:\n            print(f\"invalid test case:",
     "new": "        if problems and not args:\n            print(f\"invalid test case:",
     "tests": [f"{MALFORMED}[{variant}]" for variant in
               ("non-integer", "missing-key", "unknown-key", "bool", "repeated-key", "size-zero")]},
    {"name": "a bool accepted where an integer is expected",
     "path": "eval.py",
     "old": "if key in CASE_KEYS and type(value) is not int:",
     "new": "if key in CASE_KEYS and not isinstance(value, int):",
     "tests": [f"{MALFORMED}[bool]"]},
    {"name": "every value held to the size rule: a negative seed is rejected",
     "path": "eval.py",
     "old": "elif key in CASE_SIZE_KEYS and value < 1:",
     "new": "elif value < 1:",
     "tests": [f"{MODES_TESTS}::test_a_good_case_file_runs"]},
    {"name": "case keys no longer generate_input's arguments",
     "path": "eval.py",
     "old": 'CASE_KEYS = ("batchsize", "qseqlen", "kvseqlen", "seed")',
     "new": 'CASE_KEYS = ("batchsize", "qseqlen", "kvseqlen", "seed", "kvlens")',
     "tests": [f"{MODES_TESTS}::test_case_keys_are_generate_inputs_arguments",
               f"{MODES_TESTS}::test_a_good_case_file_runs"]},
    # --- arguments
    {"name": "--help leaves out a mode",
     "path": "eval.py",
     "old": "    *_help_items(MODES),",
     "new": "    *_help_items(dict(list(MODES.items())[:-1])),",
     "tests": [f"{MODES_TESTS}::test_help_names_every_mode_and_flag[--help]",
               f"{MODES_TESTS}::test_help_names_every_mode_and_flag[-h]"]},
    {"name": "no mode: a traceback instead of the usage and exit 2",
     "path": "eval.py",
     "old": "    if not argv or argv[0] not in MODES:",
     "new": "    if argv and argv[0] not in MODES:",
     "tests": [f"{MODES_TESTS}::test_no_mode_exits_2_with_usage"]},
    {"name": "POPCORN_FD and fewer than 2 arguments no longer exit 2",
     "path": "eval.py",
     "old": "    if popcorn and len(argv) < 2:\n        return 2  # the runner's rule\n",
     "new": "",
     "tests": [f"{BAD_ARGUMENTS}[popcorn-one-argument]"]},
    {"name": "--runs 0 accepted",
     "path": "eval.py",
     "old": 'if options["runs"] < 1:',
     "new": 'if options["runs"] < 0:',
     "tests": [f"{BAD_ARGUMENTS}[runs-zero]"]},
    {"name": "an unknown option taken for the case file",
     "path": "eval.py",
     "old": '    unknown = [a for a in argv if a.startswith("-")]',
     "new": "    unknown = []",
     "tests": [f"{BAD_ARGUMENTS}[unknown-option]"]},
    # --- leaderboard and benchmark
    {"name": "leaderboard recheck skipped: leaderboard runs as benchmark",
     "path": "eval.py",
     "old": 'recheck=(mode == "leaderboard")',
     "new": "recheck=False",
     "tests": [LEADERBOARD_RECHECK]},
    {"name": "leaderboard times fresh inputs without checking them",
     "path": "eval.py",
     "old": "        if recheck:\n            good, message = _check(check_copy, output)",
     "new": "        if False:\n            good, message = _check(check_copy, output)",
     "tests": [LEADERBOARD_RECHECK]},
    {"name": "leaderboard reuses one input instead of a fresh one per call",
     "path": "eval.py",
     "old": 'args["seed"] = args.get("seed", 0) + 13',
     "new": 'args["seed"] = args.get("seed", 0)',
     "tests": [LEADERBOARD_RECHECK]},
    {"name": "benchmark / leaderboard end without `check: pass`",
     "path": "eval.py",
     "old": '    logger.log("check", "pass")\n    return 0, results',
     "new": "    return 0, results",
     "tests": [LEADERBOARD_PROTOCOL, LEADERBOARD_RECHECK]},
    # --- --json
    {"name": "--json missing the device and versions",
     "path": "eval.py",
     "old": "              **env, **fields}",
     "new": "              **fields}",
     "tests": [LEADERBOARD_JSON, TUNE_RANKS]},
    {"name": "--json missing the date",
     "path": "eval.py",
     "old": 'record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),\n'
            '              "command"',
     "new": 'record = {"command"',
     "tests": [LEADERBOARD_JSON, TUNE_RANKS]},
    # --- profile
    {"name": "profile reports an empty table",
     "path": "eval.py",
     "old": "    return prof.key_averages().table(sort_by=sort_by, row_limit=20)",
     "new": '    return ""',
     "tests": [f"{MODES_TESTS}::test_profile_on_cpu_reports_a_profiler_table"]},
    # --- tune
    {"name": "a tune candidate that failed its check is timed and ranked",
     "path": "eval.py",
     "old": '            row["checked"] = good\n            if good:',
     "new": '            row["checked"] = True\n            if True:',
     "tests": [TUNE_RANKS, TUNE_WRITES, TUNE_IN_PROCESS]},
    {"name": "tune skips our exact-attention check on Triton candidates",
     "path": "eval.py",
     "old": 'if good and choice[0] == "triton":',
     "new": "if False:",
     "tests": [TUNE_RANKS, TUNE_WRITES]},
    {"name": "tune --no-write ignored",
     "path": "eval.py",
     "old": 'if options["write"] and best:',
     "new": "if best:",
     "tests": [TUNE_RANKS]},
    {"name": "tune leaves its last candidate in the dispatch table",
     "path": "eval.py",
     "old": "        if saved is None:\n            table.pop((batch, kv_len), None)",
     "new": "        if saved is None:\n            pass",
     "tests": [TUNE_IN_PROCESS]},
    # --- the MEASURED DISPATCH block
    {"name": "write_measured_table replaces the arch's table (no merge)",
     "path": "eval.py",
     "old": "    table[arch] = {**kept, **{case: tuple(choice) for case, (choice, _) in best.items()}}",
     "new": "    table[arch] = {case: tuple(choice) for case, (choice, _) in best.items()}",
     "tests": [WRITE_ONE_CASE, TUNE_WRITES]},
    {"name": "write_measured_table drops the kept entries' `# us` comments",
     "path": "eval.py",
     "old": "    times_us = measured_times_us(source)\n",
     "new": "    times_us = {}\n",
     "tests": [WRITE_ONE_CASE, WRITE_REAL, TUNE_WRITES]},
    {"name": "write_measured_table drops the kept entries' provenance",
     "path": "eval.py",
     "old": '    measured_on[arch] = f"{provenance}; other cases: {earlier}" if kept and earlier else provenance',
     "new": "    measured_on[arch] = provenance",
     "tests": [WRITE_ONE_CASE, TUNE_WRITES]},
    {"name": "tune holds a SCALED candidate to exact attention with the bf16 Q",
     "path": "eval.py",
     "old": "good = _exact_ok(data, output, submission.quantize_q_reference if scaled else None)",
     "new": "good = _exact_ok(data, output)",
     "tests": ["tests/test_eval_modes.py::test_tune_holds_a_scaled_candidate_to_its_own_emulation"]},
]


def snippet_problems(root: Path = ROOT) -> list:
    """Entries whose `old` does not occur exactly once in their file, or that change nothing."""
    problems = []
    for mutation in MUTATIONS:
        count = (root / mutation["path"]).read_text().count(mutation["old"])
        if count != 1:
            problems.append(f"{mutation['name']}: `old` occurs {count} times in {mutation['path']}")
        if mutation["old"] == mutation["new"]:
            problems.append(f"{mutation['name']}: `new` equals `old`")
    return problems


if __name__ == "__main__":
    found = snippet_problems()
    print("\n".join(found) or f"{len(MUTATIONS)} mutations, every snippet found once")
    sys.exit(1 if found else 0)
