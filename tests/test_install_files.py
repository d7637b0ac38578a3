"""What a fresh clone installs from: requirements-cpu.txt names no package index (pip has no
per-package index in a requirements file: one named there is asked for every package, and
where it cannot be reached pip retries each one, ~7 s and 5 warnings a package), and the
README's command that takes torch alone from PyTorch's CPU index pins the version the file
pins."""
import re

from conftest import ROOT

INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")


def pinned(name: str) -> str:
    found = re.search(rf"^{re.escape(name)}==(\S+)$", (ROOT / "requirements-cpu.txt").read_text(), re.M)
    assert found, name
    return found[1]


def test_the_cpu_requirements_name_no_package_index():
    for number, line in enumerate((ROOT / "requirements-cpu.txt").read_text().splitlines(), start=1):
        option = line.split("#")[0].strip().split("=")[0].split(" ")[0]
        assert option not in INDEX_OPTIONS, f"line {number}: {line}"


def test_the_readme_takes_torch_alone_from_the_cpu_index_at_the_pinned_version():
    readme = (ROOT / "README.md").read_text()
    command = f"pip install --no-deps --index-url https://download.pytorch.org/whl/cpu torch=={pinned('torch')}"
    assert f"\n{command} && pip install -r requirements-cpu.txt\n" in readme
