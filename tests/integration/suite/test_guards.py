"""The suite's own guards, tried on a pytest run of their own: a host left otherwise than a
run found it (a file in /tmp, a process still running) and a skip nobody expects each fail
that run when strict, as scripts/test.sh makes them; the same run, clean, passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests import hostguard, skip_guard

CONFTEST = """
import pytest
from tests import hostguard, skip_guard

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if hostguard.start(config):
        config.pluginmanager.register(hostguard, "ow-host-guard")
        config.pluginmanager.register(skip_guard, "ow-skip-guard")
"""


def run_inner(tmp_path: Path, test: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``test`` as a test module under the guards, with this checkout importable; the outer
    session's marker and strictness removed, so that the inner run guards itself as ``env``
    says. The suite's other lanes run beside it (tests/lanes.py), so it guards only what is
    its own: its processes and a temporary directory of its own (``inner_tmp``)."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(test))
    inner_tmp(tmp_path).mkdir(exist_ok=True)
    outer = (hostguard.MARKER, "OW_TEST_HOST_GUARD", "OW_TEST_SKIPS")  # scripts/test.sh's
    environ = {k: v for k, v in os.environ.items() if k not in outer}
    environ.update(
        PYTHONPATH=str(hostguard.ROOT),
        TMPDIR=str(inner_tmp(tmp_path)),
        OW_TEST_HOST_GUARD_SCOPE="session",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def inner_tmp(tmp_path: Path) -> Path:
    """The inner run's temporary directory (its ``/tmp``)."""
    return tmp_path / "tmp"


def test_a_file_left_in_tmp_and_a_process_left_running_fail_a_strict_run(tmp_path: Path) -> None:
    name = f"ow-guard-probe-{os.getpid()}"
    leftover = inner_tmp(tmp_path) / name
    pid_file = tmp_path / "pid"
    test = f"""
        import subprocess
        def test_leaves_things_behind():
            open({str(leftover)!r}, "w").close()
            p = subprocess.Popen(["sleep", "300"], start_new_session=True)
            open({str(pid_file)!r}, "w").write(str(p.pid))
        """
    try:
        done = run_inner(tmp_path, test, OW_TEST_HOST_GUARD="strict")
        assert done.returncode == 1, done.stdout[-3000:]
        assert "the host differs from how the suite found it" in done.stdout
        assert f"left in {inner_tmp(tmp_path)}: {name}" in done.stdout
        pid = int(pid_file.read_text())
        assert f"a process left running: pid {pid}" in done.stdout, done.stdout[-3000:]
        assert "1 passed" in done.stdout
    finally:
        leftover.unlink(missing_ok=True)
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_clean_run_passes_and_the_guard_only_names_without_strict(tmp_path: Path) -> None:
    done = run_inner(tmp_path, "def test_nothing():\n    pass\n", OW_TEST_HOST_GUARD="strict")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "the host differs" not in done.stdout


def test_an_unexpected_skip_fails_a_strict_run_and_an_expected_one_does_not(
    tmp_path: Path,
) -> None:
    test = """
        import pytest
        def test_needs_something():
            pytest.skip("something is missing here")
        """
    done = run_inner(tmp_path, test, OW_TEST_SKIPS="strict")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "skips not in tests/expected-skips.txt (they fail the run)" in done.stdout
    assert "test_inner.py::test_needs_something: something is missing here" in done.stdout
    lenient = run_inner(tmp_path, test)
    assert lenient.returncode == 0 and "skips not in" in lenient.stdout


def test_the_expected_skips_are_matched_by_test_id_and_reason(tmp_path: Path) -> None:
    listed = tmp_path / "expected.txt"
    listed.write_text("# why\ntests/a.py::test_x[*] | needs a CUDA device*\n")
    patterns = skip_guard.expected(listed)
    assert skip_guard.is_expected("tests/a.py::test_x[kafka]", "needs a CUDA device", patterns)
    assert not skip_guard.is_expected("tests/a.py::test_y", "needs a CUDA device", patterns)
    assert not skip_guard.is_expected("tests/a.py::test_x[k]", "node is missing", patterns)
    every = skip_guard.expected()  # the project's own list parses
    assert every and all(ids.startswith("tests/") for ids, _ in every)
