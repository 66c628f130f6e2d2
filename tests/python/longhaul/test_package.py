"""The package itself: what importing it pulls in, its version, its type stubs."""
import os
import shutil
import subprocess
import sys

import pytest

import longhaul as lh


def test_import_pulls_in_neither_torch_nor_numpy():
    code = "import sys, longhaul; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_version_and_errors():
    assert lh.__version__.count(".") == 2
    assert issubclass(lh.PeerFailure, lh.LonghaulError) and issubclass(lh.LonghaulError, RuntimeError)
    assert issubclass(lh.Timeout, TimeoutError) and issubclass(lh.Unsupported, ValueError)
    with pytest.raises(ValueError):
        lh.set_log_level("loud")


def test_stubs_match_the_module():
    if shutil.which("stubtest") is None and subprocess.run([sys.executable, "-c", "import mypy"]).returncode:
        pytest.fail("mypy is not installed (scripts/setup.sh installs it)")
    pkg = os.path.dirname(os.path.dirname(lh.__file__))
    env = dict(os.environ, MYPYPATH=pkg, PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "longhaul._longhaul", "--ignore-missing-stub",
                          "--allowlist", os.path.join(os.path.dirname(__file__), "stubtest_allowlist.txt")],
                         capture_output=True, text=True, env=env, cwd=pkg)
    assert out.returncode == 0, out.stdout + out.stderr
