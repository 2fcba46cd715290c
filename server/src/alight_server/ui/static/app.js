// The alight dashboard: hash routes over the server's admin JSON API (/api, /api/ui).
// The admin key is asked once and kept in sessionStorage (this tab only), sent as a bearer header,
// never put in a URL. Everything an agent or a model produced is inserted as text, never as HTML.
"use strict";

const KEY = "alight.adminKey";
const app = document.getElementById("app");
let timer = null; // the live refresh of the page on screen

// ---- DOM: h("td", {class: "x"}, "text", node, ...) — strings become text nodes, never markup.
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const link = (href, text) => h("a", { href }, text);
function num(v, digits = 3) {
  if (v === null || v === undefined) return "–";
  const a = Math.abs(v);
  if (a !== 0 && a < Math.pow(10, -digits)) return (+v).toExponential(1); // a tiny loss is not "-0"
  return digits === 0 ? String(Math.round(v)) : String(+(+v).toFixed(digits));
}
const json = (v) => (typeof v === "string" ? v : JSON.stringify(v, null, 2));
function enc(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

// ---- API
class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}
// A body makes it a POST of that JSON (a review decision); every other call reads.
async function api(path, payload) {
  const key = sessionStorage.getItem(KEY);
  if (!key) throw new ApiError(401, "no admin key");
  const headers = { Authorization: `Bearer ${key}` };
  const init = payload === undefined ? { headers, cache: "no-store" }
    : { method: "POST", headers: { ...headers, "Content-Type": "application/json" }, body: JSON.stringify(payload) };
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(response.status, (body.error && body.error.message) || response.statusText);
  return body;
}

// ---- routing
function route() {
  clearInterval(timer);
  timer = null;
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  document.getElementById("logout").hidden = !sessionStorage.getItem(KEY);
  if (!sessionStorage.getItem(KEY)) return login();
  const page =
    parts[0] === "run" ? () => runPage(parts[1]) :
    parts[0] === "rollouts" ? () => rolloutsPage(params) :
    parts[0] === "rollout" ? () => rolloutPage(parts[1], params) :
    parts[0] === "check" ? () => checkPage(parts[1]) :
    parts[0] === "gateway" ? () => gatewayPage() :
    parts[0] === "reviews" ? () => reviewsPage() :
    () => runsPage();
  show(page);
}
async function show(page) {
  try {
    app.replaceChildren(await page());
    app.dataset.route = location.hash; // tells a waiting reader (a browser test) which route is on screen
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      sessionStorage.removeItem(KEY);
      return login("That key was refused: " + err.message);
    }
    app.replaceChildren(h("p", { class: "error" }, `Error: ${err.message}`));
    return false;
  }
}
async function refresh(page) {
  try { app.replaceChildren(await page()); } catch (err) { /* keep what is on screen; the next tick retries */ }
}
window.addEventListener("hashchange", route);
document.getElementById("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); route(); });

function login(message) {
  const input = h("input", { type: "password", id: "admin-key", autocomplete: "off", placeholder: "alk_…", size: 48 });
  const form = h("form", { class: "login", onsubmit: (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    route();
  } },
    h("h1", {}, "Admin key"),
    h("p", {}, "The key `alight serve` printed (or ALIGHT_ADMIN_KEY), or a viewer key, which shows redacted copies only, or a reviewer key, which also decides the review queue. It stays in this browser tab's session only."),
    message ? h("p", { class: "error" }, message) : null,
    input, " ", h("button", { type: "submit" }, "Open"));
  app.replaceChildren(form);
  input.focus();
}

// ---- runs
async function runsPage() {
  const { runs } = await api("/api/runs");
  const rows = runs.map((r) => h("tr", {},
    h("td", {}, link(`#/run/${encodeURIComponent(r.id)}`, r.id)),
    h("td", {}, h("span", { class: `state ${r.status}` }, r.status)),
    h("td", {}, String(r.config.model ?? "")),
    h("td", { class: "policies" }, runPolicies(r.config)),
    h("td", { class: "num" }, `${r.step ?? "–"} / ${r.steps_planned ?? "?"}`),
    h("td", {}, new Date(r.created_at).toLocaleString()),
    h("td", {}, new Date(r.updated_at).toLocaleString())));
  return h("section", {}, h("h1", {}, "Training runs"),
    runs.length ? table(["run", "status", "model", "policies", "step", "started", "last report"], rows)
      : h("p", { class: "muted" }, "No run has reported to this server yet (`alight train` reports each step)."));
}

// The policies a run trains, each a chip in its colour; a frozen one (trainable: false) says so.
function runPolicies(config) {
  const order = Policies.configured(config);
  return order.flatMap((name) => [Policies.chip(name, order, config.policies[name]?.trainable === false ? "(frozen)" : ""), " "]);
}

function table(headers, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))), h("tbody", {}, rows));
}

