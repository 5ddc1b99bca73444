// The Events page's history (#event-history, below the live tail): the stored events, filtered by
// request, task, agent, kind and time, newest first, with "Older" paging (before=<the last id>) and an
// export of every match as JSON lines (GET /admin/api/events/history?format=jsonl, the same filters).
//
// Hooks: data-logs-form (the filter form; its fields are named as the API's parameters), data-logs-export
// (the download), data-logs-older (the next page), data-event="<id>" on each row, data-logs-status.
// A download carries the console's auth: the session cookie goes with a plain link; a console opened
// with ?token= (ctx.token) fetches the file with its bearer header and saves it as a blob.
//
// Also defines opcEventDetail(ctx, kind, data): one line saying what an event was, shared with the
// overview so both pages word an event the same way.
const opcEventDetail = (ctx, kind, d) => {
  const { money, tokens, span } = ctx;
  switch (kind) {
    case "task_created": return d.parent ? `under #${d.parent}` : `new request in ${d.conversation || "?"}`;
    case "delegated": return `${d.from} → ${d.to} (#${d.child})`;
    case "tool_called": return d.tool || "";
    case "tool_finished": return `${d.tool}${d.detail ? ` (${d.detail})` : ""}: ${d.outcome}${d.exit_code != null ? `, exit ${d.exit_code}` : ""}, ${span(d.duration_ms || 0)}`;
    case "agent_finished": return `${d.state}, ${tokens((d.tokens_in || 0) + (d.tokens_out || 0))} tokens, ${money(d.cost_usd || 0)}, ${span(d.duration_ms || 0)}`;
    // Stored events keep no free text (it may hold real values): its length, and where to read it.
    case "approval_requested": return `#${d.approval}: ${d.summary != null ? d.summary : `(${d.summary_chars || 0} characters; see Approvals)`}`;
    case "approval_resolved": return `#${d.approval}: ${d.decision} by ${d.by}`;
    case "escalated": return `${d.kind}: ${d.reason != null ? d.reason : `(${d.reason_chars || 0} characters; see the task)`}`;
    case "config_reloaded": return `generation ${d.generation} (${d.trigger})`;
    case "config_rejected": return `${d.errors} error(s) (${d.trigger})`;
    case "privacy_masked": return `${d.total} masked (${d.mode})`;
    case "privacy_blocked": return `a ${d.kind} stopped`;
    case "facts_recorded": return `+${d.added} ~${d.updated} -${d.invalidated}`;
    case "recording_gap": return `${d.missed} event(s) not recorded here`;
    default: return "";
  }
};

