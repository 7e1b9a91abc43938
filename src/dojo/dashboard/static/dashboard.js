// dojo dashboard: polls the JSON API every REFRESH ms and draws what it returns.
// Everything a run wrote (model output included) reaches the DOM as text, never as HTML.
"use strict";

const REFRESH = 2000;
const params = new URLSearchParams(location.search);
if (params.get("token")) sessionStorage.setItem("dojo-token", params.get("token"));
const TOKEN = sessionStorage.getItem("dojo-token");
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"];

const state = { overview: null, selected: new Set([0]), charts: {}, episodeKey: null, tick: 0 };

// What each chart draws: from which of a run's curve sets, which keys (or a map of keys).
const CHARTS = [
  { id: "reward", title: "Reward (mean of scored episodes)", set: "by_episode", keys: ["reward"] },
  { id: "pass_rate", share: true, title: "Pass rate", set: "by_episode", keys: ["pass_rate"] },
  { id: "pass_rate_by_level", share: true, title: "Pass rate by difficulty level", set: "by_episode", map: "pass_rate_by_level" },
  { id: "hack_rate", share: true, title: "Hack rate", set: "by_episode", keys: ["hack_rate"] },
  { id: "infra_failure_rate", share: true, title: "Infrastructure failure rate", set: "by_episode", keys: ["infra_failure_rate"] },
  { id: "completion_tokens", title: "Response length (completion tokens)", set: "by_episode", keys: ["completion_tokens"] },
  { id: "turns", title: "Turns and tool calls per episode", set: "by_episode", keys: ["turns", "tool_calls"] },
  { id: "time_split", share: true, title: "Episode time: policy / tools / grading (share)", set: "by_episode",
    keys: ["policy_share", "tool_share", "grading_share"] },
  { id: "difficulty", title: "Difficulty of the tasks served (mean)", set: "by_episode", keys: ["difficulty"] },
  { id: "throughput", title: "Throughput (episodes/s)", set: "by_time", keys: ["episodes_per_second"], time: true },
  { id: "idle", title: "Idle: share of time with no episode in flight", set: "by_time", keys: ["idle_share"], time: true,
    share: true },
  { id: "step_reward", title: "Training: reward and pass rate by step", set: "by_step", keys: ["reward", "pass_rate"] },
  { id: "curriculum", title: "Training: curriculum level by step", set: "by_step", keys: ["curriculum_level"] },
  { id: "step_time", title: "Training: seconds per step", set: "by_step", keys: ["step_time"] },
  { id: "eval", title: "Held-out evaluation by step", set: "eval", keys: ["mean_reward", "greedy_pass"] },
  { id: "agreement", title: "Judge agreement with people", set: "by_step", keys: ["judge/agreement"] },
];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const headers = TOKEN ? { Authorization: "Bearer " + TOKEN } : {};
  const response = await fetch(path, { headers });
  if (!response.ok) throw new Error(path + ": " + response.status + " " + (await response.text()));
  return response.json();
}

const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : typeof v === "number" ? +v.toFixed(digits) : v);

function flagNodes(flags) {
  return (flags || []).map(f => el("span", { class: "flag " + (f.startsWith("hack:") ? "hack" : f.startsWith("suspicious:") ? "suspicious" : "") }, f));
}

function table(node, head, rows) {
  node.replaceChildren(el("tr", {}, head.map(h => el("th", {}, h))), ...rows.map(r => el("tr", {}, r.map(c => el("td", {}, c)))));
}

function episodeLink(run, id, text) {
  return el("a", { href: `#episode/${run}/${encodeURIComponent(id)}` }, text || id);
}