const SUITE = ["regression suite: capability", "regression suite: safety (share, per rollout)"];
const CURVES = [
  ["train reward (mean, 1 sd band)", (m) => [["reward", m["train/reward_mean"], m["train/reward_std"]]]],
  // What a success costs, beside what it earns (alight/cost.py; money only with `prices:` in the config).
  ["cost in USD (per success, step total)", (m) => [["per success", m["cost/usd_per_success"]], ["per accepted patch", m["cost/usd_per_accepted_patch"]], ["step total", m["cost/usd"]]], { needs: "cost/usd" }],
  ["cost in tokens (per success, step total)", (m) => [["per success", m["cost/tokens_per_success"]], ["per accepted patch", m["cost/tokens_per_accepted_patch"]],
    ["step total", m["cost/prompt_tokens"] === undefined ? undefined : m["cost/prompt_tokens"] + m["cost/completion_tokens"]]], { needs: "cost/prompt_tokens" }],
  ["validation mean reward (± 2 SE, clustered by task)", null, { name: "val" }],
  // The frozen regression suite (trainer/run/regression_suite.py), on the steps it ran: capability beside safety, one row.
  [SUITE[0], (m) => [["success", m["regression/success"]], ["mean reward", m["regression/mean_reward"]]], { needs: "regression/success" }],
  [SUITE[1], (m) => [["gate violations", m["regression/violation_share"]], ["review flags", m["regression/flag_share"]],
    ["canary reads / rollout", m["regression/canary_reads_per_rollout"]], ["egress attempts / rollout", m["regression/egress_attempts_per_rollout"]]], { needs: "regression/success" }],
  ["loss", (m) => [["loss", m["train/loss"]]]],
  ["KL (approx)", (m) => [["kl", m["train/approx_kl"]]]],
  ["clip fraction", (m) => [["clip", m["train/clip_fraction"]]]],
  ["tokens / s", (m) => [["tokens/s", m["perf/tokens_per_s"]]]],
  ["phase times (s)", (m) => [["rollouts", m["time/rollouts_s"]], ["train", m["time/train_s"]], ["sync", m["time/sync_s"]], ["val", m["time/val_s"]]]],
  // A rising violation share is the earliest sign that a policy has found a hole (docs/security.md#review-flags).
  ["integrity (share)", (m) => [["violations", m["integrity/violation_share"]], ["review flags", m["integrity/flag_share"]], ["audits rejected", m["integrity/audit_rejected"]]]],
  ["quarantined rollouts", (m) => [["pending review", m["integrity/quarantined"]]]],
];

// the run's, however many policies it trains
const RUN_WIDE = [...SUITE, "cost in USD (per success, step total)", "cost in tokens (per success, step total)", "tokens / s", "phase times (s)", "integrity (share)", "quarantined rollouts"];

// specs: CURVES, or Policies.curves for a several-policy run. A pick returns [name, value, std?, colour?] per series.
function curves(runId, steps, validation, specs) {
  const onPoint = (step) => { location.hash = `#/rollouts${enc({ run: runId, step, mode: "train" })}`; };
  return specs.map(([title, pick, val]) => {
    if (val) {
      const { name, color } = val;
      const points = validation.map((v) => [v.step, v.mean]);
      const band = validation.map((v) => [v.step, v.low, v.high]);
      const onVal = (step) => { location.hash = `#/rollouts${enc({ run: runId, step, mode: "val" })}`; };
      const series = (points.length ? [{ name, points, band, color }] : []).concat(pick ? stepSeries(steps, pick) : []);
      return Charts.line({ title, series, onPoint: onVal });
    }
    return Charts.line({ title, series: stepSeries(steps, pick), onPoint });
  });
}

// The charts titled `titles` in one full-width row of their own, where the first of them was: read side by side.
function sideBySide(charts, titles) {
  const pair = charts.filter((c) => titles.includes(c.dataset.title));
  if (pair.length < 2) return charts;
  const rest = charts.filter((c) => !pair.includes(c));
  rest.splice(charts.indexOf(pair[0]), 0, h("div", { class: "chart-pair" }, pair));
  return rest;
}

// A pick's series over the steps, in the order the pick lists them (whichever step has which).
function stepSeries(steps, pick) {
  const series = {};
  for (const s of steps) {
    for (const [name, v, sd, color] of pick(s.metrics)) {
      if (v === undefined) continue;
      const entry = (series[name] = series[name] || { name, points: [], band: [], color });
      entry.points.push([s.step, v]);
      if (sd !== undefined) entry.band.push([s.step, v - sd, v + sd]);
    }
  }
  return pick({}).map(([name]) => name).filter((name) => series[name]).map((name) => series[name]);
}

