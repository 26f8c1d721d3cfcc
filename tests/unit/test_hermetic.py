"""The test suite is hermetic: it reads nothing beside the repository, and no file of the
repository points there (a clone elsewhere has nothing beside it)."""

import subprocess

import pytest

from tests.conftest import OUTSIDE_READS, ROOT


def test_a_read_beside_the_repository_is_caught():
    beside = ROOT.parent / "shared" / "data" / "nothing-here.tsv"
    with pytest.raises(OSError):
        open(beside)  # noqa: SIM115 - the audit event comes before the open fails
    caught, OUTSIDE_READS[:] = list(OUTSIDE_READS), []  # this test's own read is expected
    assert str(beside) in caught


def test_reads_inside_the_repository_and_of_packages_are_not_caught(tmp_path):
    (ROOT / "data" / "README.md").read_text()
    (tmp_path / "x").write_text("x")
    with pytest.raises(OSError):  # a hidden directory beside it (a home's .cache) is no data
        open(ROOT.parent / ".cache" / "humeval-nothing-here")  # noqa: SIM115
    import numpy

    assert numpy.__file__
    assert OUTSIDE_READS == []


def test_no_file_of_the_repository_names_a_directory_beside_it():
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    needles = (b"../" + b"shared", b"shared/" + b"data/", b"shared/" + b"papers/")
    found = []
    for name in filter(None, tracked):
        path = ROOT / name.decode()
        if not path.is_file() or path.suffix not in {".py", ".md", ".toml", ".txt", ".yml", ""}:
            continue
        data = path.read_bytes()
        found += [f"{name.decode()}: {n.decode()}" for n in needles if n in data]
    assert found == []
