// The page `--status_port` serves at "/": one file, its style and script inline, nothing fetched
// from elsewhere. It reads /api/job once a second and draws a row per rank: its state, steps,
// step time with a chart of the recent ones, time in collectives, the last collective and how
// long the rank has been quiet; stragglers and quiet or stalled ranks are marked, and the hang
// report is shown when one fired.

#include "status/job_status.h"

namespace acc::launcher {

const std::string& status_page() {
  static const std::string page = R"PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>acc-launch job</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
  h1 { font-size: 1.3em; margin: 0 0 .3em; }
  #summary { color: #555; margin-bottom: 1em; }
  table { border-collapse: collapse; background: #fff; }
  th, td { padding: .35em .8em; border-bottom: 1px solid #ddd; text-align: right; }
  th { background: #eee; font-weight: 600; }
  td.state { text-align: left; font-weight: 600; }
  tr.running td.state { color: #1a7f37; }
  tr.starting td.state { color: #666; }
  tr.quiet td.state, tr.straggler td.ratio { color: #b35900; }
  tr.stalled td.state { color: #c62828; }
  tr.exited td.state { color: #888; }
  tr.straggler { background: #fff4e5; }
  td.last { text-align: left; font-family: monospace; }
  canvas { vertical-align: middle; }
  #hang { display: none; margin-top: 1.5em; }
  #hang pre { background: #fff; border: 1px solid #c62828; padding: 1em; overflow: auto; max-height: 30em; }
  #error { color: #c62828; }
</style>
</head>
<body>
<h1>acc-launch job <span id="job"></span></h1>
<div id="summary">connecting&hellip;</div>
<div id="error"></div>
<table>
  <thead><tr><th>rank</th><th>node</th><th>local</th><th>state</th><th>steps</th><th>step time</th>
    <th>recent step times</th><th>in collectives</th><th>straggler ratio</th>
    <th>last collective</th><th>quiet</th><th>GPU busy</th></tr></thead>
  <tbody id="ranks"></tbody>
</table>
<div id="hang"><h2>Hang report</h2><pre id="hang-report"></pre></div>
<script>
"use strict";
function seconds(v) {
  if (v === null || v === undefined) return "\u2013";
  return v < 1 ? (v * 1000).toFixed(1) + " ms" : v.toFixed(2) + " s";
}
function chart(canvas, values) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
  g.clearRect(0, 0, w, h);
  if (values.length < 2) return;
  const top = Math.max(...values) * 1.1 || 1;
  g.strokeStyle = "#3367d6";
  g.lineWidth = 1.5;
  g.beginPath();
  values.forEach((v, i) => {
    const x = i * (w - 2) / (values.length - 1) + 1, y = h - 1 - v / top * (h - 2);
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
}
function row(rank) {
  let tr = document.getElementById("rank-" + rank.rank);
  if (!tr) {
    tr = document.createElement("tr");
    tr.id = "rank-" + rank.rank;
    tr.innerHTML = "<td class=rank></td><td class=node></td><td class=local></td><td class=state></td>" +
      "<td class=steps></td><td class=step></td><td><canvas width=160 height=28></canvas></td>" +
      "<td class=coll></td><td class=ratio></td><td class=last></td><td class=quiet></td><td class=gpu></td>";
    document.getElementById("ranks").appendChild(tr);
  }
  return tr;
}
function show(job) {
  document.getElementById("error").textContent = "";
  document.getElementById("job").textContent = job.job_id;
  document.getElementById("summary").textContent =
    job.host + ", node " + job.node_rank + " of " + job.nnodes +
    (job.nodes.length > 1 ? " (showing " + job.nodes.length + " nodes)" : "") + " \u00b7 world size " +
    job.world_size + " \u00b7 " + job.phase + " \u00b7 attempt " + job.attempt + ", " +
    job.restarts + " restart(s) \u00b7 " + job.workers_alive + " worker(s) alive";
  for (const r of job.ranks) {
    const tr = row(r);
    tr.className = r.state + (r.straggler ? " straggler" : "");
    const cell = c => tr.querySelector("." + c);
    cell("rank").textContent = r.rank;
    cell("node").textContent = r.node + " (" + r.host + ")";
    cell("local").textContent = r.local_rank;
    cell("state").textContent = r.state + (r.straggler ? " (straggler)" : "");
    cell("steps").textContent = r.steps;
    cell("step").textContent = seconds(r.step_seconds);
    cell("coll").textContent = r.collectives + " (" + seconds(r.collective_seconds) + ")";
    cell("ratio").textContent = r.straggler_ratio === null ? "\u2013" : r.straggler_ratio.toFixed(2);
    cell("last").textContent = (r.last_collective || "\u2013") + (r.in_collective ? " \u2026" : "");
    cell("quiet").textContent = seconds(r.seconds_since_progress);
    cell("gpu").textContent = r.gpu_busy === null ? "\u2013" : (100 * r.gpu_busy).toFixed(0) + "%";
    chart(tr.querySelector("canvas"), r.recent_step_seconds);
  }
  const hang = document.getElementById("hang");
  hang.style.display = job.hang_report ? "block" : "none";
  document.getElementById("hang-report").textContent = job.hang_report;
}
async function refresh() {
  try {
    const reply = await fetch("/api/job" + location.search, {cache: "no-store"});
    show(await reply.json());
  } catch (e) {
    document.getElementById("error").textContent = "the launcher does not answer (the job ended?)";
  }
  setTimeout(refresh, 1000);
}
refresh();
</script>
</body>
</html>
)PAGE";
  return page;
}

}  // namespace acc::launcher