// Capture health rebuilds every step's samples on the server: the live refresh asks for it once a minute.
const healthCache = new Map();
async function runHealth(runId) {
  const cached = healthCache.get(runId);
  if (cached && Date.now() - cached.at < 60000) return cached.health;
  const health = await api(`/api/ui/runs/${encodeURIComponent(runId)}/health`).catch((err) => ({ error: err.message }));
  healthCache.set(runId, { at: Date.now(), health });
  return health;
}

async function runPage(runId) {
  const id = encodeURIComponent(runId);
  const [{ run, steps, validation }, health] = await Promise.all([api(`/api/ui/runs/${id}/curves`), runHealth(runId)]);
  const page = () => runPage(runId);
  if (run.status === "running" && !timer) setTimeout(() => { if (!timer) timer = setInterval(() => refresh(page), 5000); });
  const order = Policies.configured(run.config);
  const names = [...new Set([...order, ...Policies.inMetrics(steps, order)])];
  // A chart that `needs` a metric (cost) is drawn for runs that report it: not for a run from before it, nor money unpriced.
  const shown = CURVES.filter(([, , opts]) => !opts?.needs || steps.some((s) => s.metrics[opts.needs] !== undefined))
    .map(([title, pick, opts]) => [title, pick, opts?.needs ? undefined : opts]);
  const specs = names.length ? Policies.curves(names, order, steps, shown.filter(([t]) => RUN_WIDE.includes(t))) : shown;
  const stepRows = steps.map((s) => {
    const m = s.metrics, train = s.step > 0;
    return h("tr", {},
      h("td", { class: "num" }, String(s.step)),
      h("td", { class: "num" }, train ? `${num(m["train/reward_mean"])} sd ${num(m["train/reward_std"])}` : "–"),
      h("td", { class: "num" }, num(m["val/score"])),
      h("td", { class: "num" }, num(m["train/loss"], 4)),
      h("td", { class: "num" }, num(m["train/groups"], 0)),
      h("td", { class: "num" }, num(m["train/uniform_groups"], 0)),
      names.length ? h("td", { class: "own-versions" }, names.filter((n) => Policies.metric(m, n, "policy_version") !== undefined)
        .flatMap((n) => [Policies.chip(n, order, `v${num(Policies.metric(m, n, "policy_version"), 0)}`), " "])) : null,
      h("td", {}, train ? link(`#/rollouts${enc({ run: runId, step: s.step, mode: "train" })}`, "groups") : null,
        " ", m["val/score"] !== undefined ? link(`#/rollouts${enc({ run: runId, step: s.step, mode: "val" })}`, "validation") : null));
  });
  return h("section", {},
    h("h1", {}, `Run ${run.id} `, h("span", { class: `state ${run.status}` }, run.status)),
    h("p", {}, `step ${run.step ?? "–"} of ${run.steps_planned ?? "?"} · model ${run.config.model ?? "?"} · `,
      link(`#/rollouts${enc({ run: run.id })}`, "all rollouts"),
      run.config.offline ? [" · ", link(`#/check/${encodeURIComponent(run.id)}`, "check report")] : null,
      run.status === "running" ? h("span", { class: "live" }, " · live") : null),
    Policies.legend(names, order, "run-policies"),
    h("div", { class: "charts" }, sideBySide(curves(run.id, steps, validation, specs), SUITE)),
    h("h2", {}, "Steps"),
    table(["step", "train reward (mean, sd)", "val mean reward", "loss", "groups", "equal-reward groups", names.length ? "own versions" : null, ""]
      .filter((x) => x !== null), stepRows, { id: "steps" }),
    h("h2", {}, "Capture health"),
    healthTable(run.id, health, order),
    h("h2", {}, "Config"),
    h("details", {}, h("summary", {}, "the run's config, as its trainer reported it (secrets hidden)"), h("pre", {}, json(run.config))));
}

function counts(obj) {
  const entries = Object.entries(obj || {}).filter(([, v]) => v);
  return entries.length ? entries.map(([k, v]) => `${k} ${v}`).join(", ") : "0";
}