const opcLogs = (ctx) => {
  const { $, api, el, when } = ctx;
  const FIELDS = [["request", "Request", "#"], ["task", "Task", "#"], ["agent", "Agent", "any"], ["kind", "Kind", "any; a,b for several"],
    ["from", "From", "2026-05-03 or RFC 3339"], ["to", "To", "RFC 3339 or ms"]];
  const KINDS = ["task_created", "agent_started", "tool_called", "tool_finished", "delegated", "privacy_masked", "privacy_blocked", "agent_finished",
    "escalated", "approval_requested", "approval_resolved", "config_reloaded", "config_rejected", "facts_recorded", "recording_gap"];
  let started = false, before = null, filters = "";

  // The form's non-empty fields as query parameters.
  const params = () => {
    const p = new URLSearchParams();
    for (const [name] of FIELDS) { const v = $("logs-" + name).value.trim(); if (v) p.set(name, v); }
    return p;
  };
  const status = (text, bad) => { const s = $("logs-status"); s.textContent = text; s.className = "status" + (bad ? " bad" : " muted"); };

  function row(e) {
    const tr = el("tr", { "data-event": String(e.id), "data-kind": e.kind },
      el("td", {}, when(e.at)), el("td", {}, e.kind.replace(/_/g, " ")),
      el("td", {}, e.request ? el("a", { href: "#", "data-logs-request": String(e.request), "aria-label": `Only request #${e.request}`,
        onclick: (ev) => { ev.preventDefault(); $("logs-request").value = String(e.request); search(); } }, "#" + e.request) : ""),
      el("td", {}, e.task ? "#" + e.task : ""), el("td", {}, e.agent || ""), el("td", { class: "logs-node" }, e.node || ""),
      el("td", {}, opcEventDetail(ctx, e.kind, e.data || {})));
    return tr;
  }

  async function page(more) {
    const p = more ? new URLSearchParams(filters) : params();
    if (!more) { filters = p.toString(); before = null; }
    if (before) p.set("before", String(before));
    exportLink();
    try {
      const r = await api("/admin/api/events/history?" + p);
      const body = $("logs-table").tBodies[0];
      if (!more) body.replaceChildren();
      body.append(...r.events.map(row));
      if (r.events.length) before = r.events[r.events.length - 1].id;
      $("logs-table").classList.toggle("logs-nodes", [...body.rows].some((tr) => tr.cells[5] && tr.cells[5].textContent));
      $("logs-older").hidden = !r.more;
      const shown = body.querySelectorAll("tr[data-event]").length;
      if (!shown) body.append(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No stored event matches.")));
      status(`${shown} event${shown === 1 ? "" : "s"} shown, newest first${r.more ? "; older ones below" : ""}.`);
    } catch (e) { status(e.message, true); }
  }
  const search = () => page(false);

  // The export link: the filters as searched (or as typed, before the first search).
  function exportLink() {
    const p = new URLSearchParams(filters);
    p.set("format", "jsonl");
    $("logs-export").href = "/admin/api/events/history?" + p;
  }
  async function download(event) {
    if (!ctx.token) return; // the session cookie goes with the link
    event.preventDefault();
    try {
      const r = await fetch($("logs-export").href, { headers: ctx.headers(), cache: "no-store" });
      if (!r.ok) throw new Error((await r.json().catch(() => ({}))).error || "the server answered " + r.status);
      const url = URL.createObjectURL(await r.blob());
      const a = el("a", { href: url, download: "opc-events.jsonl" });
      document.body.append(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) { status("Export failed: " + e.message, true); }
  }

  function build() {
    const form = el("form", { id: "logs-form", class: "toolbar", "data-logs-form": "", role: "search", "aria-label": "Filter the stored events" },
      ...FIELDS.map(([name, label, hint]) => el("label", {}, label + " ",
        el("input", { id: "logs-" + name, name, autocomplete: "off", placeholder: hint, size: name === "from" || name === "to" ? "20" : "10",
          ...(name === "kind" ? { list: "logs-kinds" } : {}) }))),
      el("datalist", { id: "logs-kinds" }, ...KINDS.map((k) => el("option", { value: k }))),
      el("button", { type: "submit", class: "primary" }, "Search"),
      el("button", { type: "reset" }, "Clear"),
      el("a", { id: "logs-export", class: "button", href: "/admin/api/events/history?format=jsonl", download: "opc-events.jsonl",
        "data-logs-export": "", onclick: download }, "Export JSON lines"));
    form.addEventListener("submit", (e) => { e.preventDefault(); search(); });
    form.addEventListener("reset", () => setTimeout(search, 0));
    $("event-history").replaceChildren(
      el("h3", { id: "logs-title" }, "History"),
      el("p", { class: "muted" }, "Stored events (kept for framework.console.eventRetention, 7 days by default), newest first. Times are yours; filter times are UTC unless they say otherwise."),
      form,
      el("p", { id: "logs-status", class: "status muted", role: "status", "data-logs-status": "" }),
      el("div", { class: "scroll" }, el("table", { id: "logs-table", class: "grid", "aria-labelledby": "logs-title" },
        el("thead", {}, el("tr", {}, ...["Time", "Kind", "Request", "Task", "Agent", "Node", "Detail"].map((h) => el("th", h === "Node" ? { class: "logs-node" } : {}, h)))),
        el("tbody", {}))),
      el("button", { type: "button", id: "logs-older", "data-logs-older": "", hidden: "", onclick: () => page(true) }, "Older events"));
  }

  return {
    load() {
      if (!started) { started = true; build(); }
      search();
    },
  };
};
