// The Tasks page's request timeline (#task-timeline): a waterfall of one request, drawn in SVG from
// GET /admin/api/tasks/{root}/timeline. One row per task (parent first, indented by depth), its bar
// from start to end (or to now while it runs), and inside the bar, to scale, its model calls (upper
// half), tool calls and approval waits (lower half).
//
// Invariants:
// - times come from the server, and a running task is drawn to the server's `now` advanced by the
//   time since the answer (never the browser's clock alone), so a skewed laptop draws no nonsense;
// - the axis fits any length: tick steps are chosen from 1-2-5 steps (1 ms to days), so 200 ms and
//   20 minutes both get 4–10 readable ticks;
// - geometry lives in SVG attributes (no inline styles: the page's CSP), colours in timeline.css;
// - hooks: data-task="<id>" and data-state="<task state, lowercase>" on each bar's row (data-start,
//   data-end in ms, data-live while it runs), data-segment="model|tool|approval" on segments (with
//   data-start / data-end), data-timeline-axis on the axis;
// - keyboard: one bar is in the tab order; Up/Down/Home/End move between bars, Right/Left through a
//   bar's segments, Escape back to the bar. Focus or hover shows the details in a role=tooltip
//   element the focused item names with aria-describedby.
const opcTimeline = (ctx) => {
  const { el, money, tokens, span } = ctx;
  // SVG's namespace, read from the parser (the page holds no address of another host, not even this one).
  const SVG = (() => { const t = document.createElement("template"); t.innerHTML = "<svg></svg>"; return t.content.firstChild.namespaceURI; })();
  const ROW = 30, AXIS = 26, LABEL = 220, PAD = 14;
  const STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5,
    36e5, 72e5, 108e5, 216e5, 432e5, 864e5, 1728e5, 4320e5, 6048e5];
  let root = null, data = null, fetchedAt = 0, sequence = 0, tick = null, lastEventFetch = 0, eventTimer = null;
  let focusKey = null, hoverKey = null; // "task:<id>" or "seg:<id>:<index>", kept across redraws

  const s = (tag, attrs, ...children) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children) e.append(c);
    return e;
  };
  const host = () => ctx.$("task-timeline");
  const isLive = () => data && data.end === null;
  // The server's now, advanced by the time since its answer.
  const now = () => data.now + (isLive() ? Math.max(0, Date.now() - fetchedAt) : 0);
  const stepFor = (ms) => STEPS.find((x) => ms / x <= 8) || STEPS[STEPS.length - 1];
  const tickText = (ms) => ms === 0 ? "0" : ms < 1000 ? ms + " ms" : ms < 60000 ? +(ms / 1000).toFixed(2) + " s"
    : ms < 3600000 ? Math.floor(ms / 60000) + " min" + (ms % 60000 ? " " + Math.round((ms % 60000) / 1000) + " s" : "")
    : Math.floor(ms / 3600000) + " h" + (ms % 3600000 ? " " + Math.round((ms % 3600000) / 60000) + " min" : "");
  const stateText = (st) => st.toLowerCase().replace(/_/g, " ");
  const plural = (n, one) => `${n} ${one}${n === 1 ? "" : "s"}`;

  function taskDetail(t, end) {
    const counts = ["model", "tool", "approval"].map((k) => [k, t.segments.filter((x) => x.kind === k).length]);
    return `${t.agent} (#${t.id}) — ${stateText(t.state)}. ${span(Math.max(0, end - t.start))}${t.end === null ? " so far" : ""}. ` +
      `${tokens(t.tokens_in + t.tokens_out)}${t.unknown_usage_calls ? "+" : ""} tokens (${tokens(t.tokens_in)} in, ${tokens(t.tokens_out)} out), ${money(t.cost_usd)}. ` +
      counts.filter(([, n]) => n).map(([k, n]) => plural(n, k === "model" ? "model call" : k === "tool" ? "tool call" : "approval")).join(", ");
  }
  function segmentDetail(x, end) {
    const took = span(Math.max(0, end - x.start));
    if (x.kind === "model") {
      return `Model call ${x.label}: ${took}. ${x.usage_unknown ? "usage unknown" : `${tokens(x.tokens_in)} in / ${tokens(x.tokens_out)} out tokens`}, ${money(x.cost_usd)}` +
        (x.attempts > 1 ? `, ${x.attempts} attempts` : "") + (x.tools && x.tools.length ? `; asked for ${x.tools.join(", ")}` : "") +
        (x.error ? `. Error: ${x.error}` : ".");
    }
    if (x.kind === "tool") {
      return `Tool ${x.tool}: ${took}, ${x.outcome}` + (x.exit_code !== null && x.exit_code !== undefined ? ` (exit ${x.exit_code})` : "") +
        (x.detail ? ` · ${x.detail}` : "") + ".";
    }
    return `Approval #${x.approval} "${x.label}": ` + (x.end === null ? `waiting for ${took} so far.`
      : `waited ${took}; ${x.state}` + (x.decision ? `: ${x.decision}` : "") + (x.decided_by ? ` — by ${x.decided_by}` : "") + ".");
  }

  // The tooltip: one element, shown beside the hovered or focused item.
  let tip = null;
  function showTip(target, text) {
    if (!tip) return;
    tip.textContent = text;
    tip.hidden = false;
    const box = host().getBoundingClientRect(), r = target.getBoundingClientRect();
    const left = Math.min(Math.max(0, r.left - box.left), Math.max(0, box.width - 360));
    tip.style.left = left + "px"; // CSSOM, not a style attribute: allowed by the page's CSP
    // Below the item, or above it when the window has no room below.
    const below = r.bottom + 6 + tip.offsetHeight <= window.innerHeight;
    tip.style.top = (below ? r.bottom - box.top + 6 : r.top - box.top - 6 - tip.offsetHeight) + "px";
  }
  const hideTip = () => { if (tip) tip.hidden = true; };

  function draw() {
    const h = host();
    if (!h) return;
    if (!data) { h.replaceChildren(); return; }
    const active = document.activeElement && h.contains(document.activeElement);
    const end = isLive() ? now() : data.end;
    const elapsed = Math.max(1, end - data.start);
    // While the request runs, the axis reaches a little past now, so running bars visibly grow.
    const step = stepFor(isLive() ? elapsed * 1.15 : elapsed);
    const axisEnd = isLive() ? Math.ceil((elapsed * 1.15) / step) * step : elapsed;
    const width = Math.max(640, Math.floor((h.clientWidth || 962) - 2)); // inside .tl-scroll's border
    const track = width - LABEL - PAD;
    const x = (t) => LABEL + (Math.min(Math.max(t - data.start, 0), axisEnd) / axisEnd) * track;
    const height = AXIS + data.tasks.length * ROW + 4;
    const svg = s("svg", { class: "tl-svg", width, height, viewBox: `0 0 ${width} ${height}`, role: "list",
      "aria-label": `Request #${data.root}: ${plural(data.tasks.length, "task")}, ${span(elapsed)}${isLive() ? " so far, running" : ""}` });

    const axis = s("g", { class: "tl-axis", "data-timeline-axis": "", "aria-hidden": "true" });
    for (let t = 0; t <= axisEnd + 1e-9; t += step) {
      const px = x(data.start + t);
      axis.append(s("line", { x1: px, x2: px, y1: AXIS - 6, y2: height, class: "tl-grid" }),
        s("text", { x: px, y: AXIS - 10, "text-anchor": t === 0 ? "start" : "middle", "data-tick": t }, tickText(t)));
    }
    if (isLive()) {
      const px = x(end);
      axis.append(s("line", { x1: px, x2: px, y1: AXIS - 6, y2: height, class: "tl-now" }),
        s("text", { x: px, y: AXIS - 10, "text-anchor": "middle", class: "tl-now-label" }, "now"));
    }
    svg.append(axis);

    const rows = [];
    data.tasks.forEach((t, i) => {
      const y = AXIS + i * ROW;
      const tEnd = t.end === null ? end : t.end;
      const key = "task:" + t.id;
      const row = s("g", { class: "tl-row", role: "listitem", tabindex: "-1", "data-task": t.id, "data-state": t.state.toLowerCase(),
        "data-depth": t.depth, "data-start": t.start, "data-end": tEnd, "aria-describedby": "tl-tip",
        "aria-label": `${t.agent}, ${stateText(t.state)}, ${span(Math.max(0, tEnd - t.start))}` });
      if (t.end === null) row.setAttribute("data-live", "");
      row.dataset.key = key;
      const name = s("text", { x: 8 + t.depth * 14, y: y + ROW / 2 + 4, class: "tl-label" }, t.agent,
        s("tspan", { class: "tl-state" }, " " + stateText(t.state)));
      const bx = x(t.start), bw = Math.max(2, x(tEnd) - bx);
      const bar = s("rect", { class: "tl-bar " + ctx.stateClass(t.state).replace("state ", "st-"), x: bx, y: y + 3, width: bw, height: ROW - 6, rx: 3 });
      row.append(s("rect", { class: "tl-hit", x: 0, y, width, height: ROW }), name, bar);
      t.segments.forEach((g, j) => {
        const gEnd = g.end === null ? end : g.end;
        const gx = x(g.start), gw = Math.max(1.5, x(gEnd) - gx);
        const upper = g.kind === "model";
        const seg = s("rect", { class: "tl-seg tl-" + g.kind + (g.end === null ? " tl-open" : ""), "data-segment": g.kind,
          "data-start": g.start, "data-end": gEnd, x: gx, y: upper ? y + 6 : y + ROW / 2 + 1, width: gw, height: ROW / 2 - 7,
          tabindex: "-1", role: "img", "aria-describedby": "tl-tip", "aria-label": segmentDetail(g, gEnd) });
        seg.dataset.key = `seg:${t.id}:${j}`;
        const show = () => showTip(seg, segmentDetail(g, gEnd));
        seg.addEventListener("mouseenter", (e) => { e.stopPropagation(); hoverKey = seg.dataset.key; show(); });
        seg.addEventListener("mouseleave", () => { hoverKey = key; showTip(row, taskDetail(t, tEnd)); });
        seg.showDetail = show;
        seg.addEventListener("focus", () => { focusKey = seg.dataset.key; show(); });
        row.append(seg);
      });
      const detail = () => showTip(bar, taskDetail(t, tEnd));
      row.showDetail = detail;
      row.addEventListener("mouseenter", () => { hoverKey = key; detail(); });
      row.addEventListener("mouseleave", () => { hoverKey = null; if (!row.contains(document.activeElement)) hideTip(); });
      row.addEventListener("focus", () => { focusKey = key; detail(); });
      row.addEventListener("blur", (e) => { if (!host().contains(e.relatedTarget)) hideTip(); });
      rows.push(row);
      svg.append(row);
    });
    // Roving tab stop: the focused (or first) bar is the one in the tab order.
    const keyed = focusKey && svg.querySelector(`[data-key="${focusKey}"]`);
    const stop = (keyed && keyed.closest(".tl-row")) || rows[0];
    if (stop) stop.setAttribute("tabindex", "0");
    svg.addEventListener("keydown", (e) => keys(e, rows));

    const live = isLive();
    const head = el("div", { class: "toolbar tl-head" }, el("h3", { id: "tl-title" }, `Timeline of request #${data.root}`),
      el("span", { class: "muted", "data-timeline-summary": "" }, `${span(elapsed)}${live ? " so far · live" : ""} · ${plural(data.tasks.length, "task")}`));
    const legend = el("p", { class: "tl-legend muted", "aria-hidden": "true" },
      el("span", { class: "tl-key tl-model" }), "model call ", el("span", { class: "tl-key tl-tool" }), "tool call ",
      el("span", { class: "tl-key tl-approval" }), "approval wait ", el("span", { class: "tl-key tl-running" }), "running · ",
      "↑↓ between tasks, → ← through a task's calls");
    tip = el("div", { id: "tl-tip", role: "tooltip", class: "tl-tip", hidden: "" });
    h.replaceChildren(head, legend, el("div", { class: "tl-scroll" }, svg), tip);
    // Redrawn under the user's focus: give it back, and keep its details shown.
    if (active && keyed) { keyed.focus({ preventScroll: true }); }
    const hovered = hoverKey && svg.querySelector(`[data-key="${hoverKey}"]`);
    if (hovered && hovered.showDetail) hovered.showDetail();
  }

  function keys(e, rows) {
    const item = e.target.closest("[data-key]");
    if (!item) return;
    const row = item.closest(".tl-row");
    const i = rows.indexOf(row);
    const segs = [...row.querySelectorAll("[data-segment]")];
    const j = segs.indexOf(item);
    let next = null;
    if (e.key === "ArrowDown") next = rows[Math.min(rows.length - 1, i + 1)];
    else if (e.key === "ArrowUp") next = rows[Math.max(0, i - 1)];
    else if (e.key === "Home") next = rows[0];
    else if (e.key === "End") next = rows[rows.length - 1];
    else if (e.key === "ArrowRight") next = segs[j + 1] || (j === -1 ? segs[0] : null);
    else if (e.key === "ArrowLeft") next = j > 0 ? segs[j - 1] : row;
    else if (e.key === "Escape") next = row;
    if (!next) return;
    e.preventDefault();
    for (const r of rows) r.setAttribute("tabindex", r === next.closest(".tl-row") ? "0" : "-1");
    next.focus();
  }

  async function fetchTimeline(id) {
    const mine = ++sequence;
    try {
      const r = await ctx.api(`/admin/api/tasks/${id}/timeline`);
      if (mine !== sequence || id !== root) return; // another request was picked meanwhile
      data = r;
      fetchedAt = Date.now();
      draw();
      follow();
    } catch (e) {
      if (mine !== sequence) return;
      data = null;
      host().replaceChildren(el("p", { class: "status bad" }, "Timeline: " + e.message));
    }
  }

  // While the request runs and the Tasks page is shown, the bars grow every second between reads.
  function follow() {
    if (tick) { clearInterval(tick); tick = null; }
    if (!isLive()) return;
    tick = setInterval(() => {
      if (!isLive()) { clearInterval(tick); tick = null; return; }
      if (!document.hidden && ctx.isShown("tasks")) draw();
    }, 1000);
  }

  // An engine event may be a new call, a tool's end, a decision: read again soon (at most once a
  // second), so new segments appear without waiting for the page's 3 s refresh.
  ctx.on("*", () => {
    if (!root || !isLive() || !ctx.isShown("tasks") || eventTimer) return;
    const wait = Math.max(200, 1000 - (Date.now() - lastEventFetch));
    eventTimer = setTimeout(() => { eventTimer = null; lastEventFetch = Date.now(); fetchTimeline(root); }, wait);
  });
  window.addEventListener("resize", () => { if (data) draw(); });

  return {
    // Called by admin.js each time it (re)loads a request's detail: on pick, and every 3 s.
    show(rootId) {
      if (rootId !== root) { root = rootId; data = null; focusKey = null; hideTip(); }
      fetchTimeline(rootId);
    },
  };
};