function healthTable(runId, health, order) {
  if (health.error) return h("p", { class: "error" }, health.error);
  const rows = health.steps.flatMap((s) => [h("tr", { "data-step": s.step },
    h("td", { class: "num" }, link(`#/rollouts${enc({ run: runId, step: s.step, mode: "train" })}`, String(s.step))),
    h("td", { class: "num", "data-k": "rollouts" }, String(s.rollouts)),
    h("td", { "data-k": "failures" }, counts(s.attempt_failures)),
    h("td", { class: "num", "data-k": "calls" }, `${s.calls_used}/${s.calls}`),
    h("td", { class: "num", "data-k": "merged_rows" }, String(s.merged_rows)),
    h("td", { class: "num", "data-k": "single_call_rows" }, String(s.single_call_rows)),
    h("td", { "data-k": "breaks" }, counts(s.breaks)),
    h("td", { class: "num", "data-k": "logprob_mismatches" }, String(s.logprob_mismatches)),
    h("td", { "data-k": "flagged" }, counts(s.flagged_calls)),
    h("td", { class: "num", "data-k": "truncated_calls" }, String(s.truncated_calls)),
    h("td", { "data-k": "dropped_rollouts" }, counts(s.dropped_rollouts)),
    h("td", { "data-k": "dropped" }, counts(s.dropped_calls)),
    h("td", { "data-k": "gates", class: s.gate_flagged_rollouts ? "warn" : null },
      s.gate_flagged_rollouts ? `${s.gate_flagged_rollouts} rollouts: ${counts(s.gate_violations)}` : "0"),
    h("td", { class: "num", "data-k": "cost" }, costCell(s.cost))),
    ...Object.entries(s.policies || {}).map(([name, p]) => policyHealth(s.step, name, p, order))]);
  return table(["step", "rollouts", "failed attempts (kind)", "calls used", "merged rows", "single-call rows",
    "prefix breaks", "logprob mismatches", "flagged calls", "truncated calls", "dropped rollouts", "dropped calls",
    "gate violations (rule)", "cost per success"], rows, { id: "health" });
}

// The step's cost per success (alight/cost.py): money with `prices:`, tokens always, and the successes it is over.
function costCell(cost) {
  if (!cost) return "–";
  const per = cost.per_success;
  if (per.tokens === null) return `no success (${cost.total.prompt_tokens + cost.total.completion_tokens} tokens spent)`;
  const money = cost.priced ? `$${num(per.usd, 6)} · ` : "";
  return `${money}${num(per.tokens, 0)} tokens (${cost.successes} successes)`;
}

// Under a step of a several-policy run, one row per policy: the builder's counts on that policy's share alone.
function policyHealth(step, name, p, order) {
  const none = () => h("td", { class: "muted" }, "");
  return h("tr", { class: "policy-health", "data-policy-step": step, "data-policy": name },
    h("td", {}, Policies.chip(name, order)), none(), none(),
    h("td", { class: "num", "data-k": "calls" }, `${p.calls_used}/${p.calls}`),
    h("td", { class: "num", "data-k": "merged_rows" }, String(p.merged_rows)),
    h("td", { class: "num", "data-k": "single_call_rows" }, String(p.rows - p.merged_rows)),
    none(), none(), none(),
    h("td", { class: "num", "data-k": "truncated_rows" }, p.truncated_rows ? `${p.truncated_rows} rows` : ""),
    h("td", { "data-k": "dropped_rollouts" }, counts({ ...p.dropped_rollouts, no_named_reward: p.no_named_reward })),
    none(), none(), none());
}

// ---- rollouts table
const FILTERS = [
  ["run", "text"], ["step", "number"], ["state", ["", "queued", "running", "succeeded", "failed", "cancelled"]],
  ["mode", ["", "train", "val"]], ["group_id", "text"], ["failure_kind", ["", "task", "infra", "timeout", "budget_exceeded"]],
];

