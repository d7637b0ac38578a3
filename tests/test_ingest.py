"""`python eval.py ingest LOG [SUBMISSION]`: the measured choices of the first-call tuning
reports in a runner's log written into the MEASURED DISPATCH block, with tune's merge rules.

The contract with submission.py (its side is the lead's): after each tuned case the report
on stderr holds a complete block in write_measured_table's format, cumulative over the
process, its MEASURED_ON line ending in `source <source_id of the file>`; a log may hold
several (test, benchmark, leaderboard runs), each line maybe behind a prefix. The logs here
are written by hand in that format. Every malformed log is one line on stderr, exit 2, and
the submission untouched. tools/mutations_harness.py lists a deliberate bug for each rule.
"""
import hashlib
import os
import shutil
import subprocess
import sys

import pytest

import eval as harness
from conftest import ROOT

HEAD, TAIL = "import os\n\n# the dispatch\n", "\n\nPATHS = ('triton', 'aiter')\n"
TARGET_BLOCK = f"""{harness.TABLE_BEGIN}
MEASURED_DISPATCH = {{
    'sm_90': {{
        (4, 1024): 'bf16 t64 w4 s16 st2 combine',  # 17.5 us
    }},
}}
MEASURED_ON = {{
    'sm_90': 'H200 run',
}}
{harness.TABLE_END}"""
TARGET = HEAD + TARGET_BLOCK + TAIL
TARGET_ID = hashlib.sha256((HEAD + TAIL).encode("utf-8")).hexdigest()[:12]
MI355X = "AMD Instinct MI355X, torch 2.10.0+rocm7.1, triton 3.6.0, 2026-12-0{day}: first-call tuning, source {sid}"


def report(entries, day=1, sid=TARGET_ID, arch="gfx950", prefix=""):
    """One report block as the submission prints it: `entries` are the lines of arch's cases."""
    lines = [harness.TABLE_BEGIN, "MEASURED_DISPATCH = {", f"    {arch!r}: {{",
             *[f"        {entry}" for entry in entries], "    },", "}", "MEASURED_ON = {",
             f"    {arch!r}: {MI355X.format(day=day, sid=sid)!r},", "}", harness.TABLE_END]
    return "\n".join(prefix + line for line in lines) + "\n"


FIRST = "(4, 1024): 'scaled t128 w8 s4 st2 combine',  # 12.3 us"
SECOND = ["(4, 1024): 'bf16 t64 w4 s8 st1 combine',  # 10.0 us", "(256, 8192): 'aiter',  # 301.0 us"]
OTHER_PROCESS = "(32, 1024): 'scaled t128 w8 s2 st2 fused',"
# a test run's report behind a timestamp and "stderr: ", its second case's report plain,
# then a later process's (a benchmark run), with other lines around
LOG = ("Submitting to amd-mixed-mla on MI355X...\n"
       + report([FIRST], prefix="[12:00:02] stderr: ")
       + "[12:00:03] test.0.status: pass\n"
       + report(SECOND)
       + "benchmark run follows\n"
       + report([OTHER_PROCESS], day=2)
       + "check: pass\n")


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(TARGET)
    return path


