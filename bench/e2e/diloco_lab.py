"""The shaped links of bench/run diloco's throughput passes: which lab carries them, where the
master and the peers live in it, and how long one sync takes across it (to size each pass).

Two labs, one interface (up, down, exec_prefix(i) and addr(i) of peer i, master_prefix(),
master_addr(), describe(), rate_bits, delay_ms):
- "wanlab" (default): the packet-level WAN lab (bench/e2e/wanlab.py, docs/wanlab.md). The master
  and every peer get a site of their own; every path between two sites, each direction, has the
  rate as its bottleneck and the one-way delay. A ring all-reduce sends each peer's bytes to one
  neighbour, so a per-path cap is the peer's upload for the data; it differs from a NIC cap only
  where a peer sends to several others at once (control traffic, state transfers).
- "tbf": bench/e2e/netlab.py, veth + bridge with tbf on every NIC in both directions. It cannot
  delay (this kernel has no netem); the master shares peer 0's namespace as before.
Imported by bench/e2e/diloco; no side effects on import.
"""
import atexit

import netlab
import wanlab

KINDS = ("wanlab", "tbf")
MASTER_SITE = "m"


def rate_mbit(rate):
    """'100mbit' -> 100.0 (the tc-style labels of diloco's RATES)."""
    return netlab.rate_bits_per_s(rate) / 1e6


def wanlab_sites(peers):
    """The master's site first, then peer i's site p<i>: peer i is site index i + 1."""
    return [MASTER_SITE] + [f"p{i}" for i in range(peers)]


def shaping_label(kind, delay_ms):
    """The short name of the shaping the JSON records (`shaping`)."""
    if kind == "tbf":
        return "tbf, no delay"
    return f"wanlab {delay_ms:g}ms one-way"


def sync_seconds(bytes_per_sync, rate_bits, delay_ms, peers):
    """A lower bound of one sync event's time on the shaped links: its bytes at the rate, plus
    one one-way delay per ring step (reduce-scatter and all-gather: 2 (N - 1) steps, each waiting
    for the previous one's chunk). Sizes the passes only; nothing is derived from it."""
    ring_steps = 2 * (peers - 1) if bytes_per_sync > 0 else 0
    return bytes_per_sync * 8 / rate_bits + ring_steps * delay_ms / 1e3


def pass_steps(shaped_s, step_s, bytes_per_sync, h, rate_bits, delay_ms, peers, min_steps=8):
    """Steps for a pass of about shaped_s seconds: the no-sync step time plus each step's share of
    a sync (every step for data-parallel, h = None; one per h steps otherwise); whole rounds."""
    per_step = step_s + sync_seconds(bytes_per_sync, rate_bits, delay_ms, peers) / (h or 1)
    steps = max(min_steps, int(shaped_s / per_step))
    if h:
        steps = max(2, round(steps / h)) * h
    return steps


class _Shaped:
    """What both labs share: peer i lives at lab index i + peer_offset, the master at index 0."""
    peer_offset = 0

    def down(self):
        self.lab.down()

    def exec_prefix(self, i):
        return self.lab.exec_prefix(i + self.peer_offset)

    def addr(self, i):
        return self.lab.addr(i + self.peer_offset)

    def master_prefix(self):
        return self.lab.exec_prefix(0)

    def master_addr(self):
        return self.lab.addr(0)


class WanShaped(_Shaped):
    """The WAN lab at one rate and delay; the master and the peers in sites of their own."""
    peer_offset = 1  # site 0 is the master's (wanlab_sites)

    def __init__(self, binary, peers, rate, delay_ms):
        self.rate_bits = netlab.rate_bits_per_s(rate)
        self.delay_ms = delay_ms
        self.rate = rate
        self.lab = wanlab.WanLab(binary, wanlab_sites(peers), latency_ms=delay_ms, rate_mbit=rate_mbit(rate))

    def up(self):
        atexit.register(self.down)  # the lab also ends with this process (PR_SET_PDEATHSIG)
        self.lab.up()
        return self

    def describe(self):
        cc = self.lab.sysctl(1, "net.ipv4.tcp_congestion_control")
        return (f"{shaping_label('wanlab', self.delay_ms)}: longhaul-wanem --site packet lab, every path "
                f"(each direction, between any two of the master and the peers) {rate_mbit(self.rate):g} Mbit/s "
                f"(the lab's default drop-tail queue, 50 ms at the rate) and {self.delay_ms:g} ms one-way "
                f"delay; congestion control {cc}")


class TbfShaped(_Shaped):
    """netlab's veth + bridge + tbf; no delay. The master shares peer 0's namespace."""

    def __init__(self, peers, rate):
        self.lab = netlab.NetLab(peers, rate=rate)
        self.rate_bits = netlab.rate_bits_per_s(rate)
        self.delay_ms = 0

    def up(self):
        self.lab.up()
        return self

    def describe(self):
        return (f"{shaping_label('tbf', 0)}: {self.lab.describe()['qdisc']} on every NIC, both directions "
                "(netlab.py; no netem on this kernel); the master in peer 0's namespace")


def make(kind, peers, rate, delay_ms, wanem_binary=None):
    if kind == "tbf":
        return TbfShaped(peers, rate)
    return WanShaped(wanem_binary or wanlab.default_binary(), peers, rate, delay_ms)