async function rolloutsPage(params) {
  const page = +params.page || 1;
  const data = await api(`/api/ui/rollouts${enc({ ...params, page, per_page: params.per_page || 50 })}`);
  const form = h("form", { class: "filters", id: "filters", onsubmit: (e) => {
    e.preventDefault();
    const values = Object.fromEntries(new FormData(e.target));
    location.hash = `#/rollouts${enc(values)}`;
  } }, FILTERS.map(([name, kind]) => h("label", {}, name.replace("_", " "), " ",
    Array.isArray(kind)
      ? h("select", { name }, kind.map((v) => h("option", { value: v, selected: params[name] === v }, v || "any")))
      : h("input", { name, type: kind, value: params[name] || "", size: kind === "number" ? 4 : 18 }))),
  h("button", { type: "submit" }, "Filter"));
  let lastGroup = null;
  const rows = [];
  for (const r of data.rollouts) {
    if (r.group_id && r.group_id !== lastGroup) {
      const g = data.groups[r.group_id];
      rows.push(h("tr", { class: "group", "data-group": r.group_id }, h("td", { colspan: 12 },
        `group ${r.group_id} · ${g.size} rollouts · reward mean ${num(g.mean)} std ${num(g.std)} `,
        `range [${num(g.min)}, ${num(g.max)}]`, g.std === 0 && g.n > 1 ? h("span", { class: "warn" }, " · equal rewards: no signal") : null)));
    }
    lastGroup = r.group_id;
    rows.push(h("tr", { class: "rollout", "data-id": r.id },
      h("td", {}, link(`#/rollout/${encodeURIComponent(r.id)}`, r.id)),
      h("td", {}, h("span", { class: `state ${r.state}` }, r.state)),
      h("td", {}, r.mode), h("td", { class: "num" }, num(r.reward)), h("td", {}, r.failure_kind || ""),
      h("td", { class: "num" }, String(r.attempts)), h("td", { class: "num" }, num(r.duration_s, 1)),
      h("td", { class: "num" }, r.policy_versions.join(",")), h("td", { class: "num" }, String(r.calls)),
      h("td", { class: "num" }, String(r.prompt_tokens)), h("td", { class: "num" }, String(r.generated_tokens)),
      h("td", { class: "num" }, r.step ?? "")));
  }
  const pages = Math.max(1, Math.ceil(data.total / data.per_page));
  const go = (p) => `#/rollouts${enc({ ...params, page: p })}`;
  const pager = h("p", { class: "pager" },
    page > 1 ? link(go(page - 1), "← previous") : null, ` page ${page} of ${pages} · ${data.total} rollouts `,
    page < pages ? link(go(page + 1), "next →") : null);
  return h("section", {}, h("h1", {}, "Rollouts"), form, pager,
    table(["rollout", "state", "mode", "reward", "failure", "attempts", "seconds", "policy", "calls",
      "prompt tokens", "generated", "step"], rows, { id: "rollouts" }));
}

// ---- one rollout: trajectory timeline, log, token view
function messageText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : p.text ?? p.content ?? json(p))).join("\n");
  return json(content);
}

function messageBlock(role, content, toolCalls) {
  return h("div", { class: `msg ${role}` }, h("div", { class: "role" }, role),
    h("div", { class: "text" }, messageText(content)),
    (toolCalls || []).map((tc) => h("div", { class: "toolcall" },
      `→ ${tc.function?.name ?? tc.name ?? "tool"}(${tc.function?.arguments ?? json(tc.input ?? tc.arguments ?? "")})`)));
}

function requestMessages(req) {
  if (Array.isArray(req.messages)) {
    const system = req.system ? [messageBlock("system", req.system)] : [];
    return system.concat(req.messages.map((m) => messageBlock(m.role, m.content, m.tool_calls)));
  }
  if (req.prompt !== undefined) return [messageBlock("prompt", req.prompt)];
  if (req.input !== undefined) return [messageBlock("input", req.input)];
  return [h("pre", {}, json(req))];
}

function responseMessages(res) {
  if (!res) return [h("p", { class: "muted" }, "no response recorded")];
  if (Array.isArray(res.choices) && res.choices.length) {
    const c = res.choices[0];
    if (c.message) return [messageBlock("assistant", c.message.content, c.message.tool_calls), h("div", { class: "muted" }, `finish: ${c.finish_reason}`)];
    return [messageBlock("completion", c.text), h("div", { class: "muted" }, `finish: ${c.finish_reason}`)];
  }
  if (Array.isArray(res.content)) return [messageBlock("assistant", res.content.map((b) => b.text ?? json(b)).join("\n"))];
  if (Array.isArray(res.output)) return [messageBlock("assistant", res.output.map((o) => messageText(o.content ?? o)).join("\n"))];
  return [h("pre", {}, json(res))];
}

// order: the run's configured policies (their colours); a call of a policy shows it as a chip in its colour.
function callCard(tc, index, order) {
  const c = tc.call;
  const policy = Policies.ofCall(tc);
  const own = policy !== null && tc.policy_own_version !== null && tc.policy_own_version !== undefined ? `v${tc.policy_own_version}` : "";
  const flags = c.flags.filter((f) => !f.startsWith(Policies.FLAG)); // the policy flag is the chip, not a warning
  return h("div", { class: "call", "data-seq": c.seq, "data-policy": policy,
    style: policy === null ? null : `border-left-color: ${Policies.colour(policy, order)}` },
    h("div", { class: "call-head" },
      h("b", {}, `model call ${c.seq}`), " · ", policy === null ? null : [Policies.chip(policy, order, own), " · "],
      `${c.flavour} · ${policy === null ? "policy" : "global"} v${c.policy_version ?? "?"} · ${num(c.latency_ms, 0)} ms · `,
      `${c.prompt_token_ids.length} prompt + ${c.response_token_ids.length} generated tokens`,
      c.status_code !== 200 ? h("span", { class: "warn" }, ` · HTTP ${c.status_code} ${c.error ?? ""}`) : null,
      flags.length ? h("span", { class: "warn" }, ` · flags: ${flags.join(", ")}`) : null),
    h("div", { class: "path" }, tc.span_path.length ? tc.span_path.join(" › ") : "(no span)", tc.agent_name ? ` · agent ${tc.agent_name}` : ""),
    h("details", { open: index === 0 ? null : null }, h("summary", {}, "request messages"), requestMessages(c.request)),
    h("div", { class: "response" }, responseMessages(c.response)),
    tc.rewards.map((r) => h("div", { class: "reward" }, `step reward ${r.name ?? ""} ${num(r.value)}`)));
}

