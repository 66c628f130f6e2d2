"""The suite runs the examples as a user would: examples/python/launch_local.py (2 nodes x 2
ranks, 3 outer steps), and the torchrun command of train_fsdp_diloco.py's docstring, word for word
(only its placeholders filled in)."""
import os
import shlex
import signal
import subprocess
import sys

import diloco_reference as ref

SCRIPT = os.path.join(ref.EXAMPLES, "train_fsdp_diloco.py")


def run(cmd, timeout=600):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, out


def test_launcher_runs_three_outer_steps():
    code, out = run([sys.executable, os.path.join(ref.EXAMPLES, "launch_local.py"), "--nodes", "2", "--ranks", "2",
                     "--", "--outer-steps", "3", "--H", "4"])
    assert code == 0, out
    assert out.count("done after 12 inner steps") == 4, out
    assert "exit statuses [0, 0, 0, 0]" in out


def documented_torchrun_command():
    """The `torchrun ...` command of the script's docstring (backslash continuations joined)."""
    doc = open(SCRIPT).read().split('"""')[1]
    lines = [ln.strip() for ln in doc.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("torchrun "))
    words = []
    for ln in lines[start:]:
        words += shlex.split(ln.rstrip("\\"))
        if not ln.endswith("\\"):
            return words
    raise AssertionError("the torchrun command's last line ends with a backslash")


def test_the_documented_torchrun_command_runs(master):
    # torchrun's parser reads the script's flags too; one that is a prefix of its own options
    # (--master of --master-addr, --node of --node-rank, --log of --log-dir) fails it.
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    fill = {"N": "2", "HOST:PORT": master.address, "NAME": "solo", "train_fsdp_diloco.py": SCRIPT}
    cmd = [torchrun] + [fill.get(w, w) for w in documented_torchrun_command()[1:]]
    code, out = run(cmd + ["--outer-steps", "1", "--H", "2"], timeout=300)
    assert code == 0, f"{shlex.join(cmd)}\n{out}"
    assert out.count("node solo rail") == 2 and "done after 2 inner steps" in out, out