def write_log(tmp_path, text, name="log.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def ingest_main(capsys, monkeypatch, *args):
    """eval.py's main with these arguments, in this process -> (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["eval.py", "ingest", *map(str, args)])
    monkeypatch.delenv("POPCORN_FD", raising=False)
    code = harness.main()
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the source id ----------------------------------------------------------------------

def test_source_id_hashes_the_file_without_its_block():
    assert harness.source_id(TARGET) == TARGET_ID
    other_block = TARGET.replace("'bf16 t64 w4 s16 st2 combine'", "'aiter'")
    assert harness.source_id(other_block) == TARGET_ID
    assert harness.source_id(TARGET.replace("# the dispatch", "# The dispatch")) != TARGET_ID
    assert harness.source_id("no markers") == hashlib.sha256(b"no markers").hexdigest()[:12]


def test_the_submission_holds_each_marker_once():
    """source_id, tune and ingest cut the file at the first BEGIN and the first END marker: a
    second copy of either (a literal in code before the block, say) would cut it wrongly."""
    text = (ROOT / "submission.py").read_text(encoding="utf-8")
    for begin, end in ((harness.TABLE_BEGIN, harness.TABLE_END), (harness.MACHINE_BEGIN, harness.MACHINE_END)):
        assert text.count(begin) == 1 and text.count(end) == 1
        assert text.index(begin) < text.index(end)
    assert text.index(harness.TABLE_END) < text.index(harness.MACHINE_BEGIN)  # beside it, after it


def test_the_submissions_source_id_is_evals():
    """submission.SOURCE_ID (the id its report prints) is source_id of its own text."""
    import submission
    if not hasattr(submission, "SOURCE_ID"):
        pytest.skip("submission.py has no SOURCE_ID yet (the lead's side of the ingest contract)")
    assert submission.SOURCE_ID == harness.source_id((ROOT / "submission.py").read_text(encoding="utf-8"))


# --- what ingest writes -----------------------------------------------------------------

def test_every_block_is_merged_in_order(tmp_path, target, capsys, monkeypatch):
    code, out, err = ingest_main(capsys, monkeypatch, write_log(tmp_path, LOG), target)
    assert code == 0, err
    text = target.read_text()
    assert text.startswith(HEAD + harness.TABLE_BEGIN) and text.endswith(harness.TABLE_END + TAIL)
    table, measured_on = harness.measured_table(text)
    assert table == {"gfx950": {(4, 1024): "bf16 t64 w4 s8 st1 combine", (256, 8192): "aiter",
                                (32, 1024): "scaled t128 w8 s2 st2 fused"},
                     "sm_90": {(4, 1024): "bf16 t64 w4 s16 st2 combine"}}
    assert harness.measured_times_us(text) == {("gfx950", (4, 1024)): 10.0, ("gfx950", (256, 8192)): 301.0,
                                               ("sm_90", (4, 1024)): 17.5}
    ingested = "; ingested from log.txt"
    assert measured_on == {"sm_90": "H200 run",
                           "gfx950": MI355X.format(day=2, sid=TARGET_ID) + ingested + harness.OTHER_CASES
                           + MI355X.format(day=1, sid=TARGET_ID) + ingested}
    assert harness.source_id(text) == TARGET_ID  # the block is outside the id
    namespace = {}
    exec(compile(text, "submission.py", "exec"), namespace)
    assert namespace["MEASURED_DISPATCH"] == table
    assert "ingested 3 case(s) for gfx950 from 3 report block(s) of log.txt" in out


def test_ingesting_the_same_log_twice_changes_nothing(tmp_path, target, capsys, monkeypatch):
    log = write_log(tmp_path, LOG)
    assert ingest_main(capsys, monkeypatch, log, target)[0] == 0
    once = target.read_text()
    assert ingest_main(capsys, monkeypatch, log, target)[0] == 0
    assert target.read_text() == once


def test_arch_keeps_only_that_architectures_entries(tmp_path, target, capsys, monkeypatch):
    log = LOG + report(["(8, 64): 'bf16 t32 w4 s1 st1 direct',"], arch="sm_100")
    code, _, err = ingest_main(capsys, monkeypatch, write_log(tmp_path, log), target, "--arch", "sm_100")
    assert code == 0, err
    table, measured_on = harness.measured_table(target.read_text())
    assert set(table) == {"sm_90", "sm_100"} and table["sm_100"] == {(8, 64): "bf16 t32 w4 s1 st1 direct"}


def test_the_real_submission_takes_an_ingested_block(tmp_path, capsys, monkeypatch):
    path = tmp_path / "submission.py"
    shutil.copy(ROOT / "submission.py", path)
    source = path.read_text()
    log = report(SECOND, sid=harness.source_id(source), prefix="stderr: ")
    code, _, err = ingest_main(capsys, monkeypatch, write_log(tmp_path, log), path)
    assert code == 0, err
    text = path.read_text()
    compile(text, "submission.py", "exec")
    assert harness.measured_table(text)[0]["gfx950"] == {(4, 1024): "bf16 t64 w4 s8 st1 combine", (256, 8192): "aiter"}
    outside = lambda t: (t.split(harness.TABLE_BEGIN)[0], t.split(harness.TABLE_END)[1])  # noqa: E731
    assert outside(text) == outside(source)


def test_force_ingests_a_block_of_another_source(tmp_path, target, capsys, monkeypatch):
    log = write_log(tmp_path, report(SECOND, sid="0123456789ab"))
    code, _, err = ingest_main(capsys, monkeypatch, log, target, "--force")
    assert code == 0, err
    assert harness.measured_table(target.read_text())[0]["gfx950"][(256, 8192)] == "aiter"


# --- the machine probes' block: kept beside the dispatch block --------------------------

FIGURES = {"units": 256, "clock_mhz": 2400.0, "xcds": None, "launch_us": 4.1, "two_launches_us": 7.9,
           "copy_gbs": 5200.0, "hbm_round_trip_us": 1.21}
MI355X_MACHINE = "AMD Instinct MI355X, torch 2.10.0+rocm7.1, triton 3.6.0, 2026-12-0{day}: machine probes, source {sid}"


def machine_report(figures=FIGURES, day=1, sid=TARGET_ID, arch="gfx950", device="AMD Instinct MI355X", prefix=""):
    """A MEASURED MACHINE block as the submission prints it (submission.machine_block)."""
    provenance = MI355X_MACHINE.format(day=day, sid=sid).replace("AMD Instinct MI355X", device)
    lines = [harness.MACHINE_BEGIN, "MEASURED_MACHINE = {", f"    {arch!r}: {{",
             *[f"        {name!r}: {value!r}," for name, value in figures.items()], "    },", "}", "MACHINE_ON = {",
             f"    {arch!r}: {provenance!r},", "}", harness.MACHINE_END]
    return "\n".join(prefix + line for line in lines) + "\n"


def kept_machine(path):
    return harness.parse_machine_block(path.read_text(), "target")


def test_a_machine_block_is_kept_beside_the_dispatch_block(tmp_path, target, capsys, monkeypatch):
    """The last machine block per architecture, right after the dispatch block, its
    provenance + the log's name; the source id unchanged; a log without one as before."""
    later = {**FIGURES, "launch_us": 4.3}
    log = LOG + machine_report(prefix="stderr: ") + machine_report(later, day=2)
    code, out, err = ingest_main(capsys, monkeypatch, write_log(tmp_path, log), target)
    assert code == 0, err
    text = target.read_text()
    assert harness.TABLE_END + "\n" + harness.MACHINE_BEGIN in text and text.endswith(harness.MACHINE_END + TAIL)
    machine, machine_on = kept_machine(target)
    assert machine == {"gfx950": later}
    assert machine_on == {"gfx950": MI355X_MACHINE.format(day=2, sid=TARGET_ID) + "; ingested from log.txt"}
    assert harness.source_id(text) == TARGET_ID
    assert "the machine of gfx950" in out
    assert ingest_main(capsys, monkeypatch, write_log(tmp_path, LOG, "older.txt"), target)[0] == 0
    assert kept_machine(target)[0] == {"gfx950": later}  # a log without probes leaves it


def test_a_machine_block_alone_is_ingested(tmp_path, target, capsys, monkeypatch):
    code, _, err = ingest_main(capsys, monkeypatch, write_log(tmp_path, machine_report()), target)
    assert code == 0, err
    assert kept_machine(target)[0] == {"gfx950": FIGURES} and harness.measured_table(target.read_text())[0] == \
        harness.measured_table(TARGET)[0]


def test_the_real_submission_keeps_an_ingested_machine_block(tmp_path, capsys, monkeypatch):
    path = tmp_path / "submission.py"
    shutil.copy(ROOT / "submission.py", path)
    source = path.read_text()
    log = report(SECOND, sid=harness.source_id(source)) + machine_report(sid=harness.source_id(source))
    assert ingest_main(capsys, monkeypatch, write_log(tmp_path, log), path)[0] == 0
    text = path.read_text()
    compile(text, "submission.py", "exec")
    namespace = {}
    exec(text.split(harness.MACHINE_BEGIN, 1)[1].split(harness.MACHINE_END, 1)[0], namespace)  # plain literals
    assert namespace["MEASURED_MACHINE"] == {"gfx950": FIGURES} and harness.source_id(text) == harness.source_id(source)
    assert text.count(harness.MACHINE_BEGIN) == 1 and text.count(harness.MACHINE_END) == 1


def test_a_machine_block_of_another_device_than_the_kept_one_is_refused(tmp_path, target, capsys, monkeypatch):
    assert ingest_main(capsys, monkeypatch, write_log(tmp_path, machine_report()), target)[0] == 0
    kept = target.read_text()
    other = write_log(tmp_path, machine_report(device="AMD Instinct MI350X", day=2), "other.txt")
    code, _, err = ingest_main(capsys, monkeypatch, other, target)
    assert code == 2 and "gfx950's machine was measured on AMD Instinct MI350X, but submission.py keeps the " \
                          "figures of AMD Instinct MI355X" in err and target.read_text() == kept
    assert ingest_main(capsys, monkeypatch, other, target, "--force")[0] == 0
    assert harness.provenance_device(kept_machine(target)[1]["gfx950"]) == "AMD Instinct MI350X"


# --- malformed logs: one line on stderr, exit 2, the submission untouched ----------------

def broken(line_text, replacement):
    return report(SECOND).replace(line_text, replacement)


MALFORMED = {
    "no-report": ("Submitting...\ncheck: pass\n", [], "no first-call tuning report in log.txt: no line contains "
                                                     f"{harness.TABLE_BEGIN!r}"),
    "truncated": ("ok\n" + report(SECOND).split("MEASURED_ON")[0], [],
                  "log.txt line 2: a MEASURED DISPATCH block begins and the log ends before"),
    "truncated-by-the-next-report": ("\n".join(report(SECOND).splitlines()[:4]) + "\n" + report(SECOND), [],
                                     "log.txt line 1: a MEASURED DISPATCH block begins and another begins at line 5"),
    "does-not-parse": (broken("    },\n}", "    },\n"), [],
                       "log.txt line 1: the MEASURED DISPATCH block does not parse"),
    "no-measured-on": (broken("MEASURED_ON = {", "MEASURED_ONE = {"), [], "has no MEASURED_ON"),
    "short-triton-choice": (broken("'bf16 t64 w4 s8 st1 combine'", "'bf16 t64 w4'"), [],
                            "gfx950 (4, 1024): bad choice a launch reads 'aiter' or 'FAMILY tTILE wWARPS sSPLITS "
                            "stSTAGES MERGE' (families bf16, scaled, once; merges direct, combine, fused), not 'bf16 t64 w4'"),
    "old-tuple-form": (broken("'bf16 t64 w4 s8 st1 combine'", "('triton', 64, 4, 8, 1)"), [],
                       "bad choice a launch reads 'aiter' or 'FAMILY tTILE wWARPS sSPLITS stSTAGES MERGE'"),
    "unknown-path": (broken("'aiter'", "'cuda'"), [], "), not 'cuda'"),
    "aiter-with-arguments": (broken("'aiter'", "'aiter t32'"), [], "), not 'aiter t32'"),
    "zero-splits": (broken("'bf16 t64 w4 s8 st1 combine'", "'bf16 t64 w4 s0 st1 combine'"), [],
                    "with powers of two for the first three; got Launch(block_n=64, num_warps=4, num_splits=0"),
    "bad-case-key": (broken("(256, 8192)", "('256', 8192)"), [], "is not (batch, kv_len) of integers >= 1"),
    "no-entry-for-arch": (report(SECOND), ["--arch", "gfx942"],
                          "no entry for --arch gfx942 in the 1 report block(s) of log.txt (they hold: gfx950)"),
    "source-mismatch": (report(SECOND, sid="0123456789ab"), [],
                        f"log.txt line 1: gfx950 was measured with submission source 0123456789ab, but "
                        f"submission.py has source {TARGET_ID}"),
    "no-source": (report(SECOND).replace(f", source {TARGET_ID}", ""), [], "no `source <id>` in its MEASURED_ON"),
    "machine-of-another-source": (report(SECOND) + machine_report(sid="0123456789ab"), [],
                                  "gfx950's machine was measured with submission source 0123456789ab"),
    "machine-figure-not-a-number": (machine_report({**FIGURES, "launch_us": "fast"}), [],
                                    "gfx950 'launch_us': 'fast' is not a figure of the probes"),
    "machine-figure-negative": (machine_report({**FIGURES, "copy_gbs": -1.0}), [],
                                "gfx950 'copy_gbs': -1.0 is not a figure of the probes"),
    "machine-figure-unknown": (machine_report({**FIGURES, "launch_ms": 0.004}), [],
                               "gfx950 'launch_ms': 0.004 is not a figure of the probes"),
    "machine-truncated": (machine_report().split("MACHINE_ON")[0], [],
                          "log.txt line 1: a MEASURED MACHINE block begins and the log ends before"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_log_is_one_line_exit_2_and_nothing_written(tmp_path, target, capsys, monkeypatch, name):
    text, flags, message = MALFORMED[name]
    code, out, err = ingest_main(capsys, monkeypatch, write_log(tmp_path, text), target, *flags)
    assert code == 2 and not out
    assert err.startswith("ingest: ") and err.count("\n") == 1 and message in err, err
    assert target.read_bytes() == TARGET.encode()


def test_the_command_line_exits_2_on_a_malformed_log(tmp_path, target):
    """The same through a real process: stderr, exit 2, the file untouched."""
    log = write_log(tmp_path, "nothing here\n")
    shutil.copy(ROOT / "eval.py", tmp_path / "eval.py")
    for name in ("reference.py", "utils.py", "task.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    result = subprocess.run([sys.executable, "eval.py", "ingest", str(log), str(target)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no first-call tuning report in log.txt" in result.stderr
    assert target.read_text() == TARGET


# --- end to end: the submission's report, ingested, is what the next run uses -------------

def test_a_reported_choice_ingested_is_used_next_time(tmp_path):
    """MLA_TUNE=1 benchmark on a CPU (first-call tuning runs and prints its block on stderr),
    that stderr ingested into a copy of submission.py, the same benchmark with the copy: no
    tuning, and the copy's choice for the case is the ingested one."""
    import submission
    if not hasattr(submission, "SOURCE_ID"):
        pytest.skip("submission.py has no SOURCE_ID yet: its first-call report carries no ingestable block")
    runs = {}
    for name in ("measure", "reuse"):
        folder = tmp_path / name
        folder.mkdir()
        for file_name in ("eval.py", "reference.py", "utils.py", "task.py", "interpreter_shim.py", "submission.py"):
            shutil.copy(ROOT / file_name, folder / file_name)
        (folder / "cases.txt").write_text("batchsize: 2; qseqlen: 1; kvseqlen: 17; seed: 101\n")
        runs[name] = folder
    env = {**{k: v for k, v in os.environ.items() if k != "POPCORN_FD"}, "MLA_TUNE": "1",
           harness.CPU_BUDGET_ENV: "0.2"}
    bench = [sys.executable, "eval.py", "benchmark", "cases.txt"]
    first = subprocess.run(bench, cwd=runs["measure"], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    log = write_log(tmp_path, first.stderr, name="runner.log")
    ingested = subprocess.run([sys.executable, "eval.py", "ingest", str(log), "submission.py"], cwd=runs["reuse"],
                              capture_output=True, text=True, timeout=120)
    assert ingested.returncode == 0, ingested.stderr
    table, _ = harness.measured_table((runs["reuse"] / "submission.py").read_text())
    choice = table["cpu"][(2, 17)]
    second = subprocess.run(bench, cwd=runs["reuse"], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert harness.TABLE_BEGIN not in second.stderr  # no case tuned: the report prints no block
    picked = subprocess.run([sys.executable, "-c", "import torch, submission; "
                             "print(submission.choose(2, 17, torch.device('cpu')))"],
                            cwd=runs["reuse"], env=env, capture_output=True, text=True, timeout=120)
    assert picked.stdout.strip() == choice, picked.stdout + picked.stderr
