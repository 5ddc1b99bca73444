// The Config page's hierarchy preview (#config-preview): the org as the editor's text describes it,
// redrawn after each validation (admin.js calls update(report, text) with the answer of
// POST /admin/api/config/validate, whose `org` the server reads from the YAML tree and compares with the
// running org). Agents the text adds, moves or removes are marked in words (data-change, a badge; a
// removed one struck through), not by colour alone.
// Invariants: text reaches the DOM only through el()/textContent; at most MAX_SHOWN agents are drawn
// (every changed agent and its ancestors first), so a 1,000-agent org redraws in milliseconds on every
// keystroke; text that cannot be read keeps the last readable preview, marked stale, with the reason.
const opcPreview = (ctx) => {
  const { el } = ctx;
  const MAX_SHOWN = 400;
  let root = null;
  let status = null;
  let tree = null;
  let last = null;

  function skeleton() {
    if (root) return;
    root = ctx.$("config-preview");
    status = el("p", { class: "preview-status", role: "status", "aria-live": "polite" }, "Reading the text…");
    tree = el("ul", { class: "preview-tree", "aria-label": "Agents as the text describes them" });
    const legend = el("p", { class: "preview-legend muted" }, "Against the running org: ",
      el("span", { class: "change added" }, "added"), " ", el("span", { class: "change moved" }, "moved"), " ",
      el("span", { class: "change removed" }, "removed"), " (struck through).");
    root.replaceChildren(el("h3", {}, "Hierarchy as typed"), status, legend, tree);
  }

  function badge(change, agent) {
    if (!change) return "";
    const text = change === "moved" ? `moved from ${agent.was || "the top"}` : change;
    return el("span", { class: "change " + change }, text);
  }

  function node(agent, change, note) {
    const label = [el("span", { class: "role" }, agent.role || "(no role)"), " ", el("code", {}, agent.id)];
    const line = el("span", { class: "line" }, ...(change === "removed" ? [el("del", {}, ...label)] : label), " ", badge(change, agent),
      note ? el("span", { class: "note muted" }, " " + note) : "");
    const li = el("li", { "data-preview-agent": agent.id }, line);
    if (change) li.setAttribute("data-change", change);
    return li;
  }

  function draw(org) {
    const byId = new Map(org.agents.map((a) => [a.id, a]));
    const kids = new Map(org.agents.map((a) => [a.id, [...a.children]]));
    // A removed agent shows where it was: under its old parent when the text still has that one.
    const removed = new Map(org.removed.map((a) => [a.id, a]));
    const tops = org.agents.filter((a) => !a.parent || !byId.has(a.parent)).map((a) => a.id);
    for (const a of org.removed) {
      if (a.parent && kids.has(a.parent)) kids.get(a.parent).push(a.id); else tops.push(a.id);
    }
    // Changed agents and their ancestors are drawn first (whole chains, while they fit); the rest fill
    // up to MAX_SHOWN.
    const keep = new Set();
    for (const a of [...org.agents.filter((a) => a.change), ...org.removed]) {
      const chain = [];
      for (let id = a.id; id && !keep.has(id) && !chain.includes(id) && chain.length < 10000;) {
        chain.push(id);
        id = (byId.get(id) || removed.get(id) || {}).parent;
      }
      if (keep.size + chain.length > MAX_SHOWN) break;
      for (const id of chain) keep.add(id);
    }
    let shown = 0, hidden = 0, reserved = keep.size;
    const seen = new Set();
    const fragment = document.createDocumentFragment();
    const place = (id, parentList, note) => {
      // Iterative, so a deep org cannot overflow the stack.
      const stack = [[id, parentList, note]];
      while (stack.length) {
        const [current, list, why] = stack.pop();
        if (seen.has(current)) continue;
        seen.add(current);
        const agent = byId.get(current) || removed.get(current);
        if (!agent) continue;
        const children = kids.get(current) || [];
        if (keep.has(current) && list) reserved--;
        else if (!list || shown + reserved >= MAX_SHOWN) {
          // Not drawn, nor anything under it (a kept agent's ancestors are kept too).
          hidden++;
          for (const c of children) stack.push([c, null, ""]);
          continue;
        }
        shown++;
        const change = removed.has(current) ? "removed" : agent.change;
        const li = node(agent, change, why);
        list.append(li);
        if (children.length) {
          const ul = el("ul", {});
          li.append(ul);
          for (const c of [...children].reverse()) stack.push([c, ul, ""]);
        }
      }
    };
    for (const id of tops) {
      const a = byId.get(id);
      const note = a && a.parent && !byId.has(a.parent) ? `(its parent ${a.parent} is not in the text)` : "";
      place(id, fragment, note);
    }
    // What no top reached is in a cycle of parents: shown anyway, said so.
    for (const a of org.agents) if (!seen.has(a.id)) place(a.id, fragment, "(in a cycle of parents)");
    hidden += org.total - org.agents.length;
    tree.replaceChildren(fragment);
    const count = (n, what) => `${n} ${what}`;
    const added = org.agents.filter((a) => a.change === "added").length;
    const moved = org.agents.filter((a) => a.change === "moved").length;
    const changes = org.compared
      ? (added || moved || org.removed.length
        ? `: ${count(added, "added")}, ${count(moved, "moved")}, ${count(org.removed.length, "removed")} against the running org (generation ${org.generation})`
        : `, as the running org (generation ${org.generation})`)
      : "";
    status.textContent = `${count(org.total, org.total === 1 ? "agent" : "agents")}${changes}.` +
      (hidden ? ` ${hidden} agent${hidden === 1 ? " is" : "s are"} not shown, to keep the page quick (changed ones first).` : "");
  }

  return {
    start() {}, load() {}, refresh() {}, show() {},
    update(report) {
      skeleton();
      const org = report && report.org;
      if (!org) return;
      if (!org.readable) {
        root.classList.add("stale");
        status.textContent = `The agents cannot be read: ${org.reason}.` +
          (last ? " Showing the last readable hierarchy." : "");
        return;
      }
      root.classList.remove("stale");
      last = org;
      draw(org);
    },
  };
};
