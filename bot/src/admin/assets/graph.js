// The console's graph view (Memory page): an agent's entities and the relations between them around
// one entity, drawn as SVG with a small radial layout (no framework, nothing loaded from elsewhere).
// admin.js starts it with its helpers when the Memory page first shows.
//
// Invariants:
// - what is drawn comes from GET /admin/api/memory/graph, already bounded by the server (at most
//   `max` edges, nearest the entity first, and the count left out), so the page stays light whatever
//   the size of the store;
// - an answer to an older request is dropped, so a quick change of time or depth never shows a stale
//   graph;
// - stable hooks for tests and tools: data-graph (the view's root, in admin.html), data-entity="<id>"
//   (nodes), data-edge="<fact_id>" (edges), data-graph-at (the time control); nodes are focusable
//   buttons with labels, and Enter opens an entity's facts as a click does.
// It comes first in the page's one script, so its "use strict" covers admin.js too (strict already).
"use strict";
const opcGraph = ({ $, api, el, badge, day, validity }) => {
  // The SVG namespace, as the HTML parser gives it (spelt out it would read as a URL to the page's
  // check that nothing is loaded from another host).
  const SVG = (() => { const t = document.createElement("template"); t.innerHTML = "<svg></svg>"; return t.content.firstChild.namespaceURI; })();
  const NODE = 9; // node radius
  const RING = 150; // least distance between two rings (hops)
  const GAP = 64; // least distance between two neighbours on a ring
  const FAR = 1600; // largest ring radius: beyond it labels may overlap rather than the view grow
  const FACTS = 20; // facts (with their versions) listed for one entity
  const MIN_SCALE = 0.6; // the smallest a drawing is shrunk to fit the canvas
  const svg = (tag, attrs, ...children) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  };
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many || one + "s"}`;
  const cut = (text, n) => text.length > n ? text.slice(0, n - 1) + "…" : text;
  // memory's entities::normalise, so a fact's subject is matched to its entity's name or aliases:
  // lower case, anything but letters and digits a space, a leading article and a possessive's lone
  // `s` dropped.
  const normalise = (name) => {
    const words = (name || "").toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").split(" ").filter(Boolean);
    if (words.length > 1 && ["the", "a", "an"].includes(words[0])) words.shift();
    if (words.length > 1 && words[words.length - 1] === "s") words.pop();
    return words.join(" ");
  };
  // The time control reads UTC: "2026-04-01T12:00" is "2026-04-01T12:00:00Z"; empty is now.
  const atParam = () => {
    const v = $("graph-at").value;
    return v ? (v.length === 16 ? v + ":00" : v) + "Z" : "";
  };

  let shown = null; // the answer drawn
  let centre = ""; // the entity it is drawn around, kept when the time or depth changes
  let seq = 0; // the latest request; older answers are dropped
  let facts = null; // {key, list}: the agent's facts in the drawn view, read once per view

  async function draw(entity) {
    const params = new URLSearchParams();
    const agent = $("graph-agent").value.trim();
    if (agent) params.set("agent", agent);
    if (entity) params.set("entity", entity);
    params.set("depth", $("graph-depth").value);
    const at = atParam();
    if (at) params.set("at", at);
    const mine = ++seq;
    const status = $("graph-status");
    status.textContent = "Drawing…";
    let r;
    try {
      r = await api("/admin/api/memory/graph?" + params);
    } catch (e) {
      if (mine === seq) { status.textContent = e.message; status.classList.add("bad"); }
      return;
    }
    if (mine !== seq) return;
    status.classList.remove("bad");
    shown = r;
    facts = null;
    const root = r.nodes.find((n) => n.id === r.root);
    centre = root ? root.name : entity || "";
    if (r.entities) {
      $("graph-entities").replaceChildren(...r.entities.map((x) => el("option", { value: x.name }, plural(x.edges, "relation"))));
    }
    render(r);
    status.textContent = summary(r, root);
  }

  function summary(r, root) {
    const when = r.at ? `as believed at ${day(r.at)}` : "as believed now";
    if (r.start === "empty") {
      return `${r.agent} has no relations ${when}. A fact with a predicate and an object is a relation (memory.graph.enabled).`;
    }
    if (!root) return `No entity named “${r.entity}” in ${r.agent}'s facts ${when}: pick one from the list, or leave it empty for the most connected.`;
    let s = `Around ${root.name}${r.start === "most_connected" ? " (the most connected entity)" : ""}: ` +
      `${plural(r.nodes.length, "entity", "entities")} and ${plural(r.edges.length, "relation")} within ${plural(r.depth, "hop")}, ${when}.`;
    if (r.left_out) {
      s += ` ${r.left_out_exact ? "" : "At least "}${plural(r.left_out, "more relation")} not drawn (at most ${r.max} are): pick a nearer entity or fewer hops.`;
    }
    return s;
  }

  // Radial layout: the entity in the middle, each hop on its own ring, each entity within the angle
  // its parent (in a breadth-first tree) gives it, in proportion to the leaves below it. A ring's
  // radius grows until its two closest neighbours are GAP apart (up to FAR).
  function layout(r) {
    const ids = r.nodes.map((n) => n.id);
    const next = new Map(ids.map((id) => [id, []]));
    for (const e of r.edges) {
      if (e.from !== e.to && next.has(e.from) && next.has(e.to)) { next.get(e.from).push(e.to); next.get(e.to).push(e.from); }
    }
    const root = next.has(r.root) ? r.root : ids[0];
    const hop = new Map([[root, 0]]), kids = new Map(ids.map((id) => [id, []])), order = [root];
    for (let i = 0; i < order.length; i++) {
      for (const other of next.get(order[i])) {
        if (!hop.has(other)) { hop.set(other, hop.get(order[i]) + 1); kids.get(order[i]).push(other); order.push(other); }
      }
    }
    // Never lose a node the server sent, even one the drawn edges do not reach: on the first ring.
    for (const id of ids) if (!hop.has(id)) { hop.set(id, 1); kids.get(root).push(id); order.push(id); }
    const leaves = new Map();
    for (let i = order.length - 1; i >= 0; i--) {
      const k = kids.get(order[i]);
      leaves.set(order[i], k.length ? k.reduce((sum, c) => sum + leaves.get(c), 0) : 1);
    }
    const angle = new Map([[root, 0]]);
    const place = (id, from, span) => {
      let a = from;
      for (const c of kids.get(id)) {
        const share = span * leaves.get(c) / leaves.get(id);
        angle.set(c, a + share / 2);
        place(c, a, share);
        a += share;
      }
    };
    place(root, -Math.PI / 2, 2 * Math.PI);
    const rings = [];
    for (const id of order) (rings[hop.get(id)] = rings[hop.get(id)] || []).push(angle.get(id));
    const radius = [0];
    for (let h = 1; h < rings.length; h++) {
      const a = rings[h].slice().sort((x, y) => x - y);
      let least = 2 * Math.PI;
      for (let i = 0; i < a.length; i++) least = Math.min(least, (i + 1 < a.length ? a[i + 1] : a[0] + 2 * Math.PI) - a[i] || 2 * Math.PI);
      radius[h] = Math.min(FAR, Math.max(radius[h - 1] + RING, GAP / least));
    }
    const pos = new Map();
    for (const id of order) {
      const rr = radius[hop.get(id)], a = angle.get(id);
      pos.set(id, { x: rr * Math.cos(a), y: rr * Math.sin(a) });
    }
    return { pos, order };
  }

  function render(r) {
    const canvas = $("graph-canvas");
    if (!r.nodes.length) { canvas.replaceChildren(); return; }
    const { pos, order } = layout(r);
    const byId = new Map(r.nodes.map((n) => [n.id, n]));
    const xs = [...pos.values()].map((p) => p.x), ys = [...pos.values()].map((p) => p.y);
    const pad = 110;
    const minX = Math.min(...xs) - pad, minY = Math.min(...ys) - 40, w = Math.max(...xs) - minX + pad, h = Math.max(...ys) - minY + 50;
    const root = byId.get(r.root);
    // Shrunk to the canvas's width when that keeps labels legible (down to MIN_SCALE); scrolled beyond.
    const scale = Math.min(1, Math.max(MIN_SCALE, (canvas.clientWidth || w) / w));
    const picture = svg("svg", { viewBox: `${minX} ${minY} ${w} ${h}`, width: String(Math.ceil(w * scale)), height: String(Math.ceil(h * scale)),
      role: "group", "aria-label": root ? `Relations around ${root.name}` : "Relations" },
    svg("defs", {}, svg("marker", { id: "graph-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z" }))));
    // Two entities with several relations: the relations curve apart, each its own way.
    const pairs = new Map();
    for (const e of r.edges) {
      const a = pos.get(e.from), b = pos.get(e.to), from = byId.get(e.from), to = byId.get(e.to);
      if (!a || !b || !from || !to) continue;
      const key = e.from < e.to ? `${e.from}:${e.to}` : `${e.to}:${e.from}`;
      const k = pairs.get(key) || 0;
      pairs.set(key, k + 1);
      const said = `${from.name} ${e.predicate} ${to.name}`;
      let d, lx, ly;
      if (e.from === e.to) {
        const loop = 16 + 8 * k;
        d = `M${a.x - 6},${a.y - NODE} C${a.x - loop},${a.y - NODE - 2 * loop} ${a.x + loop},${a.y - NODE - 2 * loop} ${a.x + 6},${a.y - NODE}`;
        lx = a.x; ly = a.y - NODE - 1.6 * loop;
      } else {
        // The bend is measured from the lower id to the higher, so opposite relations differ too.
        const [p, q] = e.from < e.to ? [a, b] : [b, a];
        const len = Math.hypot(q.x - p.x, q.y - p.y) || 1;
        const bend = (k % 2 ? 1 : -1) * Math.ceil(k / 2) * 30;
        const cx = (a.x + b.x) / 2 + bend * -(q.y - p.y) / len, cy = (a.y + b.y) / 2 + bend * (q.x - p.x) / len;
        const toward = (s, t) => { const l = Math.hypot(t.x - s.x, t.y - s.y) || 1; return { x: s.x + NODE * (t.x - s.x) / l, y: s.y + NODE * (t.y - s.y) / l }; };
        const c = { x: cx, y: cy }, s = toward(a, c), t = toward(b, c);
        d = `M${s.x},${s.y} Q${cx},${cy} ${t.x},${t.y}`;
        lx = 0.25 * s.x + 0.5 * cx + 0.25 * t.x; ly = 0.25 * s.y + 0.5 * cy + 0.25 * t.y;
      }
      const g = svg("g", { class: "edge", "data-edge": String(e.fact_id), "data-from": String(e.from), "data-to": String(e.to),
        role: "img", "aria-label": `${said} (fact ${e.fact_id})` },
      svg("title", {}, `${said}: ${e.text} (fact ${e.fact_id}, valid ${validity(e)})`),
      svg("path", { d, "marker-end": "url(#graph-arrow)" }),
      svg("text", { x: String(lx), y: String(ly - 3), "text-anchor": "middle" }, cut(e.predicate, 24)));
      g.addEventListener("click", () => openFact(e, said));
      picture.append(g);
    }
    const degree = new Map();
    for (const e of r.edges) { degree.set(e.from, (degree.get(e.from) || 0) + 1); if (e.to !== e.from) degree.set(e.to, (degree.get(e.to) || 0) + 1); }
    // Nodes in breadth-first order, so Tab goes from the entity outwards.
    for (const id of order) {
      const n = byId.get(id), p = pos.get(id);
      const aliases = (n.aliases || []).filter((a) => a !== n.name);
      const label = `${n.name}${aliases.length ? ", also " + aliases.join(", ") : ""}: ${plural(degree.get(id) || 0, "relation")} drawn. Enter shows its facts.`;
      const g = svg("g", { class: "gnode" + (id === r.root ? " root" : ""), "data-entity": String(id), tabindex: "0", role: "button",
        "aria-pressed": "false", "aria-label": label, transform: `translate(${p.x},${p.y})` },
      svg("title", {}, n.name + (aliases.length ? ` (${aliases.join(", ")})` : "")),
      svg("circle", { r: String(id === r.root ? NODE + 3 : NODE) }),
      svg("text", { y: String(NODE + 15), "text-anchor": "middle" }, cut(n.name, 22)));
      g.addEventListener("click", () => openEntity(n));
      g.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); openEntity(n); } });
      picture.append(g);
    }
    canvas.replaceChildren(picture);
    // The entity in view: scroll the middle of a large drawing to the root.
    canvas.scrollLeft = Math.max(0, -minX * scale - canvas.clientWidth / 2);
    canvas.scrollTop = Math.max(0, -minY * scale - canvas.clientHeight / 2);
  }

  // The agent's facts in the drawn view (current, or believed at the time), read once per view.
  async function viewFacts(r) {
    const key = `${r.agent}|${r.at || ""}`;
    if (!facts || facts.key !== key) {
      const params = new URLSearchParams({ agent: r.agent });
      if (r.at) params.set("at", r.at);
      facts = { key, list: api("/admin/api/memory/facts?" + params).then((a) => a.facts) };
    }
    return facts.list;
  }

  const versions = (v) => el("li", { "data-version": String(v.id), "data-state": v.invalidated_at ? "closed" : "current" },
    el("div", {}, v.text, " ", badge(v.invalidated_at ? "closed" : "current")),
    el("div", { class: "meta" }, `valid ${validity(v)}; recorded ${day(v.recorded_at)}` + (v.invalidated_at ? `, closed ${day(v.invalidated_at)}` : "") +
      (v.reason ? `; reason: ${v.reason}` : "")));

  // One fact with its versions, oldest first (the facts page's history API).
  async function factItem(f) {
    const li = el("li", { "data-fact": String(f.fact_id) }, el("div", {}, el("strong", {}, `#${f.fact_id}`), " ", f.text),
      el("div", { class: "meta" }, `valid ${validity(f)}` + (f.recorded_at ? `; recorded ${day(f.recorded_at)}` : "")));
    try {
      const h = await api("/admin/api/memory/facts/" + f.fact_id);
      li.append(el("ol", { class: "versions", "aria-label": `Versions of fact ${f.fact_id}` }, ...h.versions.map(versions)));
    } catch (e) { li.append(el("div", { class: "status bad" }, e.message)); }
    return li;
  }

  let opening = 0; // the latest entity opened; an older one's answer is dropped
  async function openEntity(n) {
    const r = shown, mine = ++opening;
    for (const g of $("graph-canvas").querySelectorAll("[data-entity]")) g.setAttribute("aria-pressed", String(g.dataset.entity === String(n.id)));
    const panel = $("graph-facts");
    const aliases = (n.aliases || []).filter((a) => a !== n.name);
    const head = [el("h4", {}, n.name), ...(aliases.length ? [el("p", { class: "meta muted" }, "Also: " + aliases.join(", "))] : [])];
    panel.replaceChildren(...head, el("p", { class: "muted" }, "Reading its facts…"));
    try {
      const names = new Set([n.name, ...(n.aliases || [])].map(normalise));
      const related = new Set(r.edges.filter((e) => e.from === n.id || e.to === n.id).map((e) => e.fact_id));
      const list = (await viewFacts(r)).filter((f) => related.has(f.fact_id) || (f.subject && names.has(normalise(f.subject))));
      const items = await Promise.all(list.slice(0, FACTS).map(factItem));
      if (mine !== opening) return;
      const when = r.at ? `believed at ${day(r.at)}` : "current";
      const centreHere = el("button", { type: "button", id: "graph-centre", onclick: () => { $("graph-entity").value = n.name; draw(n.name); } }, "Draw around it");
      panel.replaceChildren(...head,
        el("p", { class: "muted" }, `${plural(list.length, "fact")} about it or relating it, ${when}` +
          (list.length > FACTS ? ` (the first ${FACTS}; the Facts table above lists them all)` : "") + ", each with its versions, oldest first."),
        el("ol", { class: "hits", id: "graph-entity-facts" }, ...items), centreHere);
    } catch (e) {
      if (mine === opening) panel.replaceChildren(...head, el("p", { class: "status bad" }, e.message));
    }
  }

  async function openFact(e, said) {
    const panel = $("graph-facts");
    panel.replaceChildren(el("h4", {}, said), el("ol", { class: "hits", id: "graph-entity-facts" }, await factItem(e)));
  }

  const current = () => $("graph-entity").value.trim() || centre;
  $("graph-form").addEventListener("submit", (event) => { event.preventDefault(); centre = ""; draw($("graph-entity").value.trim()); });
  $("graph-depth").addEventListener("change", () => draw(current()));
  $("graph-at").addEventListener("change", () => draw(current()));
  $("graph-now").addEventListener("click", () => { $("graph-at").value = ""; draw(current()); });
  $("graph-agent").addEventListener("change", () => { $("graph-entity").value = ""; centre = ""; draw(""); });
  return { draw: () => draw(current()) };
};
