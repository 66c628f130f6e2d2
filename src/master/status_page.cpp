// The master's status page: one self-contained HTML document (no external resources, so it works
// on a machine without internet access) that polls /api/status every second and draws members,
// groups, links, sync progress, events and a throughput plot from it. After each redraw the page
// records what it drew in data attributes (body[data-rendered], canvas[data-points] and
// canvas[data-ink]) so a headless browser can check it (StatusPage integration test).
#include "master/status_render.hpp"

namespace longhaul::master {

namespace {

constexpr char kPage[] = R"page(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>longhaul master</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#1d2330;background:#f6f7f9}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.cards{display:flex;gap:10px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 12px;min-width:110px}
.card b{display:block;font-size:18px}
table{border-collapse:collapse;background:#fff;width:100%;border:1px solid #dde1e7}
th,td{padding:4px 8px;border-bottom:1px solid #eef0f3;text-align:left;white-space:nowrap}
th{background:#eef1f5;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.node td{background:#f0f3f8;font-weight:600}
.mismatch{background:#ffd9d9;color:#a40000;font-weight:600}
.pending{color:#8a6d00} .waiting{color:#0a5ea8} .active{color:#137333}
.kind{border-radius:3px;padding:0 5px;font-size:11px;color:#fff;background:#6b7280}
.k-join{background:#137333}.k-leave{background:#0a5ea8}.k-lost{background:#b45309}
.k-evicted{background:#a40000}.k-abort{background:#7c2d12}.k-epoch{background:#4b5563}
.muted{color:#6b7280}
canvas{background:#fff;border:1px solid #dde1e7;width:100%;height:220px}
</style></head><body>
<h1>longhaul master</h1>
<div class="muted" id="sub">loading…</div>
<div class="cards" id="cards"></div>
<h2>Members <span class="muted">(grouped by node, then group; a peer without a node under its host)</span></h2>
<table id="members"></table>
<h2>Groups and ring order</h2><table id="groups"></table>
<h2>Sync engine progress <span class="muted">(τ: the round delay, docs/overlap.md; τ needed in red: the syncs take longer than τ steps)</span></h2>
<table id="engine"></table>
<h2>Data links <span class="muted">(as the peer at the near end measures them: TCP_INFO)</span></h2>
<table id="links"></table>
<h2>Throughput <span class="muted">(data bytes sent per second, all peers)</span></h2>
<canvas id="plot" width="1100" height="220"></canvas>
<h2>Recent events</h2><table id="events"></table>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
function bytes(n) {
  if (n == null) return "–";
  const u = ["B","KB","MB","GB","TB"]; let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : n.toFixed(0)) + " " + u[i];
}
const rate = (n) => n == null ? "–" : bytes(n) + "/s";
const secs = (t) => t == null ? "–" : t < 1 ? (t * 1000).toFixed(1) + " ms" : t.toFixed(2) + " s";
const time = (t) => new Date(t * 1000).toLocaleTimeString();
function row(cells, cls) {
  return "<tr" + (cls ? ' class="' + cls + '"' : "") + ">" + cells.map((c) =>
    typeof c === "object" && c !== null ? '<td class="' + (c.cls || "") + '">' + c.html + "</td>"
                                        : "<td>" + esc(c) + "</td>").join("") + "</tr>";
}
const num = (v) => ({cls: "num", html: esc(v)});
function head(cols) { return "<tr>" + cols.map((c) => "<th>" + esc(c) + "</th>").join("") + "</tr>"; }
function cards(s) {
  const active = s.peers.filter((p) => p.state !== "pending").length;
  const items = [["epoch", s.epoch], ["members", active + " / " + s.peers.length],
    ["groups", s.groups.length], ["data sent", bytes(s.bytes.data_sent)],
    ["state sync sent", bytes(s.bytes.state_sent)],
    ["throughput", rate(s.throughput.length ? s.throughput[s.throughput.length - 1][1] : 0)],
    ["outer rounds", s.engine.outer_rounds], ["inner steps", s.engine.inner_steps],
    ["τ (round delay)", s.engine.delay]];
  $("cards").innerHTML = items.map(([k, v]) => '<div class="card">' + esc(k) + "<b>" + esc(v) + "</b></div>").join("");
  $("sub").textContent = "up " + s.uptime_s.toFixed(0) + " s · " + s.connections + " connections · " +
    (s.round_in_progress ? "reconfiguring" : "stable") + (s.peers_pending ? " · peers pending" : "") +
    " · updated " + time(s.at);
}
function members(s) {
  let html = head(["peer", "group", "state", "ring pos", "address", "state rev", "state hash",
                   "data sent", "data received", "send rate", "report age"]);
  const byNode = new Map();
  for (const p of s.peers) { if (!byNode.has(p.node)) byNode.set(p.node, []); byNode.get(p.node).push(p); }
  for (const [node, peers] of [...byNode].sort()) {
    html += '<tr class="node"><td colspan="11">node ' + esc(node) + ' <span class="muted">(' +
            peers.length + " peers)</span></td></tr>";
    peers.sort((a, b) => a.group - b.group || a.id - b.id);
    for (const p of peers) {
      const st = p.stats, state = st && st.state;
      const mm = state && state.mismatch ? "mismatch" : "";
      html += row([num(p.id), num(p.group), {cls: p.state, html: p.state}, num(p.ring_position),
        p.address, {cls: "num " + mm, html: state ? state.revision : "–"},
        {cls: mm, html: state ? state.hash : "–"},
        num(st ? bytes(st.bytes.data_sent) : "–"), num(st ? bytes(st.bytes.data_received) : "–"),
        num(st ? rate(st.data_send_rate_bytes_per_s) : "–"),
        num(st ? st.age_s.toFixed(1) + " s" : "–")], "peer");
    }
  }
  $("members").innerHTML = html;
}
function groups(s) {
  $("groups").innerHTML = head(["group", "members", "active", "ring order", "state rev", "mismatches"]) +
    s.groups.map((g) => row([num(g.group), num(g.members), num(g.active), g.ring.join(" → "),
      num(g.state_revision == null ? "–" : g.state_revision),
      {cls: "num " + (g.state_mismatches ? "mismatch" : ""), html: g.state_mismatches}])).join("");
  engine(s);
}
// Per member: progress, then the overlap (docs/overlap.md): τ, the steps the last cycle needed
// (red when more than τ: the trainer waits for its rounds), τ's changes, and why: the member's
// last sync time and its compute time per step.
function engine(s) {
  const eng = s.peers.filter((p) => p.stats && p.stats.engine);
  $("engine").innerHTML = head(["peer", "inner step", "outer step", "participants", "bytes / sync",
                                "dropped", "time blocked", "τ", "τ needed", "τ changes", "sync time",
                                "step time"]) + (eng.length ? eng.map((p) => {
    const e = p.stats.engine, short = e.delay_needed > e.delay ? "mismatch" : "";
    return row([num(p.id), num(e.inner_steps), num(e.outer_rounds), num(e.last_round_participants),
      num(bytes(e.last_round_bytes)), num(e.rounds_dropped), num(e.blocked_s.toFixed(2) + " s"),
      num(e.delay), {cls: "num " + short, html: esc(e.delay_needed)}, num(e.delay_changes),
      num(secs(e.sync_time_s)), num(secs(e.step_time_s))], "engine");
  }).join("") : row([{cls: "muted", html: "no sync engine reports yet"}]));
}
function links(s) {
  $("links").innerHTML = head(["from", "to", "connections", "RTT", "delivery rate", "send rate",
                               "bytes acked", "bytes received", "retransmits"]) +
    s.links.map((l) => row([num(l.from), num(l.to), num(l.connections), num((l.rtt_us / 1000).toFixed(2) + " ms"),
      num(rate(l.delivery_rate_bytes_per_s)), num(rate(l.send_rate_bytes_per_s)), num(bytes(l.bytes_sent)),
      num(bytes(l.bytes_received)), num(l.retransmits)])).join("");
}
function events(s) {
  $("events").innerHTML = head(["time", "kind", "peer", "group", "epoch", "reason"]) +
    s.events.slice().reverse().slice(0, 60).map((e) => row([time(e.at),
      {html: '<span class="kind k-' + esc(e.kind) + '">' + esc(e.kind) + "</span>"},
      num(e.peer || "–"), num(e.kind === "epoch" ? "–" : e.group), num(e.epoch || "–"), e.reason])).join("");
}
function plot(s) {
  const c = $("plot"), g = c.getContext("2d"), pts = s.throughput, W = c.width, H = c.height, L = 70, B = 22;
  g.clearRect(0, 0, W, H);
  const max = Math.max(1, ...pts.map((p) => p[1])) * 1.1;
  const t0 = pts.length ? pts[0][0] : 0, t1 = pts.length ? pts[pts.length - 1][0] : 1;
  const x = (t) => L + (W - L - 10) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1), y = (v) => H - B - (H - B - 10) * v / max;
  g.strokeStyle = "#dde1e7"; g.fillStyle = "#6b7280"; g.font = "11px sans-serif"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4; g.beginPath(); g.moveTo(L, y(v)); g.lineTo(W - 10, y(v)); g.stroke();
    g.fillText(rate(v), 4, y(v) + 4);
  }
  if (pts.length) { g.fillText(time(t0), L, H - 6); g.fillText(time(t1), W - 80, H - 6); }
  g.strokeStyle = "#0a5ea8"; g.lineWidth = 2; g.beginPath();
  pts.forEach((p, i) => i ? g.lineTo(x(p[0]), y(p[1])) : g.moveTo(x(p[0]), y(p[1])));
  g.stroke();
  const d = g.getImageData(0, 0, W, H).data; let ink = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 2] > 150 && d[i] < 60) ink++;  // the line's blue
  c.dataset.points = pts.length; c.dataset.ink = ink;
}
async function refresh() {
  try {
    const s = await (await fetch("/api/status", {cache: "no-store"})).json();
    cards(s); members(s); groups(s); links(s); events(s); plot(s);
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  } catch (e) { $("sub").textContent = "cannot reach the master: " + e; }
}
refresh(); setInterval(refresh, 1000);
</script></body></html>
)page";

}  // namespace

const std::string& status_page_html() {
  static const std::string page = kPage;
  return page;
}

}  // namespace longhaul::master