// -- header: status, runs to compare, firing alerts ---------------------------------------------
function renderHeader(o) {
  const total = o.runs.reduce((n, r) => n + r.episodes, 0);
  document.getElementById("status").textContent =
    `${o.runs.length} run(s), ${total} episodes · refreshed ${new Date(o.refreshed_at * 1000).toLocaleTimeString()}`;
  const runs = document.getElementById("runs");
  runs.replaceChildren(...o.runs.map((r, i) => {
    const box = el("input", { type: "checkbox", "data-run": i });
    box.checked = state.selected.has(i);
    box.addEventListener("change", () => { box.checked ? state.selected.add(i) : state.selected.delete(i); refreshTab(); });
    const figures = `${r.episodes} episodes, reward ${fmt(r.mean_reward)}, pass ${fmt(r.pass_rate)}, hack ${fmt(r.hack_rate)}` +
      (r.error ? ` · ${r.error}` : "") + (r.waiting ? ` · ${r.waiting}` : "");
    return el("label", { style: `color:${COLORS[i % COLORS.length]}` }, box, ` ${r.name}: ${figures}`);
  }));
  const firing = document.getElementById("firing");
  firing.replaceChildren(...o.alerts.firing.map(a => el("div", { class: "alert " + a.severity, "data-rule": a.rule },
    `⚠ ${a.rule}: ${a.message}`)));
}

// -- curves ----------------------------------------------------------------------------------------
function seriesOf(spec, curves) {
  const set = curves[spec.set] || {};
  const xKey = spec.set === "by_time" ? "t" : spec.set === "by_episode" ? "x" : "step";
  const x = set[xKey] || [];
  const keys = spec.map ? Object.keys(set[spec.map] || {}) : spec.keys.filter(k => k in set);
  const ys = keys.map(k => (spec.map ? set[spec.map][k] : set[k]));
  return { x, keys, ys };
}

async function renderCurves() {
  const runs = [...state.selected].filter(i => state.overview && i < state.overview.runs.length).sort();
  const curves = await Promise.all(runs.map(i => api(`api/runs/${i}/curves`)));
  const container = document.getElementById("charts");
  for (const spec of CHARTS) {
    const tables = [], labels = [], colors = [];
    let points = 0, last = "";
    runs.forEach((run, r) => {
      const { x, keys, ys } = seriesOf(spec, curves[r]);
      if (!x.length || !keys.length) return;
      tables.push([x, ...ys]);
      keys.forEach((k, j) => {
        labels.push(runs.length > 1 ? `${state.overview.runs[run].name}: ${k}` : k);
        colors.push(COLORS[(run * 3 + j) % COLORS.length]);
      });
      if (r === 0) {
        points = ys.reduce((n, y) => Math.max(n, y.filter(v => v !== null).length), 0);
        last = String(x[x.length - 1]);
      }
    });
    let box = document.getElementById("chart-" + spec.id);
    if (!box) {
      box = el("div", { class: "chart", id: "chart-" + spec.id, "data-metric": spec.id }, el("h3", {}, spec.title));
      container.append(box);
    }
    box.dataset.points = points;
    box.dataset.last = last;  // the x of the last point: episodes, step, or time
    const key = labels.join("|");
    const old = state.charts[spec.id];
    if (!tables.length) {
      if (old) { old.plot.destroy(); delete state.charts[spec.id]; }
      if (!box.querySelector(".empty")) box.append(el("p", { class: "empty" }, "no data yet"));
      continue;
    }
    box.querySelector(".empty")?.remove();
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    if (old && old.key === key) { old.plot.setData(data); continue; }
    if (old) old.plot.destroy();
    const plot = new uPlot({
      width: Math.max(300, box.clientWidth - 12), height: 220,
      scales: { x: { time: !!spec.time }, ...(spec.share ? { y: { range: [0, 1] } } : {}) },
      series: [{ label: spec.time ? "time" : spec.set === "by_episode" ? "episodes" : "step" },
        ...labels.map((label, j) => ({ label, stroke: colors[j], width: 1.5, spanGaps: true }))],
      axes: [{}, {}],
    }, data, box);
    state.charts[spec.id] = { plot, key };
  }
}

