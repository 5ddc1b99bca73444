// The Memory page's core blocks (#blocks), editable by admins: each block with its namespace, label,
// description, value, size against its limit and version, from GET /admin/api/memory/blocks; an Edit
// button (admins only) opens a textarea with a live character count, Save and Cancel
// (POST /admin/api/memory/blocks/edit); History lists its changes on demand
// (GET /admin/api/memory/blocks/history).
//
// Invariants:
// - nothing typed is lost: an edit refused because the block changed meanwhile (409) keeps the text in
//   the textarea and shows the current text and version beside it; the user saves theirs on top of
//   the new version, or takes the current text, explicitly. An editor left open survives a reload of
//   the list;
// - an edit names the version it started from, so the server refuses a stale one;
// - read-only blocks offer no Edit (they follow the config) and say so;
// - hooks: data-block="<agent>/<label>" (or "shared/<label>") on each block's section, with
//   data-version; data-block-action="edit|save|cancel|history|use-mine|take-theirs" on its buttons,
//   data-block-input on the textarea, data-block-count, data-block-value, data-block-error,
//   data-block-conflict and data-block-history on what they name; #blocks gets data-loaded once the
//   list has been read.
const opcBlocks = (ctx) => {
  const { el, adminOnly } = ctx;
  const open = new Map(); // block key -> { text, base } of editors open across reloads
  const nameOf = (b) => (b.namespace.startsWith("agent/") ? b.namespace.slice(6) : b.namespace) + "/" + b.label;
  const chars = (text) => [...text].length; // the limit counts characters, not UTF-16 units

  // A POST that answers the status and body (the 409's current text is in its body).
  async function post(path, body) {
    const r = await fetch(path, { method: "POST", cache: "no-store", headers: ctx.headers({ "Content-Type": "application/json" }),
      body: JSON.stringify(body) });
    const answer = await r.json().catch(() => ({}));
    if (r.status === 401) throw new Error("Signed out, or the access token is wrong: sign in again.");
    return { status: r.status, body: answer };
  }

  function card(b) {
    const key = nameOf(b);
    const section = el("section", { class: "blk", "data-block": key, "data-version": String(b.version), "aria-label": "Memory block " + key });
    const count = () => `${b.chars} / ${b.limit} characters`;
    const meta = el("span", { class: "blk-meta" }, `${b.namespace} · ${count()} · version ${b.version}`);
    const value = el("pre", { class: "blk-value", "data-block-value": "" }, b.value);
    const error = el("p", { class: "blk-error", role: "alert", "data-block-error": "", hidden: "" });
    const historyButton = el("button", { type: "button", "data-block-action": "history", "aria-expanded": "false" }, "History");
    const history = el("ol", { class: "blk-history", "data-block-history": "", hidden: "", "aria-label": "Changes of " + key });
    const actions = el("span", { class: "blk-actions" });
    if (b.read_only) {
      actions.append(el("span", { class: "blk-ro", title: "Read-only blocks follow the config: change them in opc.config.yaml" }, "read-only · set in the config"));
    } else {
      actions.append(adminOnly(el("button", { type: "button", "data-block-action": "edit", "aria-label": "Edit " + key, onclick: () => edit() }, "Edit")));
    }
    actions.append(historyButton);
    section.append(el("div", { class: "blk-head" }, el("strong", {}, key), meta, actions),
      ...(b.description ? [el("div", { class: "blk-meta" }, b.description)] : []), value, error, history);

    historyButton.addEventListener("click", async () => {
      const showing = historyButton.getAttribute("aria-expanded") === "true";
      historyButton.setAttribute("aria-expanded", String(!showing));
      history.hidden = showing;
      if (!showing) await loadHistory();
    });
    async function loadHistory() {
      try {
        const r = await ctx.api("/admin/api/memory/blocks/history?" + new URLSearchParams({ namespace: b.namespace, label: b.label }));
        history.replaceChildren(...r.history.map((h) => el("li", { "data-version": String(h.version), "data-author": h.author },
          el("div", {}, el("strong", {}, `v${h.version}`), ` ${h.operation} by `, el("strong", {}, h.author === "admin" ? "admin (edited by admin)" : h.author),
            h.task ? ` in task #${h.task}` : "", el("span", { class: "muted" }, " · " + ctx.when(h.at))),
          el("pre", { class: "blk-value" }, h.new_value),
          ...(h.old_value !== null && h.old_value !== undefined ? [el("details", {}, el("summary", {}, "Before"), el("pre", { class: "blk-value" }, h.old_value))] : []))));
      } catch (e) { history.replaceChildren(el("li", { class: "status bad" }, e.message)); }
    }

    function edit(kept) {
      const state = kept || { text: b.value, base: b.version };
      const status = ctx.$("blocks-status");
      if (status) status.textContent = "";
      open.set(key, state);
      const input = el("textarea", { "data-block-input": "", "aria-label": `New value of ${key} (at most ${b.limit} characters)`, spellcheck: "false" });
      input.value = state.text;
      const counter = el("span", { class: "blk-count", "data-block-count": "", "aria-live": "polite" });
      const save = adminOnly(el("button", { type: "button", class: "primary", "data-block-action": "save" }, "Save"));
      const cancel = el("button", { type: "button", "data-block-action": "cancel" }, "Cancel");
      const conflict = el("div", { class: "blk-conflict", "data-block-conflict": "", hidden: "", role: "region", "aria-label": "The block's current text" });
      const recount = () => {
        state.text = input.value;
        const n = chars(input.value), over = n - b.limit;
        counter.textContent = over > 0 ? `${n} / ${b.limit} characters — ${over} over the limit` : `${n} / ${b.limit} characters`;
        counter.classList.toggle("over", over > 0);
        save.disabled = over > 0;
      };
      input.addEventListener("input", recount);
      input.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); close(); } });
      const bar = el("div", { class: "blk-edit-bar" }, save, cancel, counter);
      value.hidden = true;
      error.hidden = true;
      actions.querySelector("[data-block-action=edit]")?.setAttribute("hidden", "");
      section.insertBefore(input, error);
      section.insertBefore(bar, error);
      section.insertBefore(conflict, history);
      recount();
      input.focus();

      function close() {
        open.delete(key);
        input.remove(); bar.remove(); conflict.remove();
        value.hidden = false;
        error.hidden = true;
        actions.querySelector("[data-block-action=edit]")?.removeAttribute("hidden");
      }
      cancel.addEventListener("click", close);
      save.addEventListener("click", async () => {
        save.disabled = true;
        error.hidden = true;
        try {
          const r = await post("/admin/api/memory/blocks/edit", { namespace: b.namespace, label: b.label, value: input.value, version: state.base });
          if (r.status === 200) {
            Object.assign(b, r.body.block);
            close();
            value.textContent = b.value;
            meta.textContent = `${b.namespace} · ${count()} · version ${b.version}`;
            section.dataset.version = String(b.version);
            error.textContent = "";
            if (!history.hidden) loadHistory();
            ctx.$("blocks-status").textContent = `Saved ${key}: version ${b.version}.`;
            return;
          }
          error.textContent = r.body.error || `the server answered ${r.status}`;
          error.hidden = false;
          if (r.status === 409 && r.body.current) showConflict(r.body.current);
        } catch (e) { error.textContent = e.message; error.hidden = false; }
        recount();
      });

      // The block changed since the editor opened: show its current text beside the user's (which
      // stays in the textarea), and let the user choose.
      function showConflict(current) {
        const mine = el("button", { type: "button", "data-block-action": "use-mine" }, `Keep my text, over version ${current.version}`);
        const theirs = el("button", { type: "button", "data-block-action": "take-theirs" }, "Take the current text");
        mine.addEventListener("click", () => {
          state.base = current.version;
          conflict.hidden = true;
          error.hidden = true;
          input.focus();
        });
        theirs.addEventListener("click", () => {
          state.base = current.version;
          input.value = current.value;
          recount();
          conflict.hidden = true;
          error.hidden = true;
          input.focus();
        });
        conflict.replaceChildren(el("h4", {}, `Now version ${current.version} — its text:`),
          el("pre", { class: "blk-value", "data-block-current": "" }, current.value),
          el("div", { class: "blk-edit-bar" }, mine, theirs, el("span", { class: "muted" }, "Your text is still in the editor above.")));
        conflict.hidden = false;
      }
    }
    if (open.has(key)) edit(open.get(key));
    return section;
  }

  async function load() {
    const root = ctx.$("blocks");
    try {
      const r = await ctx.api("/admin/api/memory/blocks");
      const status = el("p", { id: "blocks-status", class: "status ok", "aria-live": "polite" });
      const intro = el("p", { class: "muted" }, "Always in the agents' prompts. Agents edit them with their memory tools; an edit here is kept in the block's history as made by admin. Read-only blocks follow the config.");
      const list = r.blocks.length ? el("div", { class: "blk-list" }, ...r.blocks.map(card))
        : el("p", { class: "muted", "data-blocks-empty": "" }, "No core memory blocks: define them under an agent's memory.blocks or in sharedBlocks.");
      root.replaceChildren(intro, status, list);
      root.setAttribute("data-loaded", "");
    } catch (e) {
      root.replaceChildren(el("p", { class: "status bad" }, "Core memory blocks: " + e.message));
      root.setAttribute("data-loaded", "");
    }
  }

  return { load };
};
