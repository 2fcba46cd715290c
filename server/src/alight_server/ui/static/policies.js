// Several policies on the dashboard: each policy's colour (the same in every view), its calls, its metrics.
// A policy's colour is its place among the run's configured policies (run.config.policies, in config order);
// a name the config lacks (a flag recorded from a call: untrusted) takes a colour from a hash of its name.
// Names are only ever inserted as text, and a colour only ever comes from PALETTE, never from a name.
"use strict";

const Policies = (() => {
  const PALETTE = ["#7c3aed", "#0d9488", "#db2777", "#ca8a04", "#4f46e5", "#65a30d", "#c2410c", "#0369a1"];
  const FLAG = "policy:"; // a recorded call's flag, "policy:<name>" (alight_server/policies/routing.py POLICY_FLAG)
  const PREFIX = "policy/"; // a step metric of one policy, "policy/<name>/<key>" (trainer/step/update.py)
  const ROLLOUT = "#374151"; // the rollout's own reward and score, which every policy shares

  // The run config's policies in config order; [] for a single-policy run.
  function configured(config) {
    const policies = config && config.policies;
    return policies && typeof policies === "object" && !Array.isArray(policies) ? Object.keys(policies) : [];
  }

  function hash(name) {
    let n = 0;
    for (const ch of String(name)) n = (n * 31 + ch.codePointAt(0)) >>> 0;
    return n;
  }

  // order: the configured names. A configured policy's colour is its index; another name's, its hash.
  function colour(name, order) {
    const i = (order || []).indexOf(name);
    return PALETTE[(i >= 0 ? i : hash(name)) % PALETTE.length];
  }

  // The policy that served a trajectory call: the API's `policy` field, else the call's flag.
  function ofCall(tc) {
    if (tc.policy) return tc.policy;
    const flag = (tc.call.flags || []).find((f) => typeof f === "string" && f.startsWith(FLAG));
    return flag === undefined ? null : flag.slice(FLAG.length);
  }

  // Every policy name a run's steps report metrics for, configured ones first (config order), then the rest.
  function inMetrics(steps, order) {
    const seen = new Set();
    for (const s of steps) {
      for (const key of Object.keys(s.metrics)) {
        if (!key.startsWith(PREFIX)) continue;
        const name = key.slice(PREFIX.length).split("/")[0];
        if (name) seen.add(name);
      }
    }
    const rest = [...seen].filter((n) => !order.includes(n)).sort();
    return order.filter((n) => seen.has(n)).concat(rest);
  }

  const metric = (metrics, name, key) => metrics[`${PREFIX}${name}/${key}`];

  // A coloured chip holding the policy's name as text.
  function chip(name, order, suffix) {
    const node = document.createElement("span");
    node.className = "policy-chip";
    node.dataset.policy = name;
    node.style.setProperty("--policy", colour(name, order));
    node.textContent = suffix ? `${name} ${suffix}` : name;
    node.title = node.textContent; // a long name is cut with an ellipsis on screen
    return node;
  }

  // "policies: [a] [b]" for a list of names, or null when there are none.
  function legend(names, order, id) {
    if (!names.length) return null;
    const node = document.createElement("p");
    node.className = "policy-legend";
    if (id) node.id = id;
    node.append("policies: ");
    for (const name of names) node.append(chip(name, order), " ");
    return node;
  }

  // The run page's charts for a several-policy run (app.js `curves`): one line per policy, in its colour, on the
  // reward, validation, loss, KL, clip, own version and rows charts; the rollout's reward and validation score
  // (every policy's outcome) stay as a grey line. Phase times and tokens/s are the run's, as with one policy.
  function curves(names, order, steps, shared) {
    const each = (key, stdKey) => (m) => names.map((n) =>
      [n, metric(m, n, key), stdKey ? metric(m, n, stdKey) : undefined, colour(n, order)]);
    const reward = each("train/reward_mean", "train/reward_std");
    const stale = steps.some((s) => names.some((n) => metric(s.metrics, n, "async/staleness_mean") !== undefined));
    return [
      ["train reward (mean, 1 sd band)", (m) => [["rollout", m["train/reward_mean"], m["train/reward_std"], ROLLOUT], ...reward(m)]],
      ["validation mean reward (± 2 SE, clustered by task)", each("val/score"), { name: "rollout", color: ROLLOUT }],
      ["loss", each("train/loss")],
      ["KL (approx)", each("train/approx_kl")],
      ["clip fraction", each("train/clip_fraction")],
      ["own policy version", each("policy_version")],
      ["training rows", each("samples/rows")],
      stale ? ["async staleness (mean)", each("async/staleness_mean")] : null,
      ...shared,
    ].filter(Boolean);
  }

  return { FLAG, configured, colour, ofCall, inMetrics, metric, chip, legend, curves };
})();