// -- slowest ---------------------------------------------------------------------------------------
async function renderSlowest() {
  const run = [...state.selected][0] ?? 0;
  const s = await api(`api/runs/${run}/slowest?n=20`);
  table(document.getElementById("slow-episodes"), ["seconds", "episode", "task", "status", "verdict", "reward", "turns"],
    s.episodes.map(e => [fmt(e.wall_seconds, 2), episodeLink(run, e.episode_id), e.task_id, e.status, e.verdict, fmt(e.reward), e.turns]));
  table(document.getElementById("slow-groups"), ["seconds", "group", "task", "episodes", "passed", "slowest episode"],
    s.groups.map(g => [fmt(g.wall_seconds, 2), g.group_id, g.task_id, g.episodes, g.passed, episodeLink(run, g.slowest_episode)]));
}

// -- search and the trajectory viewer ----------------------------------------------------------------
async function renderSearch() {
  const run = [...state.selected][0] ?? 0;
  const form = new FormData(document.getElementById("search"));
  const query = new URLSearchParams([...form.entries()].filter(([, v]) => v)).toString();
  const found = await api(`api/runs/${run}/episodes?limit=200&${query}`);
  table(document.getElementById("found"), ["episode", "task", "status", "verdict", "reward", "flags", "turns", "tool calls", "seconds"],
    found.map(e => [episodeLink(run, e.episode_id), e.task_id, e.status, e.verdict, fmt(e.reward), el("span", {}, flagNodes(e.flags)),
      e.turns, e.tool_calls ?? "–", fmt(e.wall_seconds, 2)]));
}

function content(message) {
  const c = message.content;
  if (typeof c === "string") return c;
  return JSON.stringify(c, null, 1);
}

async function renderEpisode(run, id) {
  const box = document.getElementById("episode");
  if (state.episodeKey === run + "/" + id) return;  // an episode never changes once written
  const e = await api(`api/runs/${run}/episodes/${encodeURIComponent(id)}`);
  state.episodeKey = run + "/" + id;
  const head = el("div", {},
    el("h2", {}, `Episode ${e.episode_id}`),
    el("p", {}, `task ${e.task_id} · group ${e.group_id} · status ${e.status} · verdict ${e.verdict ?? "–"} · `,
      el("span", { class: "reward" }, `reward ${fmt(e.reward)}`), ` · ${e.passed ?? "–"}/${e.total ?? "–"} tests · `,
      `${fmt(e.wall_seconds, 2)} s (policy ${fmt(e.policy_seconds, 2)}, tools ${fmt(e.tool_seconds, 2)}, grading ${fmt(e.grade_seconds, 2)})`),
    el("p", { id: "episode-flags" }, "flags: ", flagNodes(e.flags), (e.flags || []).length ? "" : "none"),
    e.error ? el("p", {}, "error: " + e.error) : null);
  const turns = (e.turns || []).map((t, i) => el("div", { class: "turn", "data-turn": i },
    el("div", {}, el("b", {}, `turn ${i + 1}`), ` · policy ${fmt(t.policy_seconds, 2)} s · tools ${fmt(t.tool_seconds, 2)} s`,
      t.reward ? el("span", { class: "reward" }, ` · turn reward ${fmt(t.reward.total)}`) : (e.turn_rewards && e.turn_rewards[i] !== null && e.turn_rewards[i] !== undefined ? ` · turn reward ${fmt(e.turn_rewards[i])}` : "")),
    el("pre", {}, (t.completion && t.completion.text) || ""),
    (t.tool_results || []).map(r => el("div", { class: "tool-call" },
      el("div", {}, el("b", { class: "tool-name" }, r.call.name), " ", JSON.stringify(r.call.arguments),
        r.verdict ? ` → ${r.verdict}` : "", r.exit_code !== null && r.exit_code !== undefined ? ` (exit ${r.exit_code})` : ""),
      el("pre", { class: "observation" }, r.observation)))));
  const cases = JSON.parse(e.cases || "[]");
  const graded = el("div", {}, el("h3", {}, "Graded answer"), el("pre", { id: "final" }, e.final ?? "(none)"),
    el("h3", {}, "Reward components"), el("pre", {}, JSON.stringify(e.components || {}, null, 1)),
    el("h3", {}, `Tests (${cases.length})`),
    el("div", {}, cases.map(c => el("div", { class: "case " + (c.passed ? "passed" : "failed") },
      `${c.passed ? "✓" : "✗"} test ${c.index}${c.detail ? ": " + c.detail : ""}`))));
  const messages = el("div", {}, el("h3", {}, "Conversation"), (e.messages || []).map(m =>
    el("div", { class: "message" }, el("span", { class: "role" }, m.role), el("pre", {}, content(m)))));
  box.replaceChildren(head, el("h3", {}, `Turns (${(e.turns || []).length})`), ...turns, graded, messages);
}

