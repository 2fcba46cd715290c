// The review queue (#/reviews): flagged or audited rollouts, out of training until a person decides them.
// Each shows its flags' evidence, the episode's diff and commands, and a link to its trajectory; Accept and
// Reject (with a note) appear for a key that may decide (a reviewer key or the admin key). Loaded before
// app.js; uses its helpers (h, api, table, link, num) when the page is shown. Text only, never markup.
"use strict";

async function reviewsPage() {
  const queue = await api("/api/reviews?per_page=200");
  const items = queue.reviews.map((r) => reviewItem(r, queue.can_decide));
  return h("section", { id: "reviews" },
    h("h1", {}, "Review queue"),
    h("p", { id: "review-summary" }, `${queue.total} rollouts wait for a decision. `,
      "A flagged rollout is out of training until a person accepts it (it trains in a later step) or rejects it ",
      "(it stays out and joins the run's security regressions).",
      queue.redacted ? " Secrets and personal data are redacted." : ""),
    queue.can_decide ? null : h("p", { class: "muted", id: "review-read-only" },
      "This key reads the queue; deciding needs a reviewer key or the admin key."),
    items.length ? items : h("p", { class: "muted", id: "review-empty" }, "Nothing waits for a decision."));
}

function reviewItem(r, canDecide) {
  const id = encodeURIComponent(r.rollout_id);
  const episode = r.episode || {};
  const commands = episode.command_lines || [];
  return h("article", { class: "review", "data-rollout": r.rollout_id },
    h("h2", {}, `Rollout ${r.rollout_id} `, h("span", { class: `state ${r.state}` }, r.state), " ",
      link(`#/rollout/${id}`, "trajectory")),
    h("p", { class: "muted" }, `${r.mode} · ${r.attempts} attempt${r.attempts === 1 ? "" : "s"} · final reward ${num(r.final_reward)} · `,
      `queued by ${r.reasons.map((x) => (x === "audit" ? "the random audit" : "a review flag")).join(" and ")}`),
    table(["flag", "rule", "attempt", "evidence"], r.flags.map((f) => h("tr", {},
      h("td", {}, f.kind), h("td", {}, String(f.rule ?? f.reason ?? "")), h("td", { class: "num" }, String(f.attempt ?? "")),
      h("td", {}, h("code", {}, String(f.evidence ?? ""))))), { class: "review-flags" }),
    h("details", { open: true }, h("summary", {}, `diff (${episode.diff_lines ?? "?"} changed lines)`),
      h("pre", { class: "diff" }, episode.diff ?? "no diff recorded for this rollout")),
    h("details", {}, h("summary", {}, `commands (${episode.commands ?? commands.length})`),
      commands.length ? table(["command", "exit"], commands.map((c) => h("tr", {},
        h("td", {}, h("code", {}, c.command)), h("td", { class: "num" }, c.timed_out ? "timed out" : String(c.returncode)))),
      { class: "review-commands" }) : h("p", { class: "muted" }, "no commands recorded")),
    canDecide ? decisionForm(r.rollout_id) : null);
}

function decisionForm(rolloutId) {
  const note = h("textarea", { class: "review-note", rows: 2, cols: 60, maxlength: 2000, placeholder: "note (why)" });
  const status = h("p", { class: "review-status" });
  const decide = async (decision) => {
    try {
      await api(`/api/rollouts/${encodeURIComponent(rolloutId)}/review`, { decision, note: note.value });
      show(reviewsPage);
    } catch (err) {
      status.replaceChildren(h("span", { class: "error" }, `Not decided: ${err.message}`));
    }
  };
  return h("div", { class: "review-decision" }, note, " ",
    h("button", { type: "button", class: "accept", onclick: () => decide("accept") }, "Accept"), " ",
    h("button", { type: "button", class: "reject", onclick: () => decide("reject") }, "Reject"), status);
}

// The rollout page's line on its review: only a queued or decided rollout has one.
function reviewLine(rolloutId, review) {
  if (!review || review === "clear") return null;
  const said = { pending: "waits in the review queue, out of training until a person decides",
    accepted: "accepted by a reviewer: it trains", rejected: "rejected by a reviewer: out of training, a security regression" };
  return h("p", { id: "review-state", class: review === "rejected" ? "warn" : null }, `Review: ${review} — ${said[review] ?? review} · `,
    link("#/reviews", "review queue"));
}
