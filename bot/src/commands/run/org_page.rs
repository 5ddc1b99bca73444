//! `/org`: the org chart as a page anyone with access to the listener can read — the console's org
//! graph (`admin/assets/orggraph.js`, the same layout and drawing), read-only, styled like the console,
//! with the org as a nested list beside it (the text alternative, and the whole page without script).
//!
//! Invariants:
//! - one HTML response under a per-response CSP nonce ([`opc_adapters::pages::html_page`]): its CSS and
//!   JS are compiled in, nothing is loaded from another host and nothing is styled inline;
//! - every name from the config is HTML-escaped; the graph's data comes from `GET /api/org` (and live
//!   states from `GET /admin/api/agents` when the visitor may read them);
//! - the link back to the chat keeps the query (the access token, when the page was opened with one),
//!   while the page's script takes the token out of the address bar.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::Response;

use crate::live::LiveConfig;

/// The console's look and the graph's own styles, then this page's few additions.
const CSS: [&str; 3] = [
    include_str!("../../admin/assets/admin.css"),
    include_str!("../../admin/assets/orggraph.css"),
    "main { max-width: none; } .og-text { margin-top: 12px; } .og-text summary { cursor: pointer; }",
];
/// The graph's module, then the bootstrap that starts it read-only.
const JS: [&str; 2] = [
    include_str!("../../admin/assets/orggraph.js"),
    include_str!("org_page.js"),
];

/// The org chart page. Its link back to the chat keeps the query (the access token, when the page was
/// opened with one).
pub(super) async fn org_page(
    State(live): State<Arc<LiveConfig>>,
    RawQuery(query): RawQuery,
) -> Response {
    let loaded = live.get();
    let org = &loaded.org;
    let name = html_escape::encode_text(&loaded.config.framework.name);
    let chat = match query {
        Some(query) => format!("/?{query}"),
        None => "/".to_string(),
    };
    let levels = org.depth() + 1;
    let mut page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\"><title>{name} — OPC</title>\
         <style nonce=\"{{{{NONCE}}}}\">{css}</style></head><body>\
         <a class=\"skip\" href=\"#main\">Skip to the org</a>\
         <header><h1>{name}</h1><nav aria-label=\"Pages\"><a id=\"chat-link\" data-chat-link href=\"{chat}\">Chat</a></nav></header>\
         <main id=\"main\" tabindex=\"-1\"><h2>Org</h2>\
         <p id=\"org-summary\">{agents} agent{s} in {levels} level{ls}.</p>\
         <div id=\"org-graph\" data-org-graph-root></div>\
         <details class=\"og-text\"><summary>The org as a list</summary><ul class=\"tree\" aria-label=\"The org tree\">",
        css = CSS.join("\n"),
        agents = org.len(),
        s = if org.len() == 1 { "" } else { "s" },
        ls = if levels == 1 { "" } else { "s" },
        chat = html_escape::encode_double_quoted_attribute(&chat),
    );
    // Iterative walk with explicit close markers, so a deep org cannot overflow the stack.
    enum Step<'a> {
        Open(&'a str),
        Close,
    }
    let mut stack = vec![Step::Open(org.root())];
    while let Some(step) = stack.pop() {
        match step {
            Step::Open(id) => {
                let role = html_escape::encode_text(org.role(id).unwrap_or_default());
                let _ = write!(
                    page,
                    "<li><b>{role}</b> <span class=\"id\">{}</span><ul>",
                    html_escape::encode_text(id)
                );
                stack.push(Step::Close);
                stack.extend(org.children(id).into_iter().rev().map(Step::Open));
            }
            Step::Close => page.push_str("</ul></li>"),
        }
    }
    let _ = write!(
        page,
        "</ul></details></main><script nonce=\"{{{{NONCE}}}}\">{}</script></body></html>",
        JS.join("\n")
    );
    opc_adapters::pages::html_page(&page)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_assets_load_nothing_from_elsewhere_and_style_nothing_inline() {
        let all = [CSS.join("\n"), JS.join("\n")].concat();
        for external in ["http://", "https://", "//cdn", "src=\"//", "@import"] {
            assert!(!all.contains(external), "{external}");
        }
        assert!(!all.contains("style="), "no inline style attribute");
        assert!(!all.contains("{{"), "no placeholder of the page template");
    }
}
