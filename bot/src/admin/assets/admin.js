// The admin console: a page per hash (#org, #config), every request with the access token when the
// console was opened with one (?token=…). Nothing is loaded from another host.
(() => {
  "use strict";
  const token = new URLSearchParams(location.search).get("token");
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
    if (r.status === 401) throw new Error("Access token missing or wrong: open the console as /admin?token=<token>.");
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

  // ---- pages ----
  const pages = ["org", "config"];
  const loaded = {};
  function show() {
    const name = pages.includes(location.hash.slice(1)) ? location.hash.slice(1) : "org";
    for (const p of pages) $("page-" + p).hidden = p !== name;
    for (const a of document.querySelectorAll("nav a[data-page]")) {
      if (a.dataset.page === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    if (!loaded[name]) { loaded[name] = true; (name === "org" ? loadOrg : loadConfig)(); }
  }
  window.addEventListener("hashchange", show);

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
          onclick: () => choose(a, button) }, a.role || id, el("span", { class: "id" }, id));
        const li = el("li", {}, button);
        parent.append(li);
        if (a.children.length) {
          const ul = el("ul", {});
          li.append(ul);
          for (const c of [...a.children].reverse()) stack.push([c, ul]);
        }
      }
    } catch (e) { loaded.org = false; banner(e.message); }
  }
  function choose(a, button) {
    for (const b of document.querySelectorAll(".tree button[aria-pressed=true]")) b.setAttribute("aria-pressed", "false");
    button.setAttribute("aria-pressed", "true");
    const row = (k, v) => [el("dt", {}, k), el("dd", {}, v)];
    $("agent").replaceChildren(el("h3", {}, a.role || a.id), el("dl", {},
      ...row("id", a.id), ...row("level", String(a.level)), ...row("reports to", a.parent || "—"),
      ...row("manages", a.children.join(", ") || "—")));
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
      if (r.status === 401) throw new Error("Access token missing or wrong: open the console as /admin?token=<token>.");
      if (!r.ok) throw new Error(body.error || ("the server answered " + r.status));
      const saved = text.value;
      original = saved; etag = body.etag;
      buttons();
      const status = $("config-status");
      status.textContent = "Saved. " + describeReload(body.reload);
      status.className = "status " + (body.applied ? "ok" : "error");
      loadHistory();
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
  $("org-action").addEventListener("click", async () => {
    try {
      const org = await api("/api/org");
      $("agent-ids").replaceChildren(...org.agents.map((a) => el("option", { value: a.id }, a.role || a.id)));
    } catch (e) { /* the ids are only suggestions */ }
    $("edit-error").hidden = true;
    editFields();
    editDialog.showModal();
    $("edit-kind").focus();
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
        let s = parts.join("; ") + ". New conversations use it; requests already running finish with the config they started with.";
        for (const l of r.removed_live) s += ` ${l.agent} was removed but has ${l.tasks} live task${l.tasks === 1 ? "" : "s"}: ${l.tasks === 1 ? "it finishes" : "they finish"} first.`;
        if (r.restart_needed.length) s += ` Changed settings that apply at the next restart of opc run: ${r.restart_needed.join(", ")}.`;
        return s;
      }
      case "unchanged": return "The running config already matches the file.";
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
      validate();
      loadHistory();
    } catch (e) { loaded.config = false; $("config-status").textContent = e.message; banner(e.message); }
  }

  show();
})();
