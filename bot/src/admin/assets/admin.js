// The admin console: a page per hash (#overview, #org, #config). A browser is signed in by its session
// cookie; a console opened with ?token=… (scripts, old bookmarks) sends that token on every request of
// this page and takes it out of the address bar at once, so it is not kept in history. Nothing is
// loaded from another host.
//
// The page modules (overview.js, orggraph.js, timeline.js, blocks.js, logs.js, vault.js, preview.js,
// session.js) come before this file in the page's one script; each is a factory taking the shared
// helpers (`ctx` below) and returning the hooks this file calls.
(() => {
  "use strict";
  const token = new URLSearchParams(location.search).get("token");
  if (token) {
    const url = new URL(location.href);
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  const $ = (id) => document.getElementById(id);
  const headers = (extra) => {
    const h = Object.assign({}, extra || {});
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  };
  if (token) $("chat-link").href = "/?token=" + encodeURIComponent(token);
  const banner = (text) => { $("banner").textContent = text || ""; $("banner").hidden = !text; };
  const api = async (path, options) => {
    const r = await fetch(path, Object.assign({ cache: "no-store" }, options, { headers: headers(options && options.headers) }));
    if (r.status === 401) {
      if (!token) location.assign("/signin?next=" + encodeURIComponent(location.pathname + location.hash));
      throw new Error("Signed out, or the access token is wrong: sign in again.");
    }
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || ("the server answered " + r.status));
    return body;
  };
  const el = (tag, attrs, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  };

  // Settles once the session module knows who is signed in (body[data-role] is set then).
  let sessionKnown = Promise.resolve();

  // ---- the console's one event stream, shared by every page ----
  // Listeners by kind ("*" hears every engine event): the Events page's live tail, the overview, the org
  // graph. `stream_state` ({text}) says whether the stream is live; "*" does not hear it.
  const listeners = new Map();
  const on = (kind, fn) => { if (!listeners.has(kind)) listeners.set(kind, []); listeners.get(kind).push(fn); };
  const dispatch = (kind, data) => {
    for (const fn of [...(listeners.get(kind) || []), ...(kind === "stream_state" ? [] : listeners.get("*") || [])]) {
      try { fn(data, kind); } catch (e) { /* one listener's fault does not stop the others */ }
    }
  };

  // ---- pages ----
  const pages = ["overview", "org", "tasks", "approvals", "costs", "channels", "events", "memory", "privacy", "config"];
  const loaded = {};
  let current = "overview";
  // Pages that show live data are refreshed while they are shown (the Events page streams instead).
  const refresh = { overview: () => modules.overview.refresh(), org: () => { loadStates(); modules.orgGraph.refresh(); },
    tasks: () => loadTasks(), approvals: () => loadApprovals(),
    costs: () => loadCosts(), channels: () => loadChannels(), privacy: () => { loadPrivacy(); modules.vault.refresh(); },
    config: () => loadClusterHistory() };
  function show() {
    const name = pages.includes(location.hash.slice(1)) ? location.hash.slice(1) : "overview";
    current = name;
    for (const p of pages) $("page-" + p).hidden = p !== name;
    for (const a of document.querySelectorAll("nav a[data-page]")) {
      if (a.dataset.page === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    if (!loaded[name]) {
      loaded[name] = true;
      ({ overview: () => modules.overview.load(), org: loadOrg, config: loadConfig, events: startEvents, memory: loadMemory,
        privacy: () => { loadPrivacy(); modules.vault.load(); } }[name] || refresh[name])();
    } else if (refresh[name]) refresh[name]();
  }
  setInterval(() => { if (!document.hidden && refresh[current] && loaded[current]) refresh[current](); }, 3000);
  const money = (usd) => "$" + (usd < 0.01 && usd > 0 ? usd.toFixed(4) : usd.toFixed(2));
  const tokens = (n) => n >= 10000 ? (n / 1000).toFixed(1) + "k" : String(n);
  const when = (ms) => new Date(ms).toLocaleString();
  const span = (ms) => ms < 1000 ? ms + " ms" : ms < 60000 ? (ms / 1000).toFixed(1) + " s" : Math.floor(ms / 60000) + "m" + String(Math.floor(ms / 1000) % 60).padStart(2, "0") + "s";
  const stateClass = (s) => "state " + (/THINK|EXECUT|CREATED|ASSIGNED|RESULT|thinking/.test(s) ? "thinking" : /AWAIT|DELEGATED|waiting|PENDING|pending/.test(s) ? "waiting" : s.toLowerCase());
  const badge = (s) => el("span", { class: stateClass(s) }, s.toLowerCase().replace(/_/g, " "));
  window.addEventListener("hashchange", show);
  // Buttons that change something carry data-admin-only: a viewer's console hides them (admin.css), and
  // the server refuses the request anyway.
  const adminOnly = (e) => { e.setAttribute("data-admin-only", ""); return e; };

  // ---- Org ----
  let orgGeneration = 0;
  async function loadOrg() {
    try {
      const org = await api("/api/org");
      orgGeneration = org.generation || 0;
      const byId = new Map(org.agents.map((a) => [a.id, a]));
      const levels = Math.max(0, ...org.agents.map((a) => a.level)) + 1;
      $("org-summary").textContent = `${org.name}: ${org.agents.length} agents in ${levels} level${levels === 1 ? "" : "s"}.`;
      const tree = $("org-tree");
      tree.replaceChildren();
      // Iterative build, so a deep org cannot overflow the stack.
      const stack = [[org.root, tree]];
      while (stack.length) {
        const [id, parent] = stack.pop();
        const a = byId.get(id);
        if (!a) continue;
        const button = el("button", { type: "button", "aria-pressed": "false", "data-agent": id,
          onclick: () => choose(a, button) }, a.role || id, el("span", { class: "id" }, id), " ", el("span", { class: "state" }, ""));
        const li = el("li", {}, button);
        parent.append(li);
        if (a.children.length) {
          const ul = el("ul", {});
          li.append(ul);
          for (const c of [...a.children].reverse()) stack.push([c, ul]);
        }
      }
      loadStates();
      modules.orgGraph.load();
    } catch (e) { loaded.org = false; banner(e.message); }
  }

  // ---- Tasks ----
  let openTask = null;
  async function loadTasks() {
    try {
      const r = await api("/admin/api/tasks");
      const body = $("task-list").tBodies[0];
      // On PostgreSQL, which node ran each request (`-`: none has claimed it yet).
      for (const th of $("task-list").querySelectorAll("th[data-node-column]")) th.hidden = !r.cluster;
      body.replaceChildren(...r.tasks.map((t) => {
        const node = r.cluster ? [el("td", { "data-task-node": t.node || "" }, t.node || "-")] : [];
        const tr = el("tr", { class: "pick", tabindex: "0", "data-task": String(t.id), "aria-selected": String(openTask === t.id) },
          el("td", {}, "#" + t.id), el("td", {}, badge(t.state)), el("td", {}, t.platform), ...node,
          el("td", {}, t.input), el("td", { class: "num" }, span(t.duration_ms)),
          el("td", { class: "num" }, tokens(t.tokens_in + t.tokens_out) + (t.unknown_usage_calls ? "+" : "")),
          el("td", { class: "num" }, money(t.cost_usd)));
        const pick = () => { openTask = t.id; for (const r of body.rows) r.setAttribute("aria-selected", String(r === tr)); loadTask(t.id); };
        tr.addEventListener("click", pick);
        tr.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
        return tr;
      }));
      if (!r.tasks.length) body.append(el("tr", {}, el("td", { colspan: r.cluster ? "8" : "7", class: "muted" }, "No requests yet.")));
      if (openTask) loadTask(openTask);
    } catch (e) { banner(e.message); }
  }
  async function loadTask(id) {
    modules.timeline.show(id);
    try {
      const r = await api("/admin/api/tasks/" + id);
      const byParent = new Map();
      for (const n of r.tasks) {
        const p = n.task.parent_id || 0;
        if (!byParent.has(p)) byParent.set(p, []);
        byParent.get(p).push(n);
      }
      const root = r.tasks.find((n) => !n.task.parent_id);
      const now = Date.now();
      const node = (n) => {
        const t = n.task;
        const calls = (n.calls || []).map((c) => el("div", { class: "calls" },
          `LLM ${c.model}: ${tokens(c.tokens_in)} in / ${tokens(c.tokens_out)} out, ${money(c.cost_usd)}, ${span(c.duration_ms)}` +
          (c.attempts > 1 ? `, ${c.attempts} attempts` : "") + (c.tool_calls.length ? ` → ${c.tool_calls.join(", ")}` : "") + (c.error ? ` — error: ${c.error}` : "")));
        const tools = (n.tools || []).map((c) => el("div", { class: "calls" },
          `tool ${c.tool}: ${span(c.duration_ms)}, ${c.outcome}` + (c.exit_code !== null && c.exit_code !== undefined ? ` (exit ${c.exit_code})` : "") +
          (c.detail ? ` · ${c.detail}` : "")));
        const approvals = r.approvals.filter((a) => a.task_id === t.id).map((a) => el("div", { class: "calls" },
          `approval #${a.id}: ${a.summary} — ${a.state === "pending" ? "pending" : decisionText(a)}`));
        const end = t.output || t.error || (t.escalation ? "escalated: " + t.escalation : "");
        const kids = (byParent.get(t.id) || []).map(node);
        return el("div", { class: "node" },
          el("div", { class: "head" }, el("strong", {}, t.agent), badge(n.state), el("span", { class: "muted" },
            `#${t.id} · ${span((t.finished_at || now) - t.created_at)} · ${tokens(t.tokens_in + t.tokens_out)} tokens · ${money(t.cost_usd)}` +
            (t.node ? ` · on ${t.node}` : ""))),
          ...calls, ...tools, ...approvals, ...(end && !kids.length || (end && t.id === root.task.id) ? [el("div", { class: "answer" }, end)] : []), ...kids);
      };
      const live = root && !/COMPLETED|FAILED|CANCELLED|ESCALATED/.test(root.state);
      const head = el("div", { class: "toolbar" }, el("h3", {}, `Request #${root.task.id}`),
        el("span", { class: "muted" }, `${tokens(r.totals.tokens_in + r.totals.tokens_out)} tokens · ${money(r.totals.cost_usd)} · ${root.task.conversation_id}`));
      if (live) head.append(adminOnly(el("button", { type: "button", id: "cancel-task", onclick: () => cancelTask(root.task.id) }, "Cancel this request")));
      $("task-detail").replaceChildren(head, node(root));
    } catch (e) { $("task-detail").replaceChildren(el("p", { class: "status bad" }, e.message)); }
  }
  async function cancelTask(id) {
    if (!(await ask("Cancel this request?", `Request #${id} and every task under it stop now; pending approvals in it are rejected.`, "", "Cancel the request", "Keep it running"))) return;
    try {
      const r = await api(`/admin/api/tasks/${id}/cancel`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      banner("");
      $("task-status").textContent = `Cancelled request #${r.root}: ${r.cancelled.length} task${r.cancelled.length === 1 ? "" : "s"} stopped.`;
      $("task-status").className = "status ok";
      loadTasks();
    } catch (e) { banner(e.message); }
  }

  // ---- Approvals ----
  // How a decided approval reads: the option chosen and its outcome (a label need not say it), or why
  // OPC rejected it. Options are {label, outcome}; the state is the outcome recorded.
  const SYSTEM_REJECTIONS = { timeout: "no decision in time", cancelled: "the request was cancelled", error: "the approval could not be processed" };
  function decisionText(a) {
    const verdict = a.state === "approved" ? "Approved" : "Rejected";
    const why = SYSTEM_REJECTIONS[a.decided_by];
    return why ? `${verdict}: ${why}` : `${verdict}: ${a.decision || "?"} — by ${a.decided_by || "?"}`;
  }
  async function loadApprovals() {
    try {
      const r = await api("/admin/api/approvals");
      const list = $("approval-list");
      const pending = r.approvals.filter((a) => a.state === "pending");
      const decided = r.approvals.filter((a) => a.state !== "pending");
      const card = (a) => {
        const parts = [el("div", { class: "head" }, el("strong", {}, `#${a.id} · ${a.agent}`), " ", badge(a.state),
          el("span", { class: "muted" }, ` asked ${when(a.created_at)}`)), el("p", {}, a.summary)];
        if (a.state === "pending") {
          parts.push(el("p", { class: "muted" }, `Expires ${when(a.expires_at)}.`), el("div", { class: "actions", "data-admin-only": "" },
            ...a.options.map((o) => el("button", { type: "button", class: o.outcome === "approve" ? "primary" : "", "data-decide": o.label,
              "data-outcome": o.outcome, onclick: () => decide(a.id, o.label) }, o.label))));
        } else {
          parts.push(el("p", { class: "muted" }, `${decisionText(a)}${a.decided_at ? ", " + when(a.decided_at) : ""}`));
        }
        return el("div", { class: "card", "data-approval": String(a.id) }, ...parts);
      };
      list.replaceChildren(el("h3", {}, `Pending (${pending.length})`),
        ...(pending.length ? pending.map(card) : [el("p", { class: "muted" }, "Nothing waits for a decision.")]),
        el("h3", {}, "Decided"), ...(decided.length ? decided.map(card) : [el("p", { class: "muted" }, "None yet.")]));
    } catch (e) { banner(e.message); }
  }
  async function decide(id, decision) {
    try {
      await api("/admin/api/approvals/" + id, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ decision }) });
      banner("");
    } catch (e) { banner(e.message); }
    loadApprovals();
  }

  // ---- Costs ----
  const memoryToday = (m) => m ? ` Memory work (facts, consolidation) today: ${money(m.cost_usd)} in ${m.calls} call${m.calls === 1 ? "" : "s"}, apart from the requests' own costs.` : "";
  async function loadCosts() {
    try {
      const r = await api("/admin/api/costs");
      const table = (title, rows) => {
        const max = Math.max(1e-9, ...rows.map((x) => x.cost_usd));
        return el("table", { class: "grid", "aria-label": title },
          el("thead", {}, el("tr", {}, el("th", {}, title), el("th", { class: "num" }, "Calls"), el("th", { class: "num" }, "Tokens"), el("th", { class: "num" }, "Cost"), el("th", {}, ""))),
          el("tbody", {}, ...(rows.length ? rows.map((x) => el("tr", {}, el("td", {}, x.key), el("td", { class: "num" }, String(x.calls)),
            el("td", { class: "num" }, tokens(x.tokens_in + x.tokens_out)), el("td", { class: "num" }, money(x.cost_usd)),
            el("td", { style: "width:25%" }, el("div", { class: "bar", style: `width:${(100 * x.cost_usd / max).toFixed(1)}%` }))))
            : [el("tr", {}, el("td", { colspan: "5", class: "muted" }, "No calls."))])));
      };
      const period = (name, label) => el("section", { class: "panel" }, el("h3", {}, label),
        el("p", { class: "big" }, money(r[name].total.cost_usd)), el("p", { class: "muted" }, `${r[name].total.calls} calls, ${tokens(r[name].total.tokens_in + r[name].total.tokens_out)} tokens`),
        table("Agent", r[name].by_agent), table("Model", r[name].by_model), table("Platform", r[name].by_platform),
        table("Work", r[name].by_work.map((x) => Object.assign({}, x, { key: x.key === "memory" ? "memory (facts, consolidation)" : x.key === "embedding" ? "embeddings (recall, facts)" : "tasks" }))),
        table("Memory work", r[name].memory_by_agent), table("Embeddings", r[name].embeddings || []));
      const top = r.today.by_agent[0], topModel = r.today.by_model[0];
      $("costs").replaceChildren(
        el("p", { class: "status" }, (top ? `Today the most expensive agent is ${top.key} (${money(top.cost_usd)}), and the most expensive model ${topModel.key} (${money(topModel.cost_usd)}).` : "No spend today.") +
          memoryToday(r.today.by_work.find((w) => w.key === "memory"))),
        el("div", { class: "costs" }, period("today", "Today"), period("week", "Last 7 days"), period("month", "Last 30 days")));
    } catch (e) { banner(e.message); }
  }

  // ---- Channels ----
  async function loadChannels() {
    try {
      const r = await api("/admin/api/channels");
      $("channel-list").replaceChildren(...r.channels.map((c) => el("div", { class: "card", "data-platform": c.platform },
        el("div", { class: "head" }, el("strong", {}, c.platform), " ", badge(c.connected ? "running" : "stopped")),
        el("p", {}, `${c.stats.events} event${c.stats.events === 1 ? "" : "s"} received since start` + (c.stats.last_event_at ? `, the last ${when(c.stats.last_event_at)}` : "") + "."),
        el("p", { class: c.stats.errors ? "status bad" : "muted" }, `${c.stats.errors} failed post${c.stats.errors === 1 ? "" : "s"}.`),
        ...(c.stats.recent_errors.length ? [el("ul", {}, ...c.stats.recent_errors.slice().reverse().map((e) => el("li", {}, `${when(e.at)}: ${e.doing}: ${e.error}`)))] : []))));
    } catch (e) { banner(e.message); }
  }

  // ---- Memory ----
  async function loadMemory() {
    api("/api/org").then((r) => $("memory-agents").replaceChildren(...r.agents.map((a) => el("option", { value: a.id }, a.role || a.id)))).catch(() => {});
    modules.blocks.load();
    loadFacts();
    // The graph view (graph.js), started once with this page's helpers.
    opcGraph({ $, api, el, badge, day, validity }).draw();
  }
  // Facts: an agent's, in one of four views; a row opens that fact's versions, oldest first.
  const day = (t) => t ? t.replace(/T00:00:00Z$/, "").replace("T", " ").replace(/Z$/, " UTC") : "open";
  const validity = (f) => f.valid_from || f.valid_to ? `${day(f.valid_from)} → ${day(f.valid_to)}` : "always";
  const provenance = (f) => `${f.source} · ${f.agent}${f.task != null ? " · task " + f.task : ""}${f.conversation ? " · " + f.conversation : ""}`;
  let openFact = null;
  $("facts-view").addEventListener("change", () => {
    const timed = ["at", "valid_at"].includes($("facts-view").value);
    $("facts-time").disabled = !timed;
    if (timed) $("facts-time").focus();
  });
  $("facts-form").addEventListener("submit", (event) => { event.preventDefault(); loadFacts(); });
  async function loadFacts() {
    const agent = $("facts-agent").value.trim(), view = $("facts-view").value, time = $("facts-time").value.trim();
    const params = new URLSearchParams();
    if (agent) params.set("agent", agent);
    if (view === "history") params.set("history", "true");
    else if (view !== "current") {
      if (!time) { $("facts-status").textContent = "Give a time: a date (2026-05-03) or RFC 3339."; return; }
      params.set(view, time);
    }
    try {
      const r = await api("/admin/api/memory/facts?" + params);
      const body = $("fact-list").tBodies[0];
      body.replaceChildren(...r.facts.map((f) => {
        const tr = el("tr", { class: "pick", tabindex: "0", "data-fact": String(f.fact_id), "data-version": String(f.id),
          "aria-selected": String(openFact === f.fact_id) },
          el("td", {}, `#${f.fact_id}`, el("div", { class: "meta muted" }, `v${f.id}` + (f.invalidated_at ? " · closed" : ""))),
          el("td", {}, f.text), el("td", {}, f.subject || ""), el("td", {}, validity(f)),
          el("td", {}, day(f.recorded_at)), el("td", {}, provenance(f)));
        const pick = () => { openFact = f.fact_id; for (const row of body.rows) row.setAttribute("aria-selected", String(row.dataset.fact === String(f.fact_id))); loadFact(f.fact_id); };
        tr.addEventListener("click", pick);
        tr.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
        return tr;
      }));
      if (!r.facts.length) body.append(el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No facts.")));
      const seen = { current: "current", at: `believed at ${r.time}`, valid_at: `true in the world at ${r.time}`, history: "every version" }[r.view];
      $("facts-status").textContent = `${r.facts.length} ${r.view === "history" ? "versions of" : "of"} ${r.agent}'s facts, ${seen}.` +
        (r.archival ? "" : ` Archival memory is off for ${r.agent}: no new facts are recorded.`);
    } catch (e) { $("facts-status").textContent = e.message; }
  }
  async function loadFact(id) {
    try {
      const r = await api("/admin/api/memory/facts/" + id);
      $("fact-history").replaceChildren(el("h4", {}, `Fact #${r.fact_id}: ${r.versions.length} version${r.versions.length === 1 ? "" : "s"}`),
        el("ol", { class: "hits", id: "fact-versions" }, ...r.versions.map((v) => el("li", { "data-version": String(v.id), "data-state": v.invalidated_at ? "closed" : "current" },
          el("div", {}, v.text, " ", badge(v.invalidated_at ? "closed" : "current")),
          el("div", { class: "meta" }, `valid ${validity(v)}; recorded ${day(v.recorded_at)}` + (v.invalidated_at ? `, closed ${day(v.invalidated_at)}` : "")),
          ...(v.reason ? [el("div", { class: "meta" }, "reason: " + v.reason)] : []),
          el("div", { class: "meta" }, provenance(v))))));
    } catch (e) { $("fact-history").replaceChildren(el("p", { class: "status bad" }, e.message)); }
  }
  $("memory-search").addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = $("memory-q").value.trim();
    if (!q) return;
    const agent = $("memory-agent").value.trim();
    try {
      const r = await api(`/admin/api/memory/search?q=${encodeURIComponent(q)}${agent ? "&agent=" + encodeURIComponent(agent) : ""}&limit=20`);
      $("memory-hits").replaceChildren(...(r.hits.length ? r.hits.map((h) => el("li", {},
        el("div", {}, h.message.text),
        el("div", { class: "meta" }, `${h.message.author} in ${h.message.namespace}, ${when(h.message.time_ms)}, conversation ${h.message.conversation} · score ${h.score.toFixed(3)}`)))
        : [el("li", { class: "muted" }, `Nothing ${r.agent} may read matches.`)]));
      banner("");
    } catch (e) { banner(e.message); }
  });

  // ---- Privacy ----
  // Where the NER model (names, addresses) stands, and what that means for LLM calls.
  function nerLine(r) {
    const n = r.ner;
    switch (n.state) {
      case "off": return "";
      case "ready": return "Names and addresses: the NER model is loaded; every detected type is masked.";
      case "loading": return r.requireNer
        ? `Names and addresses: the NER model is loading. LLM calls wait for it (up to ${r.nerWait}s, nerWait) and fail closed without it.`
        : "Names and addresses: the NER model is loading. Meanwhile calls are masked by patterns only (requireNer: false).";
      case "pattern_only": return `Pattern-only masking: ${n.reason}.`;
      case "failed": return `Names and addresses: the NER model could not be loaded (${n.reason}). LLM calls fail closed until it can: ` +
        "run `opc models fetch` (the next message loads it), or set requireNer: false to accept pattern-only masking.";
      default: return `NER model: ${n.state}`;
    }
  }

  async function loadPrivacy() {
    try {
      const r = await api("/admin/api/privacy");
      const types = [...new Set(r.days.flatMap((d) => Object.keys(d.masked)))].sort();
      const total = (k) => r.days.reduce((n, d) => n + (d.masked[k] || 0), 0);
      $("privacy-summary").textContent = r.enabled
        ? `The privacy gateway is on (${r.mode}). Last 30 days: ${r.days.reduce((n, d) => n + d.calls, 0)} calls handled` +
          (types.length ? `; most masked: ${types.slice().sort((a, b) => total(b) - total(a)).slice(0, 3).map((k) => `${k} ${total(k)}`).join(", ")}.` : ", nothing masked.")
        : "The privacy gateway is off (framework.privacy.enabled): LLM calls carry text as written.";
      $("privacy-ner").textContent = nerLine(r);
      $("privacy-ner").className = r.ner.state === "failed" ? "status error" : "status";
      const table = $("privacy-days");
      table.tHead.replaceChildren(el("tr", {}, el("th", {}, "Day"), el("th", { class: "num" }, "Calls"),
        ...types.map((k) => el("th", { class: "num" }, k)), el("th", { class: "num" }, "Routed"), el("th", { class: "num" }, "Blocked")));
      table.tBodies[0].replaceChildren(...(r.days.length ? r.days.slice().reverse().map((d) => el("tr", {}, el("td", {}, d.day),
        el("td", { class: "num" }, String(d.calls)), ...types.map((k) => el("td", { class: "num" }, String(d.masked[k] || 0))),
        el("td", { class: "num" }, String(d.routed)), el("td", { class: "num" }, String(d.blocked))))
        : [el("tr", {}, el("td", { colspan: String(types.length + 4), class: "muted" }, "No calls handled in the last 30 days."))]));
    } catch (e) { banner(e.message); }
  }

  // ---- Events ----
  const eventKinds = ["task_created", "agent_started", "tool_called", "tool_finished", "delegated", "stream_restarted", "privacy_masked",
    "privacy_blocked", "agent_finished", "escalated", "approval_requested", "approval_resolved", "config_reloaded", "config_rejected"];
  let paused = false;
  function startEvents() {
    $("event-kind").append(...eventKinds.map((k) => el("option", { value: k }, k.replace(/_/g, " "))));
    api("/admin/api/agents").then((r) => $("event-agents").replaceChildren(...r.agents.map((a) => el("option", { value: a.id })))).catch(() => {});
    const body = $("event-list").tBodies[0];
    const filter = () => {
      const agent = $("event-agent").value.trim(), kind = $("event-kind").value;
      for (const row of body.rows) row.hidden = (agent && row.dataset.agent !== agent) || (kind && row.dataset.kind !== kind);
    };
    $("event-agent").addEventListener("input", filter);
    $("event-kind").addEventListener("change", filter);
    $("event-pause").addEventListener("click", () => {
      paused = !paused;
      $("event-pause").setAttribute("aria-pressed", String(paused));
      $("event-pause").textContent = paused ? "Resume" : "Pause";
    });
    const add = (data, kind) => {
      if (paused) return;
      const agent = data.agent || data.from || "";
      const detail = kind === "delegated" ? `${data.from} → ${data.to} (#${data.child})` : kind === "tool_called" ? data.tool
        : kind === "tool_finished" ? `${data.tool}${data.detail ? ` (${data.detail})` : ""}: ${data.outcome}${data.exit_code != null ? `, exit ${data.exit_code}` : ""}, ${span(data.duration_ms)}`
        : kind === "agent_finished" ? `${data.state}, ${tokens(data.tokens_in + data.tokens_out)} tokens, ${money(data.cost_usd)}, ${span(data.duration_ms)}`
        : kind === "approval_requested" ? data.summary : kind === "approval_resolved" ? `${data.decision} by ${data.by}`
        : kind === "escalated" ? `${data.kind}: ${data.reason}` : kind === "config_reloaded" ? `generation ${data.generation} (${data.trigger})`
        : kind === "config_rejected" ? `${data.errors} error(s) (${data.trigger})` : kind === "privacy_masked" ? `${data.total} masked (${data.mode})` : "";
      const row = el("tr", { "data-kind": kind, "data-agent": agent }, el("td", {}, new Date().toLocaleTimeString()),
        el("td", {}, kind.replace(/_/g, " ")), el("td", {}, agent), el("td", {}, data.task ? "#" + data.task : ""), el("td", {}, detail));
      body.prepend(row);
      while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
      filter();
    };
    on("*", add);
    on("stream_state", (d) => { $("event-state").textContent = d.text; });
    $("event-state").textContent = streamText;
    modules.logs.load();
  }
  // The stream itself, from the page's start: its events reach the listeners above (`on`).
  // EventSource cannot send headers: with an access token, stream with fetch instead.
  let streamText = "Connecting…";
  const state = (t) => { streamText = t; dispatch("stream_state", { text: t }); };
  function startStream() {
    (async function stream() {
      while (true) {
        try {
          const r = await fetch("/admin/api/events", { headers: headers({ Accept: "text/event-stream" }), cache: "no-store" });
          if (!r.ok) throw new Error("the server answered " + r.status);
          state("Live.");
          const reader = r.body.getReader(), decoder = new TextDecoder();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true });
            let cut;
            while ((cut = buffer.indexOf("\n\n")) >= 0) {
              const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
              let kind = "message", data = "";
              for (const line of block.split("\n")) {
                if (line.startsWith("event:")) kind = line.slice(6).trim();
                else if (line.startsWith("data:")) data += line.slice(5).trim();
              }
              if (!data) continue;
              let parsed;
              try { parsed = JSON.parse(data); } catch (e) { continue; /* a malformed event is skipped */ }
              if (kind === "lagged") state(`Live (missed ${parsed.missed} events while busy).`); else dispatch(kind, parsed);
            }
          }
          state("Disconnected; reconnecting…");
        } catch (e) { state("Disconnected (" + e.message + "); reconnecting…"); }
        await new Promise((r) => setTimeout(r, 2000));
      }
    })();
  }
  // Each model provider: its key (set, or the variable to set) and its last call's outcome.
  async function loadProviders() {
    try {
      const r = await api("/admin/api/providers");
      const body = $("provider-list").tBodies[0];
      body.replaceChildren(...r.providers.map((p) => {
        const users = p.used_by.length ? p.used_by.join(", ") : (p.summaries ? "" : "no agent");
        const key = !p.key ? el("span", { class: "muted" }, "none needed")
          : p.key.set ? el("span", { class: "status ok" }, p.key.var + " is set")
          : el("span", { class: "status bad" }, p.key.var + " is not set: set it where opc run runs, then restart it");
        const last = p.last_call;
        const call = !last ? el("span", { class: "muted" }, "no call yet")
          : last.outcome === "ok" ? el("span", { class: "status ok" }, "ok, " + when(last.at))
          : el("span", { class: "status bad", title: last.message }, last.kind + ", " + when(last.at));
        return el("tr", { "data-provider": p.id, "data-state": p.state },
          el("td", {}, el("strong", {}, p.id), " ", el("span", { class: "muted" }, p.kind)),
          el("td", {}, users + (p.summaries ? (users ? "; " : "") + "summaries" : "")),
          el("td", {}, key), el("td", {}, call));
      }));
    } catch (e) { /* the tree itself still shows */ }
  }
  // The cluster's nodes (PostgreSQL): shown only when this process is one of them.
  async function loadNodes() {
    try {
      const r = await api("/admin/api/nodes");
      $("nodes").hidden = !r.cluster;
      if (!r.cluster) return;
      const body = $("node-list").tBodies[0];
      body.replaceChildren(...r.nodes.map((n) => {
        const state = n.state === "alive" ? el("span", { class: "status ok" }, "alive")
          : el("span", { class: n.state === "lost" ? "status bad" : "muted" }, n.state === "lost" ? "lost (no heartbeat)" : "stopped");
        const config = n.config_differs
          ? el("span", { class: "status bad", title: `the newest live node runs ${r.newest_digest}` }, n.config_digest + " differs")
          : el("span", { class: "muted" }, n.config_digest);
        return el("tr", { "data-node": n.id, "data-state": n.state, "data-config": n.config_differs ? "differs" : "same" },
          el("td", {}, el("strong", {}, n.id), n.this ? el("span", { class: "muted" }, " (this console)") : "", " ", el("span", { class: "muted" }, `${n.host}, pid ${n.pid}`)),
          el("td", {}, n.address || "—"), el("td", {}, when(n.started_ms)), el("td", {}, n.heartbeat_age + " ago"), el("td", {}, state),
          el("td", { class: "num" }, String(n.trees)), el("td", { class: "num" }, `${n.slots_in_use}/${n.slots_total}`), el("td", {}, config));
      }));
    } catch (e) { /* the tree itself still shows */ }
  }
  // Live state per agent, from the running engine.
  let states = new Map(), chosen = null;
  async function loadStates() {
    try {
      const r = await api("/admin/api/agents");
      states = new Map(r.agents.map((a) => [a.id, a]));
      if (r.generation !== orgGeneration) { loadOrg(); return; }
      for (const b of document.querySelectorAll("#org-tree button[data-agent]")) {
        const a = states.get(b.dataset.agent);
        const tag = b.querySelector(".state");
        if (a && tag) { tag.className = stateClass(a.state); tag.textContent = a.state + (a.tasks.length > 1 ? " ×" + a.tasks.length : ""); }
      }
      if (chosen) details(chosen);
      loadProviders();
      loadNodes();
    } catch (e) { /* the tree itself still shows */ }
  }
  function choose(a, button) {
    for (const b of document.querySelectorAll(".tree button[aria-pressed=true]")) b.setAttribute("aria-pressed", "false");
    button.setAttribute("aria-pressed", "true");
    chosen = a;
    details(a);
  }
  function details(a) {
    const s = states.get(a.id);
    const row = (k, v) => [el("dt", {}, k), el("dd", {}, v)];
    const rows = [...row("id", a.id), ...row("level", String(a.level)), ...row("reports to", a.parent || "—"),
      ...row("manages", a.children.join(", ") || "—")];
    if (s) {
      rows.push(...row("model", s.model), ...row("tools", s.tools.join(", ") || "—"),
        ...row("prompt", s.prompt ? (s.prompt.file ? "file: " + s.prompt.file : s.prompt.text) : "—"),
        ...row("state", s.state), ...row("today", `${tokens(s.tokens_today)} tokens, ${money(s.cost_today)}`));
    }
    const parts = [el("h3", {}, a.role || a.id), el("dl", {}, ...rows)];
    if (s && s.tasks.length) {
      parts.push(el("h4", {}, "Tasks in flight"), el("ul", {}, ...s.tasks.map((t) =>
        el("li", {}, el("a", { href: "#tasks", onclick: () => { openTask = t.root; } }, `#${t.id}`), " ", badge(t.state), ` of request #${t.root}`))));
    }
    $("agent").replaceChildren(...parts);
  }

  // ---- Config ----
  const text = $("config-text"), gutter = $("gutter"), highlight = $("highlight"), notes = $("notes");
  let diagnostics = [], timer = null, sequence = 0;
  // The file as loaded (or last saved) and its ETag; `valid` is the last validation's verdict.
  let original = "", etag = null, valid = false;
  const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

  // One YAML line as highlighted HTML; `mark` = [column (1-based), kind] underlines from there to the
  // end of the token.
  function paint(line, mark) {
    let html = "", i = 0;
    const m = line.match(/^(\s*(?:-\s+)?)([^\s#'"][^:#]*?|"[^"]*"|'[^']*')(\s*:)(?=\s|$)/);
    const pieces = [];
    if (m) { pieces.push([m[1], ""], [m[2], "k"], [m[3], ""]); i = m[0].length; }
    const rest = line.slice(i);
    const re = /((?:^|(?<=\s))#.*$)|("(?:[^"\\]|\\.)*"?|'[^']*'?)|((?<![\w.-])-?\d+(?:\.\d+)?(?![\w.-]))|((?<![\w-])(?:true|false|null|yes|no)(?![\w-]))/g;
    let last = 0, r;
    while ((r = re.exec(rest))) {
      if (r.index > last) pieces.push([rest.slice(last, r.index), ""]);
      const kind = r[1] !== undefined ? "c" : r[2] !== undefined ? "s" : r[3] !== undefined ? "n" : "b";
      pieces.push([r[0], kind]);
      last = re.lastIndex;
      if (r[1] !== undefined) break;
    }
    if (last < rest.length) pieces.push([rest.slice(last), ""]);
    let col = 1;
    for (const [piece, kind] of pieces) {
      let body = piece;
      if (mark && mark[0] >= col && mark[0] < col + piece.length) {
        const at = mark[0] - col;
        const tail = body.slice(at), word = tail.match(/^\S+/);
        const len = word ? word[0].length : Math.max(1, tail.length);
        body = esc(body.slice(0, at)) + `<span class="mark-${mark[1]}">${esc(tail.slice(0, len))}</span>` + esc(tail.slice(len));
      } else body = esc(body);
      html += kind ? `<span class="${kind}">${body}</span>` : body;
      col += piece.length;
    }
    if (mark && mark[0] >= col) html += `<span class="mark-${mark[1]}"> </span>`;
    return html;
  }

  function render() {
    const lines = text.value.split("\n");
    const at = new Map();
    for (const d of diagnostics) {
      const prev = at.get(d.line);
      if (!prev || (prev.kind === "w" && d.kind === "e")) at.set(d.line, d);
    }
    gutter.innerHTML = lines.map((_, i) => {
      const d = at.get(i + 1);
      return d ? `<span class="${d.kind}" title="${esc(d.message)}">${i + 1}</span>` : String(i + 1);
    }).join("\n") + "\n";
    highlight.innerHTML = lines.map((l, i) => {
      const d = at.get(i + 1);
      return paint(l, d ? [d.column, d.kind] : null);
    }).join("\n") + "\n";
    const lh = parseFloat(getComputedStyle(text).lineHeight) || 20;
    notes.replaceChildren(...[...at.values()].map((d) => {
      const n = el("div", { class: "note " + d.kind }, d.message);
      n.style.top = (8 + (d.line - 1) * lh) + "px";
      return n;
    }));
    sync();
  }
  function sync() {
    gutter.scrollTop = text.scrollTop;
    highlight.scrollTop = text.scrollTop; highlight.scrollLeft = text.scrollLeft;
    notes.style.transform = `translateY(${-text.scrollTop}px)`;
  }
  text.addEventListener("scroll", sync);
  text.addEventListener("input", () => { render(); buttons(); clearTimeout(timer); timer = setTimeout(validate, 250); });

  function buttons() {
    const dirty = text.value !== original;
    $("dirty").textContent = dirty ? "Edited, not saved." : "";
    $("revert").disabled = !dirty;
    $("save").disabled = !dirty || !valid;
  }

  // A modal with a diff; resolves true when confirmed.
  function ask(title, message, diffText, okLabel, cancelLabel) {
    const dialog = $("dialog");
    $("dialog-title").textContent = title;
    $("dialog-text").textContent = message;
    const pre = $("dialog-diff");
    pre.replaceChildren(...(diffText || "").split("\n").map((l) =>
      el("span", { class: l.startsWith("+++") || l.startsWith("---") ? "" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "" }, l + "\n")));
    pre.hidden = !diffText;
    $("dialog-ok").textContent = okLabel;
    $("dialog-cancel").textContent = cancelLabel || "Cancel";
    $("dialog-cancel").hidden = cancelLabel === null;
    return new Promise((resolve) => {
      const done = (answer) => { dialog.close(); $("dialog-ok").onclick = $("dialog-cancel").onclick = null; resolve(answer); };
      $("dialog-ok").onclick = () => done(true);
      $("dialog-cancel").onclick = () => done(false);
      dialog.oncancel = () => done(false);
      dialog.showModal();
      $("dialog-ok").focus();
    });
  }

  async function save() {
    try {
      const preview = await api("/admin/api/config/diff", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: text.value }),
      });
      const ok = await ask("Save opc.config.yaml?", `${preview.added} line${preview.added === 1 ? "" : "s"} added, ${preview.removed} removed, against the file on disk.`, preview.diff, "Save");
      if (!ok) return;
      const r = await fetch("/admin/api/config/save", {
        method: "POST", cache: "no-store", headers: headers({ "Content-Type": "application/json" }),
        body: JSON.stringify({ text: text.value, etag, base: original }),
      });
      const body = await r.json().catch(() => ({}));
      if (r.status === 409) {
        const reload = await ask("The file changed on disk", body.error, body.diff, "Load the file from disk (drops your edits)", "Keep editing");
        if (reload) { original = body.text; etag = body.etag; text.value = body.text; render(); buttons(); validate(); }
        return;
      }
      if (r.status === 401) throw new Error("Signed out: sign in again in another tab, then save (your edits are kept here).");
      if (!r.ok) throw new Error(body.error || ("the server answered " + r.status));
      const saved = text.value;
      original = saved; etag = body.etag;
      buttons();
      const status = $("config-status");
      status.textContent = "Saved. " + describeReload(body.reload);
      status.className = "status " + (body.applied ? "ok" : "error");
      loadHistory();
      loadClusterHistory();
      watchReloads();
    } catch (e) { banner(e.message); }
  }
  $("save").addEventListener("click", save);
  $("revert").addEventListener("click", async () => {
    if (await ask("Discard your edits?", "The editor goes back to the file as loaded.", "", "Discard")) {
      text.value = original; render(); buttons(); validate();
    }
  });

  async function loadHistory() {
    try {
      const h = await api("/admin/api/config/history");
      const list = $("history");
      list.replaceChildren(...h.versions.map((v) => el("li", {},
        el("code", {}, v.name),
        el("button", { type: "button", onclick: () => showVersion(v.name, false) }, "Diff with the editor"),
        el("button", { type: "button", onclick: () => showVersion(v.name, true) }, "Restore…"))));
      if (!h.versions.length) list.append(el("li", { class: "muted none" }, "No earlier versions yet: each save keeps the one it replaces."));
    } catch (e) { banner(e.message); }
  }
  // The cluster's config history (PostgreSQL): shown only when this process is a node of one;
  // alone, the file's history above is the whole history.
  async function loadClusterHistory() {
    try {
      const r = await api("/admin/api/config/cluster");
      $("cluster-history").hidden = !r.cluster;
      $("cluster-history").dataset.cluster = String(!!r.cluster);
      if (!r.cluster) return;
      const nodes = (ids) => ids.length ? ids.map((id) => id === r.this ? id + " (this console)" : id).join(", ") : "—";
      const rows = r.versions.map((v) => el("tr", { "data-config-version": String(v.id), "data-digest": v.digest, "data-saved-on": v.node, "data-running": v.running.join(" ") },
        el("td", { class: "num" }, String(v.id)),
        el("td", { title: v.saved_age + " ago" }, when(v.saved_ms)),
        el("td", {}, el("strong", {}, v.node), v.by ? el("span", { class: "muted" }, " by " + v.by) : ""),
        el("td", {}, el("code", {}, v.digest)),
        el("td", {}, nodes(v.running))));
      for (const u of r.unlisted) {
        rows.push(el("tr", { "data-config-version": "unlisted", "data-digest": u.digest, "data-running": u.running.join(" ") },
          el("td", { class: "num" }, "—"), el("td", { class: "muted" }, "not saved in the cluster"), el("td", {}, "—"),
          el("td", {}, el("code", {}, u.digest)), el("td", {}, nodes(u.running))));
      }
      if (!rows.length) rows.push(el("tr", { class: "muted none" }, el("td", { colspan: "5" }, "Nothing saved in the cluster yet: a save here is recorded, and every node follows it.")));
      $("cluster-history-list").tBodies[0].replaceChildren(...rows);
    } catch (e) { /* the editor still works; the next refresh tries again */ }
  }
  async function showVersion(name, restore) {
    try {
      const v = await api("/admin/api/config/history/" + encodeURIComponent(name));
      const preview = await api("/admin/api/config/diff", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: v.text }),
      });
      if (!restore) { await ask("Version " + name, "From the file on disk to this version.", preview.diff || "(the same as the file on disk)", "Close", null); return; }
      if (await ask("Restore " + name + "?", "The editor gets this version; review it, then save it like any edit.", preview.diff, "Put it in the editor")) {
        text.value = v.text; render(); buttons(); validate(); text.focus();
      }
    } catch (e) { banner(e.message); }
  }
  text.addEventListener("keydown", (e) => {
    // Tab indents by two spaces (YAML has no tabs); Escape leaves the editor for keyboard users.
    if (e.key === "Tab" && !e.shiftKey && !e.ctrlKey && !e.altKey) {
      e.preventDefault();
      document.execCommand("insertText", false, "  ") || text.setRangeText("  ", text.selectionStart, text.selectionEnd, "end");
    } else if (e.key === "Escape") { text.blur(); $("problems").focus(); }
  });

  async function validate() {
    const mine = ++sequence;
    try {
      const report = await api("/admin/api/config/validate", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: text.value }),
      });
      if (mine !== sequence) return; // a newer edit is being checked
      banner("");
      diagnostics = [
        ...report.errors.map((d) => Object.assign({ kind: "e" }, d)),
        ...report.warnings.map((d) => Object.assign({ kind: "w" }, d)),
      ];
      const status = $("config-status");
      const e = report.errors.length, w = report.warnings.length;
      status.textContent = report.valid
        ? `Valid${w ? ` — ${w} warning${w === 1 ? "" : "s"}` : ""}.`
        : `${e} error${e === 1 ? "" : "s"}${w ? `, ${w} warning${w === 1 ? "" : "s"}` : ""}.`;
      status.className = "status " + (report.valid ? "ok" : "bad");
      valid = report.valid;
      modules.preview.update(report, text.value);
      buttons();
      listProblems();
      render();
    } catch (err) { if (mine === sequence) banner(err.message); }
  }

  function listProblems() {
    const list = $("problems");
    list.replaceChildren(...diagnostics.map((d) => el("li", { class: d.kind },
      el("button", { type: "button", onclick: () => jump(d) },
        el("span", { class: "sev" }, d.kind === "e" ? "error" : "warning"),
        ` line ${d.line}, column ${d.column}${d.path ? " (" + d.path + ")" : ""}: ${d.message}`,
        d.hint ? el("span", { class: "hint" }, "hint: " + d.hint) : ""))));
    if (!diagnostics.length) list.append(el("li", { class: "muted none" }, "None."));
  }

  function jump(d) {
    const lines = text.value.split("\n");
    let offset = 0;
    for (let i = 0; i < d.line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
    offset += Math.max(0, d.column - 1);
    text.focus();
    text.setSelectionRange(offset, offset);
    const lh = parseFloat(getComputedStyle(text).lineHeight) || 20;
    text.scrollTop = Math.max(0, (d.line - 3) * lh);
    sync();
  }

  // ---- Structured edits: small text changes the server makes, reviewed here before a save ----
  const editDialog = $("edit-dialog");
  function editFields() {
    const kind = $("edit-kind").value;
    for (const row of editDialog.querySelectorAll("label[data-for]")) row.hidden = !row.dataset.for.split(" ").includes(kind);
    $("edit-id-label").textContent = kind === "add_agent" ? "New agent's id" : "Agent id";
    const field = $("edit-field").value;
    $("edit-value-label").textContent = kind === "add_agent" ? "Tools (comma-separated)"
      : field === "tools" || field === "approvers" ? field + " (comma-separated)" : field;
  }
  $("edit-kind").addEventListener("change", editFields);
  $("edit-field").addEventListener("change", editFields);
  $("org-action").addEventListener("click", () => {
    $("edit-error").hidden = true;
    editFields();
    editDialog.showModal();
    $("edit-kind").focus();
    // The agent ids are suggestions for the fields; they arrive while the form is already usable.
    api("/api/org").then((org) => $("agent-ids").replaceChildren(...org.agents.map((a) => el("option", { value: a.id }, a.role || a.id))))
      .catch(() => {});
  });
  $("edit-cancel").addEventListener("click", () => editDialog.close());
  const items = (v) => v.split(",").map((x) => x.trim()).filter(Boolean);
  $("edit-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const kind = $("edit-kind").value, id = $("edit-id").value.trim();
    const action = { kind, id };
    if (kind === "add_agent") Object.assign(action, { parent: $("edit-parent").value.trim(), role: $("edit-role").value.trim(), tools: items($("edit-value").value) });
    if (kind === "move_agent") action.parent = $("edit-parent").value.trim();
    if (kind === "set_field") {
      const field = $("edit-field").value, v = $("edit-value").value;
      Object.assign(action, { field, values: field === "tools" || field === "approvers" ? items(v) : [v] });
    }
    if (kind === "share_with") action.with = $("edit-with").value.trim();
    try {
      const r = await api("/admin/api/config/edit", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: text.value, action }),
      });
      editDialog.close();
      text.value = r.text;
      render(); buttons(); validate();
      text.focus();
    } catch (e) {
      $("edit-error").textContent = e.message;
      $("edit-error").hidden = false;
    }
  });

  // ---- Hot reload: what the running process did with the file ----
  function describeReload(r) {
    if (!r) return "";
    switch (r.outcome) {
      case "applied": {
        const parts = [`Applied: the org now runs generation ${r.generation} (${r.agents} agents)`];
        if (r.added.length) parts.push("added " + r.added.join(", "));
        if (r.removed.length) parts.push("removed " + r.removed.join(", "));
        if (r.changed && r.changed.length) parts.push("changed " + r.changed.map((c) => `${c.agent} (${c.what.join(", ")})`).join(", "));
        if (r.sections && r.sections.length) parts.push("changed " + r.sections.join(", "));
        let s = parts.join("; ") + ". New conversations use it; requests already running finish with the config they started with.";
        for (const l of r.removed_live) s += ` ${l.agent} was removed but has ${l.tasks} live task${l.tasks === 1 ? "" : "s"}: ${l.tasks === 1 ? "it finishes" : "they finish"} first.`;
        if (r.restart_needed.length) s += ` Changed settings that apply at the next restart of opc run: ${r.restart_needed.join(", ")}.`;
        return s;
      }
      case "unchanged": return r.restored ? "The file matches the running config again: the refused change is withdrawn." : "The running config already matches the file.";
      case "rejected": return "Not applied: the running config stays. " + (r.message || "").split("\n")[0];
      default: return "opc run applies it at its next start.";
    }
  }
  // The banner says when the file on disk was refused (edited outside the console, say), and the Org
  // page follows applied reloads. Polled: cheap, and it needs no open stream per tab.
  let reloadSeen = 0;
  async function watchReloads() {
    try {
      const s = await api("/admin/api/reload");
      if (s.stale && s.last) {
        banner(`The config on disk was not applied (${s.last.trigger}, ${s.last.at}): ${s.last.message.split("\n")[0]} — the running config (generation ${s.generation}) stays. Fix it on the Config page.`);
      } else if (reloadSeen && $("banner").textContent.startsWith("The config on disk was not applied")) {
        banner("");
      }
      if (s.generation !== reloadSeen) {
        reloadSeen = s.generation;
        if (loaded.org && s.generation !== orgGeneration) loadOrg();
      }
    } catch (e) { /* the next poll tries again; page errors are shown where they happen */ }
  }
  watchReloads();
  setInterval(watchReloads, 3000);

  async function loadConfig() {
    try {
      const config = await api("/admin/api/config");
      $("config-file").textContent = config.file;
      text.value = config.text;
      original = config.text; etag = config.etag;
      render();
      buttons();
      // A viewer reads the config and changes nothing: no editing, and no checks as you type (the
      // server refuses a viewer's every POST, the checks' too).
      await sessionKnown;
      if (document.body.dataset.role === "viewer") {
        text.readOnly = true;
        $("config-status").textContent = "Read-only console (viewer token): the config can be read here, not edited.";
      } else validate();
      loadHistory();
      loadClusterHistory();
    } catch (e) { loaded.config = false; $("config-status").textContent = e.message; banner(e.message); }
  }

  // ---- the page modules ----
  // What every module gets. Hooks each returns (all may be no-ops):
  //   session.start()                       at boot: who is signed in (sets body[data-role]), sign-out
  //   overview.load() / .refresh()          the Overview page (#overview)
  //   orgGraph.load() / .refresh()          the Org page's graph (#org-graph)
  //   timeline.show(rootTaskId)             the Tasks page's waterfall for one request (#task-timeline)
  //   blocks.load()                         the Memory page's core blocks, editable by admins (#blocks)
  //   logs.load()                           the Events page's stored history (#event-history)
  //   vault.load() / .refresh()             the Privacy page's vault status (#vault)
  //   preview.update(report, text)          the Config page's hierarchy preview (#config-preview)
  const ctx = { $, api, el, badge, banner, money, tokens, when, span, stateClass, day, validity, on, headers, adminOnly,
    token, isShown: (name) => current === name };
  const modules = {
    session: opcSession(ctx), overview: opcOverview(ctx), orgGraph: opcOrgGraph(ctx), timeline: opcTimeline(ctx),
    blocks: opcBlocks(ctx), logs: opcLogs(ctx), vault: opcVault(ctx), preview: opcPreview(ctx),
  };
  sessionKnown = Promise.resolve(modules.session.start()).catch(() => {});
  startStream();
  show();
})();
