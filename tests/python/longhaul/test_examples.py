"""The suite runs examples/python/launch_local.py as a user would: 2 nodes x 2 ranks, 3 outer steps."""
import os
import signal
import subprocess
import sys

import diloco_reference as ref


def test_launcher_runs_three_outer_steps():
    cmd = [sys.executable, os.path.join(ref.EXAMPLES, "launch_local.py"), "--nodes", "2", "--ranks", "2", "--",
           "--outer-steps", "3", "--H", "4"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0, out
    assert out.count("done after 12 inner steps") == 4, out
    assert "exit statuses [0, 0, 0, 0]" in out
