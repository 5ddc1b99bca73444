// The Overview page (#overview, the console's first page): active requests, agents by state, approvals
// waiting with their age, spend today and over 7 days, the providers' health, the NER model's state and
// the last 20 events, from GET /admin/api/overview.
//
// Live: every engine event on the console's stream is prepended to the events at once, and asks for a
// fresh read of the counts, at most one a second; admin.js calls refresh() every 3 s while the page is
// shown. Hooks for tests and automation: data-overview-card="requests|agents|approvals|spend|providers|
// ner|events" on each card, data-count on each number (its value, unformatted), data-state on agent
// counts, data-request / data-approval / data-event on list items. Event details come from
// opcEventDetail (logs.js), so both pages word an event the same way.
const opcOverview = (ctx) => {
  const { $, api, el, money, tokens } = ctx;
  let loaded = false, last = null, timer = null, fetched = 0, inFlight = false;
  let live = []; // events heard since the last read: [{kind, data, at}]

  const count = (n, text, attrs) => el("span", Object.assign({ class: "ov-count", "data-count": String(n) }, attrs || {}), text === undefined ? String(n) : text);
  const card = (name, title, ...body) => el("section", { class: "ov-card", "data-overview-card": name, "aria-label": title },
    el("h3", {}, title), ...body);
  const age = (ms) => ms < 60000 ? Math.max(0, Math.round(ms / 1000)) + " s" : ms < 3600000 ? Math.floor(ms / 60000) + " min" : (ms / 3600000).toFixed(1) + " h";

  // The NER model's state in one line (the Privacy page says the same at length).
  const nerText = (n) => {
    const r = n.readiness || {};
    if (!n.enabled) return ["off", "The privacy gateway is off: LLM calls carry text as written."];
    switch (r.state) {
      case "ready": return ["ready", "NER model loaded: names and addresses are masked."];
      case "loading": return ["loading", n.requireNer ? `NER model loading: calls wait up to ${n.nerWait}s, and fail closed without it.` : "NER model loading: masking by patterns meanwhile."];
      case "pattern_only": return ["pattern only", "Pattern-only masking: " + r.reason + "."];
      case "failed": return ["failed", `NER model failed to load (${r.reason}): LLM calls fail closed. Run \`opc models fetch\`, or set requireNer: false.`];
      case "off": return ["off", "Privacy masking is off."];
      default: return [String(r.state || "unknown"), "NER model: " + (r.state || "unknown")];
    }
  };

  const eventRow = (e) => el("li", { "data-event": e.id === undefined ? "" : String(e.id), "data-kind": e.kind },
    el("span", { class: "ov-time" }, new Date(e.at).toLocaleTimeString()), " ",
    el("strong", {}, e.kind.replace(/_/g, " ")), " ",
    el("span", { class: "muted" }, [e.agent, e.task ? "#" + e.task : ""].filter(Boolean).join(" ")), " ",
    opcEventDetail(ctx, e.kind, e.data || {}));

  function draw(r) {
    const a = r.agents, sp = r.spend;
    const requests = card("requests", "Active requests",
      el("p", { class: "big" }, count(r.requests.active)),
      r.requests.list.length
        ? el("ul", { class: "ov-list" }, ...r.requests.list.map((t) => el("li", { "data-request": String(t.id) },
            el("a", { href: "#tasks", "aria-label": `Request #${t.id}, ${t.state.toLowerCase()}, open the Tasks page` }, "#" + t.id),
            " ", ctx.badge(t.state), " ", el("span", {}, t.input), " ", el("span", { class: "muted" }, age(t.age_ms)))))
        : el("p", { class: "muted" }, "Nothing running."));
    const states = [["working", "Working"], ["waiting", "Waiting"], ["failed", "Failed"], ["idle", "Idle"]];
    const agents = card("agents", "Agents",
      el("dl", { class: "ov-states" }, ...states.flatMap(([s, label]) => [el("dt", { class: "ov-" + s }, label),
        el("dd", {}, count(a[s], undefined, { "data-state": s }))])),
      el("p", { class: "muted" }, `${a.total} in the org. Failed: its last task in 24 h failed.`),
      el("a", { href: "#org" }, "The org"));
    const approvals = card("approvals", "Approvals waiting",
      el("p", { class: "big" + (r.approvals.waiting ? " ov-attention" : "") }, count(r.approvals.waiting)),
      r.approvals.list.length
        ? el("ul", { class: "ov-list" }, ...r.approvals.list.map((p) => el("li", { "data-approval": String(p.id) },
            el("a", { href: "#approvals" }, `#${p.id} ${p.agent}`), " ", el("span", {}, p.summary), " ",
            el("span", { class: "muted", "data-age": String(p.age_ms) }, "waiting " + age(p.age_ms)))))
        : el("p", { class: "muted" }, "Nothing waits for a decision."));
    const spend = card("spend", "Spend",
      el("dl", { class: "ov-states" },
        el("dt", {}, "Today (UTC)"), el("dd", {}, count(sp.today.cost_usd, money(sp.today.cost_usd), { "data-period": "today" })),
        el("dt", {}, "Last 7 days"), el("dd", {}, count(sp.week.cost_usd, money(sp.week.cost_usd), { "data-period": "week" }))),
      el("p", { class: "muted" }, `Today: ${sp.today.calls} calls, ${tokens(sp.today.tokens_in + sp.today.tokens_out)} tokens.`),
      el("a", { href: "#costs" }, "Costs"));
    const providers = card("providers", "Providers",
      r.providers.length ? el("ul", { class: "ov-list" }, ...r.providers.map((p) => {
        const bad = p.state === "key missing" || (p.last_call && p.last_call.outcome === "error");
        const lastCall = p.last_call ? (p.last_call.outcome === "ok" ? "last call ok" : "last call failed: " + p.last_call.kind) : "no call yet";
        return el("li", { "data-provider": p.id, "data-health": bad ? "bad" : "ok" },
          el("strong", {}, p.id), " ", el("span", { class: bad ? "ov-bad" : "ov-ok" }, `${p.state}; ${lastCall}`));
      })) : el("p", { class: "muted" }, "No providers."));
    const [nerState, nerLine] = nerText(r.ner);
    const ner = card("ner", "Privacy (NER)",
      el("p", { class: "ov-ner", "data-ner": nerState }, ctx.badge(nerState)), el("p", {}, nerLine),
      el("a", { href: "#privacy" }, "Privacy"));
    const events = card("events", "Last events",
      r.events_error ? el("p", { class: "status bad" }, r.events_error) : "",
      el("ol", { class: "ov-events", id: "overview-events", "aria-live": "polite" }),
      el("a", { href: "#events" }, "All events"));
    $("overview").replaceChildren(el("div", { class: "ov-grid" }, requests, agents, approvals, spend, providers, ner), events);
    drawEvents();
  }

  // Stored events, with the ones heard since the read (not yet stored) first; at most 20.
  function drawEvents() {
    const list = $("overview-events");
    if (!list || !last) return;
    const stored = last.events;
    const newest = stored.length ? stored[0].at : 0;
    const same = (l) => stored.some((e) => e.kind === l.kind && e.task === (l.data.task ?? null) && Math.abs(e.at - l.at) < 5000);
    const fresh = live.filter((l) => l.at >= newest - 1000 && !same(l))
      .map((l) => ({ kind: l.kind, at: l.at, agent: l.data.agent || l.data.from || "", task: l.data.task, data: l.data }));
    const rows = [...fresh, ...stored].slice(0, 20);
    list.replaceChildren(...(rows.length ? rows.map(eventRow) : [el("li", { class: "muted" }, "No events yet.")]));
  }

  async function refresh() {
    if (inFlight) return;
    inFlight = true;
    try {
      const r = await api("/admin/api/overview");
      last = r;
      fetched = Date.now();
      live = live.filter((l) => l.at > Date.now() - 5000);
      draw(r);
    } catch (e) {
      $("overview").replaceChildren(el("p", { class: "status bad", role: "alert" }, e.message));
    } finally { inFlight = false; }
  }

  // A re-read at most once a second, however many events arrive.
  function soon() {
    if (timer) return;
    timer = setTimeout(() => { timer = null; refresh(); }, Math.max(0, 1000 - (Date.now() - fetched)));
  }

  return {
    load() {
      if (!loaded) {
        loaded = true;
        ctx.on("*", (data, kind) => {
          if (!ctx.isShown("overview")) return;
          live.unshift({ kind, data, at: Date.now() });
          live.length = Math.min(live.length, 20);
          drawEvents();
          soon();
        });
      }
      refresh();
    },
    refresh,
  };
};