// -- sandboxes and alerts ----------------------------------------------------------------------------
function renderSandboxes(o) {
  const rows = [];
  for (const s of o.services) {
    rows.push([s.url, s.error ? "unreachable: " + s.error : "up",
      s.admitted !== undefined ? Math.max(0, s.admitted - (s.queue_depth || 0)) : "–", fmt(s.queue_depth, 0),
      fmt(s.runs_per_second, 1), fmt(s.p50_seconds), fmt(s.p99_seconds), fmt(s.error_rate), fmt(s.slot_restarts, 0)]);
    for (const n of s.nodes || []) {  // a fleet's nodes, behind this gateway
      rows.push([el("span", { class: "fleet-node" }, `  ↳ node ${n.node} ${n.address || ""}`), n.state || "–",
        `${fmt(n.outstanding, 0)} of ${fmt(n.slots, 0)}`, fmt(n.queue_depth, 0), fmt(n.runs_per_second, 1), "", "", "", ""]);
    }
  }
  table(document.getElementById("services"), ["service / node", "state", "slots busy", "queue", "runs/s", "p50 s", "p99 s", "errors/run", "restarts"], rows);
  document.getElementById("review").textContent = o.review
    ? `judge agreement with people: ${fmt(o.review["judge/agreement"])} on ${o.review["judge/agreement_items"]} labelled item(s)`
    : "";
}

function renderAlerts(o) {
  const a = o.alerts;
  table(document.getElementById("alerts-firing"), ["since", "rule", "severity", "message"],
    a.firing.map(x => [new Date(x.since * 1000).toLocaleTimeString(), x.rule, x.severity, x.message]));
  table(document.getElementById("alerts-history"), ["when", "state", "rule", "message"],
    a.history.slice().reverse().map(x => [new Date(x.since * 1000).toLocaleTimeString(), x.state, x.rule, x.message]));
  table(document.getElementById("alerts-rules"), ["rule", "metric", "fires when", "window (groups)", "severity"],
    a.rules.map(r => [r.name, r.metric, r.above !== null ? `> ${r.above}` : `< ${r.below}`, r.window_groups, r.severity]));
}

// -- the loop ------------------------------------------------------------------------------------------
function currentTab() {
  const hash = location.hash.replace(/^#/, "") || "curves";
  return hash.startsWith("episode/") ? "episode" : hash;
}

async function refreshTab() {
  const tab = currentTab();
  for (const section of document.querySelectorAll(".tab")) section.hidden = section.id !== "tab-" + tab;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.tab === tab);
  const o = state.overview;
  if (!o) return;
  if (tab === "curves") await renderCurves();
  else if (tab === "slowest") await renderSlowest();
  else if (tab === "episodes") await renderSearch();
  else if (tab === "sandboxes") renderSandboxes(o);
  else if (tab === "alerts") renderAlerts(o);
  else if (tab === "episode") {
    const [, run, id] = location.hash.replace(/^#/, "").split("/");
    await renderEpisode(Number(run), decodeURIComponent(id));
  }
}

async function poll() {
  try {
    state.overview = await api("api/overview");
    renderHeader(state.overview);
    await refreshTab();
    state.tick++;
    document.body.dataset.tick = state.tick;
  } catch (err) {
    document.getElementById("status").textContent = "cannot reach the dashboard: " + err.message;
  }
}

document.getElementById("search").addEventListener("submit", ev => { ev.preventDefault(); location.hash = "episodes"; renderSearch(); });
window.addEventListener("hashchange", () => refreshTab());
poll();
setInterval(poll, REFRESH);
