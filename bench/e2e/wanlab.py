#!/usr/bin/env python3
"""The packet-level WAN lab from Python: starts `longhaul-wanem --site ...` (docs/wanlab.md) and
drives it.

    with WanLab(wanem_binary, ["a", "b"], latency_ms=50, rate_mbit=1000) as lab:
        lab.exec_prefix(0)          # ["ip", "netns", "exec", "lhw-<pid>-a"]
        lab.addr(1)                 # "10.214.0.2"
        lab.command("set a-b loss=0.0001")   # -> "OK SET ..."

The lab process deletes its namespaces when it ends (quit, SIGTERM, or the death of the process
that started it); close() asks it to quit and waits. Needs root.
"""
import os
import subprocess
import threading


class WanLabError(RuntimeError):
    pass


class WanLab:
    def __init__(self, binary, sites, latency_ms=0, jitter_ms=0, rate_mbit=0, loss=0, mtu=1500, offload=True,
                 queue_ms=None, paths=(), seed=1, extra=()):
        self.binary = binary
        self.site_names = list(sites)
        self.cmd = [binary, "--site", *" --site ".join(self.site_names).split(" "),
                    "--latency-ms", str(latency_ms), "--jitter-ms", str(jitter_ms), "--rate-mbit", str(rate_mbit),
                    "--loss", str(loss), "--mtu", str(mtu), "--seed", str(seed), *extra]
        if queue_ms is not None:
            self.cmd += ["--queue-ms", str(queue_ms)]
        if not offload:
            self.cmd.append("--no-offload")
        for p in paths:
            self.cmd += ["--path", p]
        self.mtu = mtu
        self.proc = None
        self.netns = []
        self.addrs = []
        self._lock = threading.Lock()

    def up(self):
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read()
                self.proc.wait()
                raise WanLabError(f"longhaul-wanem lab did not start (exit {self.proc.returncode}): {err.strip()}")
            words = line.split()
            if words and words[0] == "SITE":
                self.netns.append(words[2])
                self.addrs.append(words[3])
            elif words == ["READY"]:
                return self

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", self.netns[i]]

    def addr(self, i):
        return self.addrs[i]

    def command(self, line):
        """One command, its one answer line; raises on ERR."""
        with self._lock:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline().strip()
        if not answer.startswith("OK"):
            raise WanLabError(f"{line}: {answer or 'no answer'}")
        return answer

    def counters(self):
        """The forwarder's counters as a dict of ints."""
        return {k: int(v) for k, v in (w.split("=") for w in self.command("counters").split()[2:])}

    def sysctl(self, i, name):
        out = subprocess.run(self.exec_prefix(i) + ["sysctl", "-n", name], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    def set_sysctl(self, name, value):
        """Inside every site's namespace only (the host's own settings are never touched)."""
        for i in range(len(self.netns)):
            subprocess.run(self.exec_prefix(i) + ["sysctl", "-q", "-w", f"{name}={value}"], check=True,
                           capture_output=True)

    def down(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=15)
            except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self.proc = None

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def default_binary():
    build = os.environ.get("LONGHAUL_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build/release"))
    return os.path.join(build, "tools/longhaul-wanem/longhaul-wanem")
