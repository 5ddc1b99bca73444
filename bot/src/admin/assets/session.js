// The console's session module (`opcSession`): who is signed in, as /api/session says at start. It
// sets body[data-role] (a viewer's console hides every [data-admin-only] element, admin.css) and fills
// the header's #session-slot: a "read-only" badge for a viewer (data-role-badge), and for a browser
// signed in through the sign-in page a "Sign out" button (data-signout) that ends the session on the
// server and goes back to the sign-in page.
//
// Invariant: it shows what the server decided and decides nothing; the server refuses a viewer's
// changes whatever the page shows.
const opcSession = (ctx) => {
  const { $, api, el, banner, when } = ctx;

  async function signOut(button) {
    button.disabled = true;
    try {
      await api("/signout", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      location.assign("/signin?next=" + encodeURIComponent(location.pathname + location.hash));
    } catch (e) {
      banner("Could not sign out: " + e.message);
      button.disabled = false;
    }
  }

  return {
    async start() {
      let who;
      try {
        who = await api("/api/session");
      } catch (e) {
        return; // signed out meanwhile: api() is already on its way to the sign-in page
      }
      document.body.dataset.role = who.role;
      const parts = [];
      if (who.role === "viewer") {
        parts.push(el("span", { class: "role-badge", "data-role-badge": "",
          title: "Signed in with the viewer token: you can look at everything and change nothing" }, "read-only"));
      }
      if (who.via === "session") {
        const button = el("button", { type: "button", class: "signout", "data-signout": "",
          "aria-label": "Sign out" + (who.expires_at ? " (signed in until " + when(who.expires_at) + ")" : ""),
          title: who.expires_at ? "Signed in until " + when(who.expires_at) : "" }, "Sign out");
        button.addEventListener("click", () => signOut(button));
        parts.push(button);
      }
      $("session-slot").replaceChildren(...parts);
    },
    load() {}, refresh() {}, show() {}, update() {},
  };
};