function toolCard(t) {
  const ms = t.end_time_ns ? (t.end_time_ns - t.start_time_ns) / 1e6 : null;
  return h("div", { class: "tool", "data-span": t.span_id },
    h("div", { class: "call-head" }, h("b", {}, `tool ${t.tool_name ?? t.name}`), ` · ${num(ms, 1)} ms`,
      t.status_code === 2 ? h("span", { class: "warn" }, " · error") : null),
    h("div", { class: "path" }, (t.span_path || []).join(" › ")),
    h("div", { class: "kv" }, h("span", { class: "k" }, "arguments "), h("code", {}, messageText(t.arguments ?? ""))),
    h("div", { class: "kv" }, h("span", { class: "k" }, "result "), h("code", {}, messageText(t.result ?? ""))));
}

function timeline(trajectory, order) {
  const items = [];
  const tools = trajectory.tool_spans || [];
  const before = (i) => tools.filter((t) => t.after_call === i).map(toolCard);
  items.push(...before(-1));
  trajectory.calls.forEach((tc, i) => { items.push(callCard(tc, i, order)); items.push(...before(i)); });
  return items;
}

// The policies of a trajectory's calls: configured ones in config order, then the others in call order.
function trajectoryPolicies(trajectory, order) {
  const seen = [...new Set(trajectory.calls.map(Policies.ofCall).filter((p) => p !== null))];
  return order.filter((n) => seen.includes(n)).concat(seen.filter((n) => !order.includes(n)));
}

// "show calls of policy X": hides the other policies' calls (tool spans stay). Compares names, builds no selector.
function policyFilter(names) {
  if (names.length < 2) return null;
  const select = h("select", { id: "policy-filter", onchange: (e) => {
    for (const card of document.querySelectorAll("#timeline .call")) card.hidden = e.target.value !== "" && card.dataset.policy !== e.target.value;
  } }, h("option", { value: "" }, "every policy"), names.map((n) => h("option", { value: n }, n)));
  return h("label", { class: "policy-filter" }, "show calls of ", select);
}

function tokenRow(row, index, order) {
  const starts = new Map(Object.entries(row.starts).map(([seq, at]) => [at, seq]));
  const spans = [];
  row.tokens.forEach(([id, text, mask, logprob, covered], i) => {
    if (starts.has(i)) spans.push(h("span", { class: "call-mark" }, `▸ call ${starts.get(i)}`));
    if (covered !== undefined) {  // a redacted span: one block over the tokens it covers, no ids
      spans.push(h("span", { class: `tok redacted m${mask}`, title: `${text} · ${covered} tokens hidden` }, text));
      return;
    }
    const shown = text === null ? `[${id}]` : text.replace(/\n/g, "⏎\n");
    const p = logprob === null ? null : Math.exp(logprob);
    const style = mask ? `background: rgba(22, 163, 74, ${(0.15 + 0.75 * p).toFixed(3)})` : null;
    const title = `id ${id}${text === null ? "" : ` ${JSON.stringify(text)}`} · loss mask ${mask}` + (p === null ? "" : ` · logprob ${logprob.toFixed(4)} (p ${p.toFixed(3)})`);
    spans.push(h("span", { class: `tok m${mask}`, "data-id": id, style, title }, shown));
  });
  const cause = row.cause === "conversation" ? "starts a conversation" : `prefix break: ${row.cause}`;
  const policy = row.policy ?? null;
  return h("div", { class: "token-row", "data-row": index, "data-policy": policy,
    style: policy === null ? null : `border-left: 4px solid ${Policies.colour(policy, order)}` },
    h("div", { class: `row-head ${row.cause === "conversation" ? "" : "break"}` },
      policy === null ? null : [Policies.chip(policy, order), " · "],
      `row ${index} · calls ${row.calls.join(", ")} · ${row.length ?? row.tokens.length} tokens, ${row.trained_tokens} trained · ${cause}`),
    h("div", { class: "tokens" }, spans));
}

