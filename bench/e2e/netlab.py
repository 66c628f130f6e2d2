#!/usr/bin/env python3
"""A bandwidth-shaped network lab out of Linux network namespaces, for end-to-end benchmarks.

N "hosts", each a network namespace lhb-<pid>-h<i> with one interface `veth0` (10.213.X.<i+1>/24)
plugged into a bridge that lives in its own namespace lhb-<pid>-sw (the "switch"). Every link is
shaped with `tc qdisc ... tbf` (netem is not needed): the host side of each veth (host egress) and
the switch side (the switch port's egress, i.e. the host's ingress), so every host has a full-duplex
NIC of `rate` (1 Gbit/s by default) and the path between any two hosts has that capacity.
`host_rates` ({host index: rate}) gives some hosts another NIC, e.g. a receiver wide enough for
several senders.

Nothing is created or changed outside these namespaces: the veth pairs are made inside the switch
namespace and one end is moved into the host's namespace; the host's own interfaces, routes and
addresses are never touched. Names carry the creating process's pid so concurrent runs do not meet.

Library use:
    with NetLab(4) as lab:           # or lab = NetLab(4); lab.up(); ...; lab.down()
        lab.exec_prefix(0)          # ["ip", "netns", "exec", "lhb-123-h0"]
        lab.addr(0)                 # "10.213.X.1"
        lab.ifname                  # "veth0"
NetLab.down() is idempotent, is registered with atexit, and also runs on SIGINT/SIGTERM when
install_signal_handlers() is used (the entry point of a benchmark calls it once).

CLI (manual use):
    python3 bench/e2e/netlab.py up N [--rate 1gbit]   builds a lab and leaves it up; prints names
    python3 bench/e2e/netlab.py down [PREFIX]         tears down PREFIX (e.g. lhb-123), or every
                                                      lhb-<pid>-* whose creating pid is gone
    python3 bench/e2e/netlab.py list                  lists lhb-* namespaces
"""
import atexit
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

PREFIX = "lhb"
# Reachability probe (no ping on every machine): a TCP connect to a closed port of the target is
# refused (RST) when the path works, and times out or is unreachable when it does not.
_PROBE = ("import errno, socket, sys; s = socket.socket(); s.settimeout(1); "
          "sys.exit(0 if s.connect_ex((sys.argv[1], 9)) in (0, errno.ECONNREFUSED) else 1)")
IFNAME = "veth0"


def _run(cmd, check=True, timeout=30):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip() or 'exit ' + str(out.returncode)}")
    return out


def list_namespaces():
    out = _run(["ip", "netns", "list"], check=False)
    names = []
    for line in out.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if re.fullmatch(rf"{PREFIX}-\d+-(sw|h\d+)", name):
            names.append(name)
    return names


