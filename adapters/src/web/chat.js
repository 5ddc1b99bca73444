// The web chat's script: one conversation over the JSON API and its server-sent event stream, and the
// list of this browser's conversations beside it.
// Invariants: every text from the server is escaped before it reaches innerHTML (the markdown subset
// is applied to escaped text; links only for http(s) URLs; the list is built with textContent); the
// page works with the keyboard alone. The list's ids live in this browser's localStorage only (at most
// KEEP, newest first): the server lists a conversation only to a page that names its id, and ids it
// does not know are forgotten here. A 401 sends the page to /signin (unless a ?token= was given: then
// the token is wrong, and the page says so). A ?token= (scripts, old bookmarks) is taken out of the
// address bar at once, so it is not kept in history; this tab keeps it in sessionStorage for its
// requests and a reload.
"use strict";
(function () {
  const given = new URLSearchParams(location.search).get("token");
  if (given) {
    try { sessionStorage.setItem("opc.token", given); } catch (e) { /* storage off: this load only */ }
    const url = new URL(location.href);
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  const token = given || (() => { try { return sessionStorage.getItem("opc.token"); } catch (e) { return null; } })();
  const log = document.getElementById("log");
  const empty = document.getElementById("empty");
  const input = document.getElementById("input");
  const form = document.getElementById("composer");
  const sendButton = document.getElementById("send");
  const statusLine = document.getElementById("status");
  const traceList = document.getElementById("trace-list");
  const traceCount = document.getElementById("trace-count");
  const orgLink = document.getElementById("org-link");
  const banner = document.getElementById("banner");
  const consoleLink = document.getElementById("console-link");
  const listNode = document.getElementById("conversation-list");
  const listEmpty = document.getElementById("conversations-empty");
  const sidebar = document.getElementById("conversations");
  const toggle = document.getElementById("conversations-toggle");
  if (token) orgLink.href = "/org?token=" + encodeURIComponent(token);
  if (token) consoleLink.href = "/admin?token=" + encodeURIComponent(token);
  let conversation = null;
  let source = null;

  // ---- markdown subset: code blocks, inline code, bold, italics, http(s) links, line breaks ----
  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function spans(raw) {
    const links = [];
    let s = esc(raw).replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, (m, text, url) => {
      links.push('<a href="' + url + '" target="_blank" rel="noopener noreferrer">' + text + "</a>");
      return "\u0000" + (links.length - 1) + "\u0000";
    });
    s = s.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
    s = s.replace(/(^|[^*\w])\*([^*\s][^*\n]*)\*(?![\w*])/g, "$1<em>$2</em>");
    s = s.replace(/(^|[^\w])_([^_\s][^_\n]*)_(?!\w)/g, "$1<em>$2</em>");
    // Leading spaces carry nesting (`/agents` indents by level): keep them visible.
    s = s.replace(/(^|\n)( +)/g, (m, nl, spaces) => nl + "\u00a0".repeat(spaces.length));
    s = s.replace(/\n/g, "<br>");
    return s.replace(/\u0000(\d+)\u0000/g, (m, i) => links[Number(i)]);
  }
  function inline(raw) {
    return raw.split(/(`[^`\n]+`)/).map((part, i) =>
      i % 2 ? "<code>" + esc(part.slice(1, -1)) + "</code>" : spans(part)).join("");
  }
  function markdown(text) {
    return String(text).split("```").map((part, i) => {
      if (i % 2 === 0) return inline(part);
      const nl = part.indexOf("\n");
      const code = nl >= 0 && /^[\w+.-]*$/.test(part.slice(0, nl)) ? part.slice(nl + 1) : part;
      return "<pre><code>" + esc(code.replace(/\n$/, "")) + "</code></pre>";
    }).join("");
  }

  // ---- HTTP ----
  function headers() {
    const h = { "Content-Type": "application/json" };
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }
  async function postJson(path, body) {
    const response = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (response.status === 401) signedOut();
    let data = {};
    try { data = await response.json(); } catch (e) { /* not JSON */ }
    return { status: response.status, data };
  }
  function say(text) { statusLine.textContent = text; }
  // Signed out (a session expired, or none): the sign-in page, which comes back here. A page opened
  // with ?token= has a wrong token instead, and says so.
  function signedOut() {
    if (token) {
      try { sessionStorage.removeItem("opc.token"); } catch (e) { /* nothing kept */ }
      say("Access token missing or wrong: sign in at /signin, or open this page as /?token=<token>.");
      return;
    }
    location.assign("/signin?next=" + encodeURIComponent(location.pathname + location.hash));
  }
  // The gateway's standing notice (a missing LLM key, with how to fix it), above the conversation.
  async function loadBanner() {
    try {
      const r = await fetch("/api/banner", { headers: headers(), cache: "no-store" });
      if (r.status === 401) { signedOut(); return; }
      if (!r.ok) return;
      const data = await r.json();
      banner.hidden = !data.banner;
      banner.innerHTML = data.banner ? markdown(data.banner) : "";
    } catch (e) { /* the chat itself still works; the next send tries again */ }
  }

  // ---- rendering ----
  function nearBottom() { return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80; }
  function keepScrolled(was) { if (was) window.scrollTo(0, document.body.scrollHeight); }
  function clearAll() {
    log.replaceChildren();
    traceList.replaceChildren();
    traceCount.textContent = "0";
  }
  function element(id, className) {
    let node = document.getElementById(id);
    if (!node) {
      node = document.createElement("div");
      node.id = id;
      log.appendChild(node);
    }
    node.className = className;
    return node;
  }
  function showMessage(data) {
    const was = nearBottom();
    const user = data.author === "user";
    // A command is shown as typed (code), so its answer below reads as the answer to it.
    const command = user && /^\/\w/.test(data.text);
    const node = element("m-" + data.id, "msg " + (user ? "user" : "bot") + (command ? " command" : ""));
    node.dataset.author = data.author || "bot";
    node.innerHTML = '<span class="who">' + (user ? "You" : "OPC") + "</span>" +
      '<div class="body">' + (command ? "<code>" + esc(data.text) + "</code>" : markdown(data.text)) + "</div>";
    keepScrolled(was);
  }
  function editMessage(data) {
    const node = document.getElementById("m-" + data.id);
    if (!node) return showMessage({ id: data.id, author: "bot", text: data.text });
    const was = nearBottom();
    const body = node.querySelector(".body");
    if (body) body.innerHTML = markdown(data.text);
    keepScrolled(was);
  }
  function showCard(data) {
    const was = nearBottom();
    const card = data.card;
    const node = element("m-" + data.id, "card");
    const hadFocus = node.contains(document.activeElement);
    node.setAttribute("role", "group");
    node.setAttribute("aria-label", "Approval " + card.approval + " requested by " + card.agent);
    node.dataset.approval = card.approval;
    const path = (card.path || []).join(" › ");
    node.innerHTML = '<div class="body">' + markdown("**Approval needed**, requested by **" + card.agent + "** (" +
      card.role + ")" + (path ? " — " + path : "") + "\n\n" + card.summary) + "</div>";
    const decided = card.state && card.state.Decided;
    if (decided) {
      const p = document.createElement("p");
      p.className = "decision";
      p.tabIndex = -1;
      p.textContent = (decided.approved ? "Approved: " : "Rejected: ") + decided.option + " — decided by " + decided.by + " at " + decided.at;
      node.appendChild(p);
      if (hadFocus) p.focus();
    } else {
      const options = document.createElement("div");
      options.className = "options";
      (card.options || []).forEach((label, index) => {
        const button = document.createElement("button");
        button.type = "button";
        button.textContent = label;
        button.setAttribute("aria-label", label + " (approval " + card.approval + ")");
        button.addEventListener("click", () => decide(node, card.approval, index, label));
        options.appendChild(button);
      });
      node.appendChild(options);
    }
    keepScrolled(was);
  }
  function showNotice(data) {
    const was = nearBottom();
    const node = document.createElement("div");
    node.className = "notice";
    node.setAttribute("role", "note");
    node.innerHTML = '<span class="who">Notice</span><div class="body">' + markdown(data.text) + "</div>";
    if (data.id) {
      node.id = "m-" + data.id;
      const existing = document.getElementById(node.id);
      if (existing) { existing.replaceWith(node); keepScrolled(was); return; }
    }
    log.appendChild(node);
    keepScrolled(was);
  }
  // Trace lines in words, one case per engine event kind; an unknown kind still reads as words.
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
  function typeName(t) { return String(t).toLowerCase().replace(/_/g, " "); }
  function counts(c) {
    return Object.entries(c || {}).map(([t, n]) => n + " " + typeName(t)).join(", ");
  }
  const escalations = { error: "after an error", timeout: "after a timeout", uncertainty: "unsure how to go on",
    approval_needed: "needs an approval" };
  function describe(e) {
    switch (e.event) {
      case "task_created":
        return e.parent != null ? "task #" + e.task + " created for " + e.agent
          : "request #" + e.task + " started with " + e.agent;
      case "delegated": return e.from + " delegated to " + e.to + " (task #" + e.child + ")";
      case "agent_started": return e.agent + " started on task #" + e.task;
      case "tool_called": return e.agent + " used the tool " + e.tool;
      case "tool_finished": {
        const secs = e.duration_ms != null ? ", " + (e.duration_ms / 1000).toFixed(1) + " s" : "";
        const code = e.exit_code != null ? ", exit " + e.exit_code : "";
        return e.agent + "'s " + e.tool + (e.detail ? " (" + e.detail + ")" : "") + " finished: "
          + (e.outcome === "ok" ? "ok" : "error") + code + secs;
      }
      case "privacy_masked": {
        const n = Number(e.total || 0);
        const what = plural(n, "personal value", "personal values") + (n ? " (" + counts(e.counts) + ")" : "");
        if (e.mode === "route") return "sent " + e.agent + "'s model call to " + (e.routed_to || "the trusted model") + ": it carried " + what;
        return (e.mode === "redact" ? "redacted " : "masked ") + what + " before " + e.agent + "'s model call";
      }
      case "privacy_blocked":
        return "stopped " + e.agent + "'s model call: it still carried a real " + typeName(e.kind) + " value, so nothing was sent";
      case "agent_finished": {
        const secs = e.duration_ms != null ? ", " + (e.duration_ms / 1000).toFixed(1) + " s" : "";
        const cost = e.cost_usd != null ? ", $" + Number(e.cost_usd).toFixed(4) : "";
        return e.agent + " finished (" + String(e.state || "").toLowerCase() + secs + cost + ")";
      }
      case "escalated": return e.agent + " escalated " + (escalations[e.kind] || typeName(e.kind)) + ": " + e.reason;
      case "approval_requested": return e.agent + " asks for approval #" + e.approval;
      case "approval_resolved": return "approval #" + e.approval + " decided: " + e.decision + ", by " + e.by;
      case "config_reloaded": return "the config was reloaded (generation " + e.generation + ")";
      case "config_rejected": return "a config change was refused (" + plural(Number(e.errors || 0), "error", "errors") + ")";
      case "stream_restarted": return "the model call was retried";
      default: return typeName(e.event || "event");
    }
  }
  function showProgress(e) {
    const li = document.createElement("li");
    li.textContent = describe(e);
    traceList.appendChild(li);
    traceCount.textContent = String(traceList.children.length);
  }

  // ---- this browser's conversations ----
  const KEY = "opc.conversations";
  const KEEP = 100; // the server lists at most 100 at once
  function kept() {
    try {
      const ids = JSON.parse(localStorage.getItem(KEY) || "[]");
      return Array.isArray(ids) ? ids.filter((id) => typeof id === "string" && /^[0-9A-Za-z-]{1,64}$/.test(id)).slice(0, KEEP) : [];
    } catch (e) { return []; }
  }
  function keep(ids) {
    try { localStorage.setItem(KEY, JSON.stringify(ids.slice(0, KEEP))); } catch (e) { /* private mode: the list is this page's */ }
  }
  // Remember `id` (started or opened here) as the most recent.
  function remember(id) { keep([id, ...kept().filter((k) => k !== id)]); }
  function ago(ms) {
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 60) return "just now";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return new Date(ms).toLocaleDateString();
  }
  function mark() {
    for (const a of listNode.querySelectorAll("a[data-conversation]")) {
      if (a.dataset.conversation === conversation) a.setAttribute("aria-current", "true");
      else a.removeAttribute("aria-current");
    }
  }
  function entry(c) {
    const a = document.createElement("a");
    a.href = "#c=" + c.id;
    a.dataset.conversation = c.id;
    a.dataset.at = String(c.at);
    const title = document.createElement("strong");
    title.className = "title";
    title.textContent = c.title || "(no message yet)";
    const last = document.createElement("span");
    last.className = "last";
    last.textContent = c.last ? (c.last_author === "user" ? "You: " : "") + c.last : "";
    const time = document.createElement("time");
    time.dateTime = new Date(c.at).toISOString();
    time.title = new Date(c.at).toLocaleString();
    time.textContent = ago(c.at);
    a.append(title, last, time);
    a.setAttribute("aria-label", (c.title || "New conversation") + ", last message " + ago(c.at));
    a.addEventListener("click", (ev) => { ev.preventDefault(); openConversation(c.id); });
    const li = document.createElement("li");
    li.append(a);
    return li;
  }
  let listing = null;
  // One request for every kept id; the server answers newest first and leaves out ids it does not know.
  async function loadList() {
    const ids = kept();
    if (!ids.length) { listNode.replaceChildren(); listEmpty.hidden = false; return; }
    try {
      const r = await fetch("/api/conversations?ids=" + ids.map(encodeURIComponent).join(","), { headers: headers(), cache: "no-store" });
      if (r.status === 401) { signedOut(); return; }
      if (!r.ok) return;
      const data = await r.json();
      const known = new Set(data.conversations.map((c) => c.id));
      // Forget what the server does not know (kept ids added since the request stay).
      keep(kept().filter((id) => known.has(id) || !ids.includes(id)));
      const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.conversation : null;
      listNode.replaceChildren(...data.conversations.map(entry));
      listEmpty.hidden = data.conversations.length > 0;
      mark();
      if (focused) { const again = listNode.querySelector('a[data-conversation="' + focused + '"]'); if (again) again.focus(); }
    } catch (e) { /* the list is a convenience: the chat works without it; the next event tries again */ }
  }
  // At most one list request per half second, after the open conversation changes.
  function listSoon() {
    if (listing) return;
    listing = setTimeout(() => { listing = null; loadList(); }, 500);
  }
  function openConversation(id) {
    if (id !== conversation) connect(id);
    setSidebar(false);
    input.focus();
  }
  function setSidebar(opened) {
    sidebar.classList.toggle("open", opened);
    toggle.setAttribute("aria-expanded", String(opened));
  }
  toggle.addEventListener("click", () => {
    const opened = !sidebar.classList.contains("open");
    setSidebar(opened);
    if (opened) { const first = listNode.querySelector("a"); (first || sidebar).focus(); }
  });
  sidebar.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && sidebar.classList.contains("open")) { setSidebar(false); toggle.focus(); } });
  // The console, for an admin only (a viewer, an open listener or an older server get no link).
  async function loadSession() {
    try {
      const r = await fetch("/api/session", { headers: headers(), cache: "no-store" });
      if (!r.ok) return;
      const data = await r.json();
      consoleLink.hidden = data.role !== "admin";
    } catch (e) { /* no link */ }
  }

  // ---- the event stream ----
  function connect(id) {
    if (source) source.close();
    conversation = id;
    history.replaceState(null, "", location.pathname + location.search + "#c=" + id);
    remember(id);
    mark();
    let url = "/api/conversations/" + encodeURIComponent(id) + "/events";
    if (token) url += "?token=" + encodeURIComponent(token);
    const es = new EventSource(url);
    source = es;
    const on = (name, handler) => es.addEventListener(name, (ev) => {
      let data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      handler(data);
    });
    on("reset", clearAll);
    // Each change to the conversation's messages refreshes the list (at most twice a second).
    const listed = (handler) => (data) => { handler(data); listSoon(); };
    on("message", listed(showMessage));
    on("edit", listed(editMessage));
    on("card", listed(showCard));
    on("card_update", showCard);
    on("notice", listed(showNotice));
    on("progress", showProgress);
    es.addEventListener("open", () => { if (statusLine.dataset.lost) { say("Connected."); delete statusLine.dataset.lost; } });
    es.addEventListener("error", () => {
      if (es !== source) return;
      if (es.readyState === EventSource.CLOSED) {
        // Refused (404: forgotten after a restart, 401: token): say so; otherwise retry later.
        fetch(url, { method: "GET", headers: headers() }).then((r) => {
          if (r.body) r.body.cancel();
          if (r.status === 404) { forget(); listSoon(); say("That conversation does not exist on this server; your next message starts a new one."); }
          else if (r.status === 401) signedOut();
          else setTimeout(() => { if (es === source) connect(id); }, 2000);
        }).catch(() => setTimeout(() => { if (es === source) connect(id); }, 2000));
      } else {
        statusLine.dataset.lost = "1";
        say("Connection lost; reconnecting…");
      }
    });
  }
  function forget() {
    if (source) source.close();
    source = null;
    conversation = null;
    history.replaceState(null, "", location.pathname + location.search);
    mark();
  }

  // ---- actions ----
  async function decide(node, approval, option, label) {
    const buttons = node.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    say("Sending decision “" + label + "”…");
    try {
      const r = await postJson("/api/approvals/" + encodeURIComponent(approval), { option });
      if (r.status === 202) { say("Decision sent: " + label + "."); return; }
      say("Decision refused: " + (r.data.error || "HTTP " + r.status));
    } catch (e) {
      say("Could not reach the server; try again.");
    }
    buttons.forEach((b) => { b.disabled = false; });
  }
  async function send(text) {
    if (!conversation) {
      const r = await postJson("/api/conversations", { text });
      if (r.status !== 201) return r;
      connect(r.data.id);
      return { status: 202, data: {} };
    }
    const r = await postJson("/api/conversations/" + encodeURIComponent(conversation) + "/messages", { text });
    if (r.status === 404) forget();
    return r;
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value;
    if (!text.trim()) { say("Type a message first."); input.focus(); return; }
    sendButton.disabled = true;
    say("Sending…");
    try {
      const r = await send(text);
      if (r.status === 202) { input.value = ""; say(""); }
      else if (r.status === 404) say("That conversation does not exist on this server; press Send again to start a new one.");
      else say("Not sent: " + (r.data.error || "HTTP " + r.status));
    } catch (e) {
      say("Could not reach the server; your message is still in the box.");
    }
    sendButton.disabled = false;
    input.focus();
    loadBanner();
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  document.getElementById("new-conversation").addEventListener("click", () => {
    forget();
    clearAll();
    log.appendChild(empty);
    setSidebar(false);
    say("New conversation: your next message starts it.");
    input.focus();
  });

  const match = /^#c=([0-9A-Za-z-]{1,64})$/.exec(location.hash);
  if (match) connect(match[1]);
  loadBanner();
  loadList();
  loadSession();
  // The list's times ("3 min ago") age while the page is open.
  setInterval(() => { if (!document.hidden) loadList(); }, 60000);
  input.focus();
})();