function tokenView(view, order) {
  if (view.error) return h("p", { class: "error" }, view.error);
  const legend = h("p", { class: "legend-line" }, h("span", { class: "tok m0" }, "context (mask 0)"), " ",
    h("span", { class: "tok m1", style: "background: rgba(22,163,74,.9)" }, "generated, likely"), " ",
    h("span", { class: "tok m1", style: "background: rgba(22,163,74,.2)" }, "generated, unlikely"),
    ` · ${view.mode} mode · model ${view.model ?? "unknown"}${view.decoded ? "" : " (no tokenizer here: ids shown)"}`,
    view.redacted ? " · secrets and personal data shown as marked blocks" : "");
  const notes = [];
  if (view.dropped_rollout) notes.push(h("p", { class: "warn" }, `The sample builder leaves this attempt out: ${view.dropped_rollout}.`));
  if (Object.keys(view.dropped_calls).length) notes.push(h("p", { class: "muted" }, `dropped calls: ${counts(view.dropped_calls)}`));
  const policies = [...new Set(view.rows.map((r) => r.policy).filter((p) => p !== null && p !== undefined))];
  return h("div", { id: "token-view" }, legend, Policies.legend(policies, order, "token-policies"), notes,
    view.rows.map((row, i) => tokenRow(row, i, order)));
}

// A rollout that retention or `alight data purge` deleted: the API answers 410 with when and why.
function purgedPage(rolloutId, message) {
  return h("section", { id: "purged" },
    h("h1", {}, `Rollout ${rolloutId} `, h("span", { class: "state purged" }, "purged")),
    h("p", { class: "purged-message" }, message),
    h("p", { class: "muted" }, "Its trajectory, model calls, spans, events, rewards and attempt logs are deleted; " +
      "only the date and the reason are kept."));
}

async function rolloutPage(rolloutId, params) {
  const id = encodeURIComponent(rolloutId);
  const q = enc({ attempt: params.attempt, reveal: params.reveal });
  const [view, tokens] = await Promise.all([
    api(`/api/ui/rollouts/${id}/view${q}`),
    api(`/api/ui/rollouts/${id}/tokens${q}`).catch((err) => ({ error: err.message })),
  ]).catch((err) => {
    if (err instanceof ApiError && err.status === 410) return [{ purged: err.message }, null];
    throw err;
  });
  if (view.purged) return purgedPage(rolloutId, view.purged);
  const { rollout, trajectory, log, run_id: runId, gate_violations: gates } = view;
  const order = view.policies || [];
  const policies = trajectoryPolicies(trajectory, order);
  const attempts = rollout.attempts.map((a) => h("span", { class: "attempt" },
    a.attempt === trajectory.attempt ? h("b", {}, `attempt ${a.attempt}`) : link(`#/rollout/${id}${enc({ attempt: a.attempt })}`, `attempt ${a.attempt}`),
    ` ${a.status}${a.failure_kind ? ` (${a.failure_kind})` : ""}${a.message ? `: ${a.message}` : ""}`));
  return h("section", {},
    h("h1", {}, `Rollout ${rollout.id} `, h("span", { class: `state ${rollout.state}` }, rollout.state)),
    h("p", {}, `${rollout.mode} · group `, rollout.group_id ? link(`#/rollouts${enc({ group_id: rollout.group_id })}`, rollout.group_id) : "none",
      ` · final reward ${num(trajectory.final_reward)}`, runId ? [" · run ", link(`#/run/${encodeURIComponent(runId)}`, runId)] : null),
    h("p", { class: "attempts" }, attempts),
    h("p", { class: "redaction", id: "redaction" }, view.redacted
      ? ["Secrets and personal data are redacted. ", link(`#/rollout/${id}${enc({ attempt: params.attempt, reveal: "true" })}`, "Show the exact content")]
      : ["Showing the exact content, as captured. ", link(`#/rollout/${id}${enc({ attempt: params.attempt })}`, "Redact it")]),
    h("details", {}, h("summary", {}, "task"), h("pre", {}, json(rollout.task))),
    reviewLine(rollout.id, trajectory.review),
    gates.length ? [h("h2", {}, "Gate violations (reward 0, left out of training)"),
      table(["attempt", "rule", "evidence"], gates.map((g) => h("tr", {}, h("td", { class: "num" }, String(g.attempt ?? "")),
        h("td", {}, String(g.rule ?? "")), h("td", {}, h("code", {}, messageText(g.evidence ?? ""))))), { id: "gates" })] : null,
    h("h2", {}, "Trajectory"),
    Policies.legend(policies, order, "trajectory-policies"), policyFilter(policies),
    h("div", { class: "timeline", id: "timeline" }, timeline(trajectory, order)),
    h("h2", {}, "Rewards"),
    table(["value", "name", "final", "source", "on"], trajectory.rewards.map((r) => h("tr", {},
      h("td", { class: "num" }, num(r.value)), h("td", {}, r.name ?? ""), h("td", {}, r.final ? "final" : "step"),
      h("td", {}, r.source), h("td", {}, r.model_call_id ?? r.span_id ?? ""))), { id: "rewards" }),
    judgementTable(rollout.id, view.judgements || []),
    h("h2", {}, "Token view: what the gradient sees"),
    tokenView(tokens, order),
    h("h2", {}, "Attempt log"),
    log === null ? h("p", { class: "muted" }, "no log uploaded for this attempt") : h("pre", { class: "log", id: "log" }, log));
}

