"""tools/mutate.py's report: a bug is caught when its tests fail, so its closing line counts
bugs caught, in those words; the words pass / fail, which read as the tests' own verdict, are
not used for it."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import mutate  # noqa: E402


def results(*statuses):
    return [({"name": f"bug {index}"}, status) for index, status in enumerate(statuses)]


def test_every_bug_caught_reads_as_the_good_outcome():
    assert mutate.summary_lines(results(*["caught"] * 215)) == [
        "215 of 215 deliberate bugs caught (each one made its tests fail)"]


def test_a_missed_bug_is_named_and_counted():
    lines = mutate.summary_lines(results("caught", "MISSED", "caught", "BROKEN"))
    assert lines == ["MISSED (its tests passed with the bug in): bug 1",
                     "BROKEN (its tests did not run: the entry is broken): bug 3",
                     "2 of 4 deliberate bugs caught (2 not caught)"]
    for line in lines:
        assert " passed," not in line and " failed" not in line, line


def test_every_entry_plants_its_bug_at_one_place_of_todays_files():
    """Each entry's snippet occurs exactly once in its file (a snippet gone stale after an edit would make the
    entry BROKEN in the mutation check, after the suite had passed: CI found 3 so), and its bug changes it."""
    stale = []
    for entry in mutate.load_mutations():
        count = (ROOT / entry["path"]).read_text().count(entry["old"])
        if count != 1 or entry["new"] == entry["old"]:
            stale.append(f"{entry['name']} ({entry['path']}: the snippet occurs {count} times)")
    assert stale == []
