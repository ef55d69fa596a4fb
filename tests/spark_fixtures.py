"""One local Spark session for the Spark tests, started by the first test that asks
for it and stopped at the end of the test session.

Test modules do ``pytest.importorskip("pyspark")`` first and then
``from tests.spark_fixtures import spark``. Without Java the tests are skipped with a
message. The executors' Python is this interpreter, and they find treeimp where this
process does (the worktree on PYTHONPATH, or the installed package).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = str(pathlib.Path(__file__).resolve().parents[1])
_SHARED = {}


def _java_problem():
    """Why Java cannot run Spark here, or None."""
    java = shutil.which("java") or (os.path.join(os.environ["JAVA_HOME"], "bin", "java")
                                    if os.environ.get("JAVA_HOME") else None)
    if java is None or not os.path.exists(java):
        return "no java on PATH or JAVA_HOME (Spark needs Java 17 or 21)"
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{java} -version failed: {exc}"
    return None


@pytest.fixture(scope="session")
def spark():
    """A SparkSession on local[2]: no UI, 2 shuffle partitions, 1 GB of driver memory."""
    problem = _java_problem()
    if problem:
        pytest.skip(f"Spark tests skipped: {problem}")
    if "session" not in _SHARED:
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        path = os.environ.get("PYTHONPATH", "")
        if ROOT not in path.split(os.pathsep):
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, path) if p)
        _SHARED["session"] = (
            SparkSession.builder.master("local[2]").appName("treeimp-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.driver.memory", "1g")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate())
        _SHARED["session"].sparkContext.setLogLevel("ERROR")
    yield _SHARED["session"]
    # session-scoped: torn down once every test module that imported it has run
    session = _SHARED.pop("session", None)
    if session is not None:
        session.stop()