def rate_bits_per_s(rate):
    """'1gbit' -> 1e9 (tc's units: bit, kbit, mbit, gbit; SI multiples)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)bit", rate.strip().lower())
    if not m:
        raise ValueError(f"rate must look like 1gbit / 500mbit, got {rate!r}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


class NetLab:
    def __init__(self, n, rate="1gbit", burst="256kb", latency="50ms", tag=None, host_rates=None):
        if n < 1 or n > 200:
            raise ValueError("1 <= n <= 200")
        self.n = n
        self.rate = rate
        self.burst = burst
        self.latency = latency
        self.capacity_bits_per_s = rate_bits_per_s(rate)
        host_rates = dict(host_rates or {})
        if any(not 0 <= i < n for i in host_rates):
            raise ValueError(f"host_rates names a host outside 0..{n - 1}")
        self.host_rates = [host_rates.get(i, rate) for i in range(n)]
        for r in self.host_rates:
            rate_bits_per_s(r)  # validates
        tag = tag if tag is not None else str(os.getpid())
        self.prefix = f"{PREFIX}-{tag}"
        self.switch = f"{self.prefix}-sw"
        self.hosts = [f"{self.prefix}-h{i}" for i in range(n)]
        self.subnet = 1 + (os.getpid() % 250)  # 10.213.<subnet>.0/24; private to these namespaces
        self.ifname = IFNAME
        self._created = []
        self._is_up = False

    # -- addressing -------------------------------------------------------------------------
    def addr(self, i):
        return f"10.213.{self.subnet}.{i + 1}"

    def rate_bits_per_s(self, i):
        """Host i's NIC rate in bit/s (each direction)."""
        return rate_bits_per_s(self.host_rates[i])

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", self.hosts[i]]

    # -- life cycle ------------------------------------------------------------------------
    def up(self):
        atexit.register(self.down)
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        self._is_up = True
        return self

    def _ns_add(self, name):
        _run(["ip", "netns", "add", name])
        self._created.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _tbf(self, ns, dev, rate):
        _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
              "rate", rate, "burst", self.burst, "latency", self.latency])

    def _build(self):
        self._ns_add(self.switch)
        sw = ["ip", "-n", self.switch]
        _run(sw + ["link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0"])
        _run(sw + ["link", "set", "br0", "up"])
        for i, host in enumerate(self.hosts):
            self._ns_add(host)
            port = f"p{i}"
            # Both ends are born inside the switch namespace (no name is ever used in the host's
            # namespace); then one end moves into the host and is renamed there.
            _run(sw + ["link", "add", port, "type", "veth", "peer", "name", f"t{i}"])
            _run(sw + ["link", "set", f"t{i}", "netns", host])
            _run(["ip", "-n", host, "link", "set", f"t{i}", "name", self.ifname])
            _run(sw + ["link", "set", port, "master", "br0"])
            _run(sw + ["link", "set", port, "up"])
            _run(["ip", "-n", host, "addr", "add", f"{self.addr(i)}/24", "dev", self.ifname])
            _run(["ip", "-n", host, "link", "set", self.ifname, "up"])
            self._tbf(host, self.ifname, self.host_rates[i])    # host egress
            self._tbf(self.switch, port, self.host_rates[i])    # switch port egress = host ingress
        # Wait (bounded) until every host reaches host 0: the bridge forwards at once with STP off,
        # but make it an observed fact rather than an assumption.
        for i in range(1, self.n):
            ok = False
            for _ in range(20):
                if _run(self.exec_prefix(i) + [sys.executable, "-c", _PROBE, self.addr(0)], check=False,
                        timeout=5).returncode == 0:
                    ok = True
                    break
            if not ok:
                raise RuntimeError(f"{self.hosts[i]} cannot reach {self.addr(0)} through the lab bridge")

    def down(self):
        """Deletes every namespace this lab made (the veths and bridge go with them). Idempotent."""
        while self._created:
            name = self._created.pop()
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._is_up = False

    def describe(self):
        return {"hosts": self.hosts, "switch": self.switch, "addrs": [self.addr(i) for i in range(self.n)],
                "ifname": self.ifname, "qdisc": f"tbf rate {self.rate} burst {self.burst} latency {self.latency}",
                "shaped": "each host's veth egress and its switch port's egress",
                "host_rates": list(self.host_rates)}

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def start_master(build, lab=None, timeout=15):
    """longhaul-master from `build` on host 0 of `lab` (on loopback without one), logging warnings
    only. Returns (process, "HOST:PORT") once it listens; the caller ends the process."""
    host = lab.addr(0) if lab else "127.0.0.1"
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        master = subprocess.Popen((lab.exec_prefix(0) if lab else []) + [
            os.path.join(build, "tools/longhaul-master/longhaul-master"), "--listen", f"{host}:0",
            "--port-file", port_file, "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if master.poll() is not None or time.monotonic() > deadline:
                master.kill()
                master.wait()
                raise RuntimeError("longhaul-master did not start" + (" in the lab" if lab else ""))
            time.sleep(0.02)
        return master, f"{host}:{int(open(port_file).read())}"


def install_signal_handlers():
    """SIGINT/SIGTERM raise SystemExit in the main thread so that `finally` blocks and atexit
    handlers (NetLab.down, child clean-up) run."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def down_cli(prefix=None):
    removed = []
    for name in list_namespaces():
        pid = int(name.split("-")[1])
        if (prefix is not None and name.startswith(prefix + "-")) or (prefix is None and not _pid_alive(pid)):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
            removed.append(name)
    return removed


def main(argv):
    import argparse
    import json
    p = argparse.ArgumentParser(description="network-namespace lab for longhaul benchmarks")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("n", type=int)
    up.add_argument("--rate", default="1gbit")
    dn = sub.add_parser("down")
    dn.add_argument("prefix", nargs="?")
    sub.add_parser("list")
    a = p.parse_args(argv)
    if a.cmd == "up":
        lab = NetLab(a.n, rate=a.rate)
        lab.up()
        atexit.unregister(lab.down)  # leave it up for manual use
        print(json.dumps(lab.describe()))
        print(f"run on host i: ip netns exec {lab.prefix}-h<i> CMD; tear down: "
              f"python3 {sys.argv[0]} down {lab.prefix}", file=sys.stderr)
    elif a.cmd == "down":
        for name in down_cli(a.prefix):
            print(f"deleted {name}")
    else:
        for name in list_namespaces():
            print(name)


if __name__ == "__main__":
    main(sys.argv[1:])
