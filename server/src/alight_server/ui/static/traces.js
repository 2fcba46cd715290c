// The check page of an imported run (#/check/<run>): what the sample builder makes of its traces.
// Loaded before app.js; uses its helpers (h, api, table, link, num, enc) when the page is shown.
"use strict";

function divergenceText(d) {
  if (!d) return "–";
  const what = d.expected_text !== null ? `${JSON.stringify(d.expected_text)} vs ${JSON.stringify(d.prompt_text)}`
    : `${JSON.stringify(d.expected_ids)} vs ${JSON.stringify(d.prompt_ids)}`;
  return `call ${d.call} token ${d.position} (${d.cause}): ${what}`;
}

async function checkPage(runId) {
  const { run, check } = await api(`/api/ui/runs/${encodeURIComponent(runId)}/check`);
  const rows = check.trajectories.map((t) => h("tr", {},
    h("td", {}, link(`#/rollout/${encodeURIComponent(t.rollout_id)}`, t.rollout_id)),
    h("td", {}, t.source ?? ""),
    h("td", { class: "num" }, String(t.calls)),
    h("td", { class: "num" }, String(t.exact)),
    h("td", { class: "num" }, String(t.rendered)),
    h("td", { class: "num" }, String(t.left_out)),
    h("td", { class: "num" }, String(t.rows)),
    h("td", {}, counts(t.breaks)),
    h("td", { class: "divergence" }, divergenceText(t.divergences[0]))));
  const b = check.build;
  const left = check.trajectories.flatMap((t) => t.unrendered.map((m) => h("li", {}, `${t.rollout_id}: ${m}`)));
  const source = (run.config.offline || {}).format;
  return h("section", {},
    h("h1", {}, `Check ${run.id}`),
    h("p", {}, source ? `imported from ${source} traces · ` : "", `model ${run.config.model ?? "?"} · `,
      link(`#/run/${encodeURIComponent(run.id)}`, "run"), " · ", link(`#/rollouts${enc({ run: run.id })}`, "all rollouts")),
    h("p", { id: "check-totals" },
      `${num(b.rows, 0)} rows after merging from ${num(b.calls, 0)} calls (${num(b.calls_used, 0)} used, `,
      `${num(b.trained_tokens, 0)} trained tokens) · prefix breaks ${counts(check.breaks)} · `,
      `new conversations beyond each trajectory's first ${check.trajectories.reduce((n, t) => n + Math.max(t.conversations - 1, 0), 0)} · `,
      `truncated rows ${check.truncated_rows} (${check.truncated_tokens} tokens)`,
      check.unscored ? ` · ${check.unscored} without a reward yet (counted as 0)` : ""),
    table(["rollout", "source", "calls", "exact", "rendered", "left out", "rows", "breaks", "first difference"], rows,
      { id: "check" }),
    left.length ? [h("h2", {}, "Calls not imported"), h("ul", { id: "unrendered" }, left)] : null,
    Object.keys(check.dropped_calls).length ? h("p", {}, `calls the builder left out: ${counts(check.dropped_calls)}`) : null);
}
