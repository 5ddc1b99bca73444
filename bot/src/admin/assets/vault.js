// The Privacy page's vault status (#vault): the values the privacy gateway's vaults hold now, per
// conversation (count by type, oldest and newest stored), the oldest value's age, and the fake scheme
// (how substitutes are made per type), from GET /admin/api/privacy/vault. Hooks: load() on first show,
// refresh() every few seconds while shown.
// Invariants: the endpoint never sends a value (real or fake), and this module shows only what it sends,
// through el()/textContent; "Older conversations" pages by the answer's next_before cursor.
const opcVault = (ctx) => {
  const { el, when, span } = ctx;
  let root = null;
  let summary, scheme, body, more, error;
  let pages = [null]; // the `before` cursor of each page shown; null: the newest
  let loading = false;

  function skeleton() {
    if (root) return;
    root = ctx.$("vault");
    summary = el("dl", { class: "totals" });
    scheme = el("ul", { class: "scheme", "aria-label": "How substitutes are made, per type" });
    body = el("tbody", {});
    more = el("button", { type: "button", "data-vault-more": "", hidden: "" }, "Older conversations");
    more.addEventListener("click", () => draw(true));
    error = el("p", { class: "status error", role: "alert", hidden: "" });
    root.replaceChildren(
      el("h3", { id: "vault-title" }, "Vault"),
      el("p", { class: "muted" }, "Each running request keeps a vault in memory: the personal values its conversation " +
        "carried, mapped to the substitutes the model sees. A vault ends with its request. Never a value here, " +
        "real or fake: types, counts and times only."),
      error, summary,
      el("h4", {}, "Fake scheme"), scheme,
      el("h4", {}, "Held per conversation"),
      el("div", { class: "scroll" }, el("table", { class: "grid", "aria-labelledby": "vault-title" },
        el("thead", {}, el("tr", {}, el("th", {}, "Conversation"), el("th", { class: "num" }, "Values"),
          el("th", {}, "By type"), el("th", {}, "Oldest stored"), el("th", {}, "Newest stored"))), body)),
      more);
  }

  function total(label, value) { return el("div", {}, el("dt", {}, label), el("dd", {}, value)); }

  // `older`: the next page after the last row shown; otherwise the pages already shown, again.
  async function draw(older) {
    skeleton();
    if (loading) return;
    loading = true;
    try {
      if (!older) pages = [null];
      const before = older ? pages[pages.length - 1] : null;
      const r = await ctx.api("/admin/api/privacy/vault" + (before != null ? "?before=" + before : ""));
      error.hidden = true;
      if (!r.enabled) {
        summary.replaceChildren(total("Privacy gateway", "off"));
        scheme.replaceChildren(el("li", { class: "muted" }, "No substitutes: LLM calls carry text as written."));
      } else {
        summary.replaceChildren(
          total("Values held", String(r.values)),
          total("Conversations", String(r.conversations.length) + (r.next_before != null ? "+" : "")),
          total("Oldest value", r.oldest_age_ms != null ? span(r.oldest_age_ms) + " old" : "none"),
          total("Mode", r.mode));
        scheme.replaceChildren(...r.scheme.map((s) => el("li", { "data-vault-type": s.type }, el("code", {}, s.type), " → " + s.how)));
      }
      const rows = r.conversations.map((c) => el("tr", { "data-vault-conversation": c.conversation || "" },
        el("td", {}, c.conversation ? el("code", {}, c.conversation) : el("span", { class: "muted" }, "(a call outside any conversation)")),
        el("td", { class: "num" }, String(c.values)),
        el("td", {}, Object.entries(c.by_type).map(([t, n]) => `${n} ${t}`).join(", ")),
        el("td", {}, when(c.oldest_ms)),
        el("td", {}, when(c.newest_ms))));
      if (older) body.append(...rows); else body.replaceChildren(...rows);
      if (!body.children.length) body.append(el("tr", {}, el("td", { colspan: "5", class: "muted" }, "No vault holds a value now.")));
      if (r.next_before != null) pages.push(r.next_before);
      more.hidden = r.next_before == null;
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
    } finally {
      loading = false;
    }
  }

  return {
    start() {}, show() {}, update() {},
    load() { draw(false); },
    // While shown; a page of older rows the person asked for is kept until they leave and come back.
    refresh() { if (pages.length <= 1) draw(false); },
  };
};
