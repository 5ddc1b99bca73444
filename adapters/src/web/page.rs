//! The chat page: one HTML document with its CSS and JS inlined, so the page makes no external
//! fetches and one CSP nonce covers its style and script.
//!
//! Invariants: the title is the only text put into the page that is not ours, and it is escaped for
//! where it stands (element text: `<title>` and `<h1>`); the CSP nonce is filled in per response,
//! never cached.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::state::Shared;

const PAGE: &str = include_str!("page.html");
const CSS: &str = include_str!("chat.css");
const JS: &str = include_str!("chat.js");

/// The page for `title`, still without its nonce.
pub(super) fn render(title: &str) -> String {
    PAGE.replace("{{TITLE}}", &html_escape::encode_text(title))
        .replace("{{CSS}}", CSS)
        .replace("{{JS}}", JS)
}

/// `GET /`: the page, with a fresh nonce.
pub(super) async fn page(State(shared): State<Arc<Shared>>) -> Response {
    crate::pages::html_page(&shared.page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_is_escaped_and_the_assets_inlined() {
        let page = render("<b>R&D</b>");
        assert!(
            page.contains("<title>&lt;b&gt;R&amp;D&lt;/b&gt;</title>"),
            "{page}"
        );
        assert!(
            page.contains("<h1>&lt;b&gt;R&amp;D&lt;/b&gt;</h1>"),
            "{page}"
        );
        assert!(
            !page.contains("{{TITLE}}") && !page.contains("{{CSS}}") && !page.contains("{{JS}}")
        );
        assert!(
            page.contains("{{NONCE}}"),
            "the nonce is filled in per response"
        );
    }
}