// The judge's calls on this attempt (judge: in the train config): its score, or why it gave none. Not the agent's calls.
// A call that scored the whole group (mode: group) also shows what it gave each of the group's rollouts, parsed.
function judgementTable(rolloutId, judgements) {
  if (!judgements.length) return null;
  const others = (j) => Object.entries(j.scores || {}).filter(([id]) => id !== rolloutId)
    .map(([id, score]) => `${id} ${num(score)}`).join(" · ");
  const rows = judgements.map((j) => h("tr", {}, h("td", {}, j.model ?? ""), h("td", {}, j.mode ?? ""),
    h("td", { class: "num" }, j.failed ? "none" : num((j.scores || {})[rolloutId])), h("td", { class: "group-scores" }, others(j)),
    h("td", { class: "num" }, String(j.tries ?? "")), h("td", { class: "num" }, j.latency_s === undefined ? "" : num(j.latency_s, 2)),
    h("td", { class: "num" }, j.failed ? "" : `${j.prompt_tokens} + ${j.completion_tokens}`), h("td", {}, j.cached ? "cached" : ""),
    h("td", {}, h("code", {}, String(j.prompt_sha256 ?? "").slice(0, 12))),
    h("td", {}, h("code", {}, messageText(j.failed ? `failed: ${j.failed}` : j.answer ?? "")))));
  return [h("h2", {}, "Judge (infrastructure: not the agent's calls, never trained on)"),
    table(["model", "mode", "score", "same call scored", "tries", "latency s", "tokens", "", "prompt", "answer"], rows, { id: "judgements" })];
}

// ---- gateway
// Several policies (gateway.routing): each policy's own pause, its calls in flight and its own version.
function gatewayPolicies(s) {
  const order = Object.keys(s.own_versions || {}); // routing's policies, in the run config's order
  if (!order.length) return null;
  const paused = new Set(s.paused_policies || []);
  const rows = order.map((name) => h("tr", { "data-policy": name }, h("td", {}, Policies.chip(name, order)),
    h("td", {}, paused.has(name) || s.paused ? "paused" : "open"),
    h("td", { class: "num" }, String((s.in_flight_by_policy || {})[name] ?? 0)),
    h("td", { class: "num" }, String(s.own_versions[name]))));
  return [h("h2", {}, "Policies"), table(["policy", "state", "in flight", "own version"], rows, { id: "gateway-policies" })];
}

async function gatewayPage() {
  const s = await api("/api/gateway/status");
  const replicas = (s.other_replicas || []).map((r) => h("tr", {}, h("td", {}, r.id), h("td", {}, r.address),
    h("td", {}, r.paused ? "paused" : "open"), h("td", { class: "num" }, String(r.in_flight)),
    h("td", {}, new Date(r.reported_at * 1000).toLocaleTimeString())));
  timer = timer || setInterval(() => refresh(gatewayPage), 5000);
  return h("section", {}, h("h1", {}, "Gateway"),
    h("p", { id: "gateway-state" }, h("span", { class: `state ${s.paused ? "failed" : "succeeded"}` }, s.paused ? "paused" : "open"),
      ` · ${s.in_flight} calls in flight · policy version ${s.policy_version} · paused ${num(s.paused_seconds_total, 1)} s in all · this replica ${s.replica}`),
    gatewayPolicies(s),
    h("h2", {}, "Upstreams"),
    table(["id", "url", "model", "policy version"], s.upstreams.map((u) => h("tr", {}, h("td", {}, u.id), h("td", {}, u.url),
      h("td", {}, u.model ?? ""), h("td", { class: "num" }, String(u.policy_version))))),
    h("h2", {}, "Other gateway replicas on this store"),
    replicas.length ? table(["id", "address", "state", "in flight", "reported"], replicas) : h("p", { class: "muted" }, "none"));
}

route();
