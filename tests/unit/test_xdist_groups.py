"""The parallel phase's scheduling (``-p tests.xdist_services --dist loadgroup``, as
``./run test`` runs the integration and browser tests), in a pytest run of its own over a
small generated project with two xdist processes: an ``xdist_group`` spanning modules runs
in one process (the Redis throttle tests rely on it), and every case of a schemathesis test
runs (each has a node id of its own; under pytest 9 they share one and xdist keeps one)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PLAIN = """
import os, json, pathlib
import pytest

@pytest.mark.parametrize("n", range(6))
def test_plain(n):
    record("{module}", f"plain{{n}}")

def record(module, name):
    out = pathlib.Path(os.environ["RECORD_DIR"]) / f"{{module}}-{{name}}"
    out.write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
"""

GROUPED = (
    PLAIN
    + """
@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("n", range(3))
def test_grouped(n):
    record("{module}", f"grouped{{n}}")
"""
)

FUZZED = """
import os, pathlib
import schemathesis

SCHEMA = {{
    "openapi": "3.0.2",
    "info": {{"title": "t", "version": "1"}},
    "paths": {{
        f"/p{{i}}/": {{"get": {{"responses": {{"200": {{"description": "ok"}}}}}}}}
        for i in range(5)
    }},
}}
schema = schemathesis.openapi.from_dict(SCHEMA)

@schema.parametrize()
def test_operation(case):
    name = case.operation.path.strip("/")
    out = pathlib.Path(os.environ["RECORD_DIR"]) / f"fuzzed-{{name}}"
    out.write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
"""


def test_a_group_stays_in_one_process_and_every_schemathesis_case_runs(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    for module in ("a", "b", "c"):
        (project / f"test_{module}.py").write_text(
            (GROUPED if module != "c" else PLAIN).format(module=module)
        )
    (project / "test_fuzzed.py").write_text(FUZZED.format())
    records = tmp_path / "records"
    records.mkdir()
    env = {
        **os.environ,
        "RECORD_DIR": str(records),
        "PYTHONPATH": str(ROOT),
        "PYTEST_ADDOPTS": "",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django",
         "-p", "tests.xdist_services", "-n", "2", "--dist", "loadgroup", str(project)],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    ran = {path.name: path.read_text() for path in records.iterdir()}
    # every test ran, the five operations' cases included
    assert sorted(n for n in ran if n.startswith("fuzzed-")) == [f"fuzzed-p{i}" for i in range(5)]
    assert len(ran) == 3 * 6 + 2 * 3 + 5, json.dumps(ran)
    # the group "shared", across two modules, in one process
    assert len({ran[f"{m}-grouped{n}"] for m in ("a", "b") for n in range(3)}) == 1, ran
    assert set(ran.values()) <= {"gw0", "gw1"}
