// /org's bootstrap: starts the console's org graph (orggraph.js, which comes before this file in the
// page's one script) read-only, with the few helpers it needs. A page opened with ?token=… sends that
// token on its requests and takes it out of the address bar at once (the chat link, written by the
// server, keeps it). Live states are shown when this visitor may read the console's agents; otherwise
// the graph is the org alone.
(() => {
  "use strict";
  const token = new URLSearchParams(location.search).get("token");
  if (token) {
    const url = new URL(location.href);
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  const api = async (path) => {
    const r = await fetch(path, { cache: "no-store", headers: token ? { Authorization: "Bearer " + token } : {} });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || ("the server answered " + r.status));
    return body;
  };
  const el = (tag, attrs, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  };
  const graph = opcOrgGraph({ $: (id) => document.getElementById(id), api, el, readOnly: true });
  graph.load();
  setInterval(() => { if (!document.hidden) graph.refresh(); }, 3000);
})();
