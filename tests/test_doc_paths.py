"""Every file README.md and docs/*.md cite exists: repository paths (`results/...`, `tools/...`,
`tests/...`, `docs/...`, `exp/...`; a `*` in one is a glob that must match), bare result names
(`h200_...`, looked up in results/) and relative markdown links. A path cited as history, with
its commit beside it (`exp/run11.sh at commit 5a1e6fa`, `git show 5a1e6fa:exp/run11.sh`),
need not exist in the tree; where the clone has the full history, it must exist at that commit.
"""
import re
import subprocess

import pytest

from conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REPOSITORY_PATH = re.compile(r"(?<![\w./-])(?:([0-9a-f]{7,40}):)?((?:results|tools|tests|docs|exp)/[\w.*/-]*[\w*])")
AT_COMMIT = re.compile(r"`?\s+at\s+commit\s+([0-9a-f]{7,40})\b")
BARE_RESULT = re.compile(r"(?<![\w./-])(h200_[\w.*-]*[\w*])")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def citations(text: str) -> list:
    """[(path from the repository root or None, bare result name or None, commit or None)]."""
    found = []
    for match in REPOSITORY_PATH.finditer(text):
        after = AT_COMMIT.match(text, match.end())
        found.append((match[2], None, match[1] or (after[1] if after else None)))
    found += [(None, match[1], None) for match in BARE_RESULT.finditer(text)]
    return found


def exists(relative: str) -> bool:
    return any(ROOT.glob(relative)) if "*" in relative else (ROOT / relative).exists()


def full_history() -> bool:
    result = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True,
                            text=True)
    return result.returncode == 0 and result.stdout.strip() == "false"


def at_commit(commit: str, relative: str) -> bool:
    if "*" in relative:
        listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit], cwd=ROOT, capture_output=True,
                                 text=True).stdout.splitlines()
        pattern = re.compile(re.escape(relative).replace(r"\*", r"[^/]*") + "$")
        return any(pattern.match(name) for name in listing)
    return subprocess.run(["git", "cat-file", "-e", f"{commit}:{relative}"], cwd=ROOT,
                          capture_output=True).returncode == 0


def missing_citations(text: str, where, history: bool) -> list:
    """The citations of one document that do not resolve, as readable strings."""
    missing = []
    for path, bare, commit in citations(text):
        if bare is not None:
            if not exists(f"results/{bare}"):
                missing.append(f"results/{bare} (cited as `{bare}`)")
        elif commit is None and not exists(path):
            missing.append(path)
        elif commit is not None and history and not at_commit(commit, path):
            missing.append(f"{path} at commit {commit}")
    for target in MARKDOWN_LINK.findall(text):
        if "://" not in target and not (where.parent / target).exists():
            missing.append(f"link {target}")
    return missing


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_cited_file_exists(document):
    assert missing_citations(document.read_text(), document, full_history()) == []


def test_the_rule_sees_a_missing_file_and_spares_history():
    text = ("`results/h200_eval_benchmark_v10_table.json`, `results/h200_no_such_run.json`, "
            "`h200_no_such_sweep.json`, tools/no_such_tool.py, `results/h200_binaries_v8_*.json`, "
            "exp/run11.sh at commit 5a1e6fa, `git show 0b9f0d1:explore/gfx950/kernels.py`, "
            "[harness](docs/harness.md), [gone](docs/no_such_page.md), <https://example.com>")
    assert missing_citations(text, ROOT / "README.md", history=False) == [
        "results/h200_no_such_run.json", "tools/no_such_tool.py", "docs/no_such_page.md",
        "results/h200_no_such_sweep.json (cited as `h200_no_such_sweep.json`)", "link docs/no_such_page.md"]
