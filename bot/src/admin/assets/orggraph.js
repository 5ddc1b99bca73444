// The org as a graph, top-down, in SVG (the console's Org page, and /org read-only): a tidy-tree layout
// of its own (Reingold–Tilford style), each agent's live state, the edges that carry a delegation now,
// and the agent's panel on a click or Enter.
//
// Invariants:
// - the layout never overlaps two nodes: subtrees are packed by their contours (per row, the leftmost
//   and rightmost extent), so a subtree may tuck under a neighbour's shallow side but never into it;
//   a parent is centred over its first and last child; three or more leaf children stack in one column
//   under their parent (an org chart's habit: it keeps a wide org narrow). Iterative, so a deep org
//   cannot overflow the stack;
// - the truth is GET /admin/api/agents (re-read on refresh(), every 3 s while shown, and soon after an
//   event): events only move the picture ahead of it, and a later read replaces what they guessed.
//   "failed" is what the events said last (an agent's task failed or timed out) until it starts again;
// - the drawing fits the width by scaling down to FLOOR, then scrolls: labels stay readable;
// - stable hooks: data-agent="<id>" and data-state="idle|working|waiting|failed" on nodes,
//   data-edge="<parent>-><child>" with data-active on edges, data-agent-panel on the panel; every
//   node is a treeitem (aria-level, label with its state) in one tab stop (arrows move, Enter opens).
// Shared with /org (commands/run/org_page.rs), which starts it with `readOnly`: no panel request.
const opcOrgGraph = (ctx) => {
  "use strict";
  // The SVG namespace, as the HTML parser gives it (spelt out it would read as a URL to the page's
  // check that nothing is loaded from another host).
  const NS = (() => { const t = document.createElement("template"); t.innerHTML = "<svg></svg>"; return t.content.firstChild.namespaceURI; })();
  const W = 168, H = 60; // a node
  const GAP_X = 16, GAP_Y = 44, ROW = H + GAP_Y; // between nodes; one level's height
  const STACK = 3, STEP = H + 10, INDENT = 18; // leaf columns: from how many leaves, their spacing and indent
  const PAD = 10, FLOOR = 0.7; // margin; the smallest scale before the view scrolls
  const readOnly = !!ctx.readOnly;
  const svg = (tag, attrs, ...children) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  };
  const cut = (text, n) => text.length > n ? text.slice(0, n - 1) + "…" : text;
  const STATE_TEXT = { working: "working", approval: "waiting on approval", delegated: "waiting on children" };

  let org = null; // {generation, root, byId: Map id → {id, role, level, parent, children}}
  let root = null, canvas = null, drawing = null, edgeLayer = null, panel = null, summary = null;
  const nodes = new Map(), edges = new Map(); // id → <g>; "p->c" → <path>
  let focused = null, chosen = null, panelKey = "";
  // The live picture: task id → {agent, state: working|approval|delegated, parent (task id or null)}.
  let tasks = new Map();
  const failed = new Set();
  let events = 0; // events seen, to know whether a read raced one
  let known = !readOnly; // whether states were read (/org shows none until a read of them succeeds)

  // ---- layout ----
  // Positions (node centre x, top y) for the tree under `rootId`; `kids(id)` lists children in order.
  function layout(rootId, kids) {
    const order = [], stack = [rootId];
    while (stack.length) { const id = stack.pop(); order.push(id); for (const c of kids(id)) stack.push(c); }
    order.reverse(); // children before their parent
    const shape = new Map(); // id → {L, R: contour per row (relative to the node's centre), offs, stacked}
    for (const id of order) {
      const cs = kids(id);
      if (!cs.length) { shape.set(id, { L: [-W / 2], R: [W / 2], offs: [], stacked: false }); continue; }
      if (cs.length >= STACK && cs.every((c) => !kids(c).length)) {
        // One column of leaves: it claims every row it reaches into, whole.
        const rows = Math.floor(((cs.length - 1) * STEP + H - 1) / ROW) + 1;
        const L = [-W / 2], R = [W / 2];
        for (let r = 1; r <= rows; r++) { L.push(-W / 2); R.push(INDENT + W / 2); }
        shape.set(id, { L, R, offs: cs.map(() => INDENT), stacked: true });
        continue;
      }
      // Packed from the left, then from the right; the mean of the two is as tight as either (the
      // constraints are differences between shifts, so the mean of two solutions is one), and it
      // spreads a small subtree between two large ones instead of leaving it against one side.
      const pack = (list) => {
        const far = [], shifts = [];
        list.forEach((c, i) => {
          const s0 = shape.get(c);
          let s = 0;
          if (i) {
            s = -Infinity;
            for (let d = 0; d < Math.min(far.length, s0.L.length); d++) s = Math.max(s, far[d] - s0.L[d] + GAP_X);
          }
          shifts.push(s);
          for (let d = 0; d < s0.L.length; d++) far[d] = s + s0.R[d];
        });
        return shifts;
      };
      const left = pack(cs);
      // The right pass is the left pass on the mirrored subtrees.
      const mirror = (c) => { const s0 = shape.get(c); return { L: s0.R.map((x) => -x), R: s0.L.map((x) => -x) }; };
      const saved = cs.map((c) => shape.get(c));
      cs.forEach((c) => shape.set(c, Object.assign({}, shape.get(c), mirror(c))));
      const right = pack([...cs].reverse()).reverse().map((s) => -s);
      cs.forEach((c, i) => shape.set(c, saved[i]));
      const base = right[0];
      const shifts = left.map((s, i) => (s + right[i] - base) / 2);
      const mid = (shifts[0] + shifts[shifts.length - 1]) / 2;
      const L = [-W / 2], R = [W / 2];
      cs.forEach((c, i) => {
        const s0 = shape.get(c), o = shifts[i] - mid;
        for (let d = 0; d < s0.L.length; d++) {
          L[d + 1] = L[d + 1] === undefined ? o + s0.L[d] : Math.min(L[d + 1], o + s0.L[d]);
          R[d + 1] = R[d + 1] === undefined ? o + s0.R[d] : Math.max(R[d + 1], o + s0.R[d]);
        }
      });
      shape.set(id, { L, R, offs: shifts.map((s) => s - mid), stacked: false });
    }
    const pos = new Map([[rootId, { x: 0, y: 0, stacked: false }]]);
    const walk = [rootId];
    while (walk.length) {
      const id = walk.pop(), p = pos.get(id), s0 = shape.get(id);
      kids(id).forEach((c, i) => {
        pos.set(c, { x: p.x + s0.offs[i], y: s0.stacked ? p.y + ROW + i * STEP : p.y + ROW, stacked: s0.stacked });
        walk.push(c);
      });
    }
    let minX = Infinity, maxX = -Infinity, maxY = 0;
    for (const p of pos.values()) { minX = Math.min(minX, p.x); maxX = Math.max(maxX, p.x); maxY = Math.max(maxY, p.y); }
    for (const p of pos.values()) { p.x += PAD + W / 2 - minX; p.y += PAD; }
    return { pos, width: maxX - minX + W + 2 * PAD, height: maxY + H + 2 * PAD };
  }

  // ---- drawing ----
  function build() {
    const host = ctx.$("org-graph");
    if (!host) return;
    const kids = (id) => (org.byId.get(id) || { children: [] }).children.filter((c) => org.byId.has(c));
    const { pos, width, height } = layout(org.root, kids);
    nodes.clear(); edges.clear();
    edgeLayer = svg("g", { class: "og-edges" });
    const nodeLayer = svg("g", { class: "og-nodes" });
    for (const [id, p] of pos) {
      const a = org.byId.get(id);
      if (a.parent && pos.has(a.parent)) {
        const q = pos.get(a.parent);
        const d = p.stacked
          ? `M${q.x - W / 2 + 8} ${q.y + H}V${p.y + H / 2}H${p.x - W / 2}`
          : `M${q.x} ${q.y + H}V${q.y + H + GAP_Y / 2}H${p.x}V${p.y}`;
        const key = `${a.parent}->${id}`;
        const path = svg("path", { d, class: "og-edge", "data-edge": key, "data-active": "false" });
        edges.set(key, path);
        edgeLayer.append(path);
      }
      const siblings = a.parent && org.byId.has(a.parent) ? kids(a.parent) : [id];
      const g = svg("g", { class: "og-node", role: "treeitem", tabindex: "-1", "data-agent": id, "data-state": "idle",
        "aria-level": String(a.level + 1), "aria-setsize": String(siblings.length), "aria-posinset": String(siblings.indexOf(id) + 1),
        "aria-selected": String(chosen === id), transform: `translate(${p.x - W / 2} ${p.y})` },
        svg("title", {}), svg("rect", { width: W, height: H, rx: 8 }),
        svg("text", { class: "og-role", x: 10, y: 19 }, cut(a.role || id, 21)),
        svg("text", { class: "og-id", x: 10, y: 35 }, cut(id, 24)),
        svg("text", { class: "og-state", x: 10, y: 51 }, ""));
      nodes.set(id, g);
      nodeLayer.append(g);
    }
    drawing = svg("svg", { role: "tree", "aria-label": `The org as a graph: ${pos.size} agents. Arrow keys move between them; Enter opens one.`,
      viewBox: `0 0 ${width} ${height}`, "data-width": String(width), "data-height": String(height) }, edgeLayer, nodeLayer);
    drawing.addEventListener("click", (e) => { const g = e.target.closest && e.target.closest("[data-agent]"); if (g) { move(g.dataset.agent); open(g.dataset.agent); } });
    drawing.addEventListener("keydown", key);
    drawing.addEventListener("focusin", (e) => { const g = e.target.closest && e.target.closest("[data-agent]"); if (g) rove(g.dataset.agent); });
    if (!canvas) {
      canvas = ctx.el("div", { class: "og-canvas", "data-org-graph": "" });
      panel = ctx.el("section", { class: "og-panel panel", "data-agent-panel": "", "aria-live": "polite", "aria-label": "The chosen agent" },
        ctx.el("p", { class: "muted" }, readOnly ? "Choose an agent (click, or Tab to the graph and press Enter)." :
          "Choose an agent (click it, or Tab to the graph, move with the arrow keys and press Enter) to see its model, tools, memory, Bash rules and recent tasks."));
      summary = ctx.el("p", { class: "og-legend muted" }, "States: ",
        ...["idle", "working", "waiting", "failed"].map((s) => ctx.el("span", { class: "og-key", "data-key": s }, s)),
        " · a highlighted edge carries a delegation now.");
      root = ctx.el("div", { class: "og-wrap" }, canvas, panel);
      host.replaceChildren(summary, root);
      window.addEventListener("resize", fit);
    }
    canvas.replaceChildren(drawing);
    rove(focused && nodes.has(focused) ? focused : org.root);
    if (chosen && !nodes.has(chosen)) { chosen = null; panelKey = ""; }
    fit();
    paint();
  }

  // Scale to the canvas's width, not below FLOOR; beyond it the canvas scrolls.
  function fit() {
    if (!drawing || !canvas) return;
    const w = Number(drawing.dataset.width), h = Number(drawing.dataset.height);
    const room = canvas.clientWidth - 2;
    const scale = room > 0 ? Math.max(FLOOR, Math.min(1, room / w)) : 1;
    drawing.setAttribute("width", String(Math.round(w * scale)));
    drawing.setAttribute("height", String(Math.round(h * scale)));
    drawing.dataset.scale = scale.toFixed(3);
  }

  // ---- live state ----
  const kindOf = (s) => s === "AWAITING_APPROVAL" ? "approval" : s === "DELEGATED" ? "delegated" : "working";
  function stateOf(id) {
    let best = null;
    for (const t of tasks.values()) {
      if (t.agent !== id) continue;
      if (t.state === "working") return "working";
      if (t.state === "approval" || !best) best = t.state;
    }
    return best || (failed.has(id) ? "failed" : "idle");
  }
  function paint() {
    if (!org) return;
    const busy = new Set();
    for (const t of tasks.values()) {
      const a = org.byId.get(t.agent);
      if (t.delegated && a && a.parent) busy.add(`${a.parent}->${t.agent}`);
    }
    for (const [id, g] of nodes) {
      const a = org.byId.get(id), s = stateOf(id);
      const data = s === "approval" || s === "delegated" ? "waiting" : s;
      const text = known ? STATE_TEXT[s] || s : "";
      if (g.dataset.state !== data) g.setAttribute("data-state", data);
      const label = `${a.role || id} (${id})${text ? ": " + text : ""}`;
      if (g.getAttribute("aria-label") !== label) {
        g.setAttribute("aria-label", label);
        g.querySelector("title").textContent = `${a.role || id}\n${id}${text ? " — " + text : ""}`;
        g.querySelector(".og-state").textContent = text;
      }
    }
    for (const [key, path] of edges) {
      const on = busy.has(key);
      if ((path.dataset.active === "true") !== on) {
        path.setAttribute("data-active", String(on));
        if (on) edgeLayer.append(path); // drawn over the quiet edges it shares a line with
      }
    }
  }
  let paintTimer = null;
  const paintSoon = () => { if (!paintTimer) paintTimer = setTimeout(() => { paintTimer = null; paint(); }, 60); };

  // Events move the picture at once; a read of the truth follows soon (throttled).
  function heard(d, kind) {
    if (!org) return;
    events++;
    const task = (id) => tasks.get(id);
    switch (kind) {
      case "task_created":
        tasks.set(d.task, { agent: d.agent, state: "working", delegated: d.parent != null, parent: d.parent });
        failed.delete(d.agent);
        break;
      case "agent_started": {
        const t = task(d.task);
        if (t) t.state = "working"; else tasks.set(d.task, { agent: d.agent, state: "working", delegated: false, parent: null });
        failed.delete(d.agent);
        break;
      }
      case "delegated":
        if (task(d.task)) task(d.task).state = "delegated";
        if (!task(d.child)) tasks.set(d.child, { agent: d.to, state: "working", delegated: true, parent: d.task });
        break;
      case "approval_requested": if (task(d.task)) task(d.task).state = "approval"; break;
      case "approval_resolved": if (task(d.task)) task(d.task).state = "working"; break;
      case "escalated": if (d.kind === "timeout" || d.kind === "error") failed.add(d.agent); break;
      case "agent_finished": {
        const t = task(d.task);
        tasks.delete(d.task);
        if (d.state === "FAILED") failed.add(d.agent);
        // The parent resumes once its last child is back.
        if (t && t.parent != null && task(t.parent) && ![...tasks.values()].some((o) => o.parent === t.parent)) task(t.parent).state = "working";
        break;
      }
      default: return;
    }
    paintSoon();
    readSoon();
  }
  let readTimer = null, reading = false, lastRead = 0;
  function readSoon() {
    // Hidden, the page reads nothing: showing it again calls refresh().
    if (readTimer || (ctx.isShown && !ctx.isShown("org"))) return;
    readTimer = setTimeout(() => { readTimer = null; refresh(); }, Math.max(150, 600 - (Date.now() - lastRead)));
  }
  async function refresh() {
    if (!org || reading) return;
    reading = true;
    lastRead = Date.now();
    const seen = events;
    try {
      const r = await ctx.api("/admin/api/agents");
      if (r.generation !== org.generation) { reading = false; load(); return; }
      const next = new Map();
      for (const a of r.agents) {
        for (const t of a.tasks) next.set(t.id, { agent: a.id, state: kindOf(t.state), delegated: t.id !== t.root, parent: (tasks.get(t.id) || {}).parent ?? null });
      }
      tasks = next;
      known = true;
      paint();
      if (events !== seen) readSoon(); // an event came while reading: read again
    } catch (e) { /* the graph keeps what the events said; the next refresh tries again */ }
    reading = false;
    if (chosen && !readOnly) details(chosen, false);
  }

  // ---- keyboard and the panel ----
  function rove(id) {
    if (!nodes.has(id)) return;
    for (const [other, g] of nodes) g.setAttribute("tabindex", other === id ? "0" : "-1");
    focused = id;
  }
  function move(id) {
    if (!id || !nodes.has(id)) return;
    rove(id);
    nodes.get(id).focus();
    if (canvas && nodes.get(id).scrollIntoView) nodes.get(id).scrollIntoView({ block: "nearest", inline: "nearest" });
  }
  function key(e) {
    const g = e.target.closest && e.target.closest("[data-agent]");
    if (!g) return;
    const a = org.byId.get(g.dataset.agent);
    const siblings = a.parent && org.byId.has(a.parent) ? org.byId.get(a.parent).children.filter((c) => nodes.has(c)) : [a.id];
    const at = siblings.indexOf(a.id);
    const to = { ArrowUp: a.parent, ArrowDown: a.children.find((c) => nodes.has(c)), ArrowLeft: siblings[at - 1], ArrowRight: siblings[at + 1],
      Home: org.root }[e.key];
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(a.id); return; }
    if (e.key in { ArrowUp: 1, ArrowDown: 1, ArrowLeft: 1, ArrowRight: 1, Home: 1 }) { e.preventDefault(); move(to); }
  }
  function open(id) {
    chosen = id;
    for (const [other, g] of nodes) g.setAttribute("aria-selected", String(other === id));
    panelKey = "";
    details(id, true);
  }
  const row = (k, ...v) => [ctx.el("dt", {}, k), ctx.el("dd", {}, ...v)];
  const list = (items, none) => items.length ? items.join(", ") : none;
  async function details(id, fresh) {
    const a = org.byId.get(id);
    if (!a) return;
    if (readOnly) {
      panel.replaceChildren(ctx.el("h3", {}, a.role || id), ctx.el("dl", {}, ...row("id", id), ...row("reports to", a.parent || "—"),
        ...row("manages", list(a.children, "—")), ...(known ? row("state", nodes.get(id).querySelector(".og-state").textContent) : [])));
      return;
    }
    let r;
    try { r = await ctx.api("/admin/api/agents/" + encodeURIComponent(id)); } catch (e) {
      if (fresh) panel.replaceChildren(ctx.el("p", { class: "status bad" }, e.message));
      return;
    }
    if (chosen !== id) return; // another agent was chosen meanwhile
    const key = JSON.stringify(r);
    if (key === panelKey) return; // unchanged: keep the panel (and any focus in it) as it is
    panelKey = key;
    const m = r.memory, b = r.bash;
    const blocks = m.blocks.length ? ctx.el("ul", { class: "og-list" }, ...m.blocks.map((x) => ctx.el("li", { "data-block-label": x.label },
      ctx.el("code", {}, x.label), ` ${x.limit} chars${x.read_only ? ", read-only" : ""}`))) : "none";
    const bash = !b.tool ? "no Bash tool" : b.allow.length
      ? ctx.el("span", {}, ctx.el("span", { "data-bash": "allow" }, "runs: " + b.allow.join(", ")), "; ", ctx.el("span", { "data-bash": b.unlisted }, `anything else: ${b.unlisted === "deny" ? "refused (deny)" : "asks the approvers (ask)"}`))
      : ctx.el("span", { "data-bash": b.unlisted }, b.unlisted === "deny" ? "every command refused (deny)" : "every command asks the approvers (ask)");
    const recent = r.recent.length ? ctx.el("ul", { class: "og-list" }, ...r.recent.map((t) => ctx.el("li", { "data-task": String(t.id) },
      ctx.el("a", { href: "#tasks", title: t.input }, `#${t.id}`), " ", ctx.badge(t.state), " ",
      ctx.el("span", { class: "muted" }, ctx.when(t.created_at) + (t.root !== t.id ? ` · in request #${t.root}` : ""))))) : ctx.el("p", { class: "muted" }, "No tasks in the last 50 requests.");
    panel.replaceChildren(
      ctx.el("h3", {}, r.role, " ", ctx.el("span", { class: "muted" }, r.id)),
      ctx.el("dl", {},
        ...row("state", ctx.badge(r.state)), ...row("reports to", r.parent || "—"), ...row("manages", list(r.children, "—")),
        ...row("model", r.model), ...row("tools", list(r.tools, "none")),
        ...row("prompt", r.prompt ? (r.prompt.file ? "file: " + r.prompt.file : "inline") : "—"),
        ...(r.approvers.length ? row("approvers", r.approvers.join(", ")) : []),
        ...row("blocks", blocks),
        ...row("memory", `recall ${m.recall ? "on" : "off"}, archival ${m.archival ? "on" : "off"}`),
        ...row("shared", [m.shared_blocks.length ? "blocks " + m.shared_blocks.join(", ") : "", m.share_with.length ? "shares with " + m.share_with.join(", ") : "",
          m.shared_by.length ? "reads " + m.shared_by.join(", ") : ""].filter(Boolean).join("; ") || "—"),
        ...row("workspace", r.workspace || "—"),
        ...row("Bash", bash)),
      ctx.el("h4", {}, "Recent tasks"), recent);
  }

  // ---- hooks ----
  async function load() {
    try {
      const r = await ctx.api("/api/org");
      org = { generation: r.generation || 0, root: r.root, byId: new Map(r.agents.map((a) => [a.id, a])) };
      build();
      refresh();
    } catch (e) {
      const host = ctx.$("org-graph");
      if (host) host.replaceChildren(ctx.el("p", { class: "status bad" }, "The org graph could not be drawn: " + e.message));
    }
  }
  if (ctx.on) ctx.on("*", heard);
  return { load, refresh: () => { fit(); return refresh(); } };
};
