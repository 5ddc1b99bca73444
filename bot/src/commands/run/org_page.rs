//! `/org`: the org chart as a page anyone with access to the listener can read (the admin console's
//! Org page is the live view).

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::Html;

use crate::live::LiveConfig;

/// The org chart as a page of nested lists. Its link back to the chat keeps the query (the access
/// token, when the page was opened with one).
pub(super) async fn org_page(
    State(live): State<Arc<LiveConfig>>,
    RawQuery(query): RawQuery,
) -> Html<String> {
    let loaded = live.get();
    let org = &loaded.org;
    let name = html_escape::encode_text(&loaded.config.framework.name);
    let chat = match query {
        Some(query) => format!("/?{query}"),
        None => "/".to_string(),
    };
    let mut page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{name} — OPC</title>\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <style>body{{font:15px system-ui,sans-serif;margin:2em}}li{{margin:.3em 0}}.role{{color:#555}}</style>\
         </head><body><h1>{name}</h1><p>{} agents in {} levels. <a href=\"{}\">Chat</a></p><ul>",
        org.len(),
        org.depth() + 1,
        html_escape::encode_double_quoted_attribute(&chat)
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
                    "<li><b>{}</b> <span class=\"role\">{role}</span><ul>",
                    html_escape::encode_text(id)
                );
                stack.push(Step::Close);
                stack.extend(org.children(id).into_iter().rev().map(Step::Open));
            }
            Step::Close => page.push_str("</ul></li>"),
        }
    }
    page.push_str("</ul></body></html>");
    Html(page)
}
