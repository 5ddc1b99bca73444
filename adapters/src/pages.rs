//! The listener's pages: HTTP endpoints served to people (the web chat, the org chart, their JSON APIs),
//! all behind one access check.
//!
//! Why a list and not a `Router`: the gateway builds its router from one list of [`Page`]s and puts the
//! access check on all of them at once ([`protect`]), and a test walks the same list to prove that each
//! one refuses a request without the token. A new page cannot be added without being protected.
//! Endpoints that verify their own signatures (Slack's and Discord's webhooks) are not pages: adapters
//! serve them from [`crate::Adapter::routes`]; so is the gateway's `/healthz`.
//!
//! Invariants:
//! - with a token configured, a page runs only for a request carrying it (`Authorization: Bearer …` or
//!   a `token=…` query parameter), checked before anything else of the request is read;
//! - the comparison takes the same time wherever a guess goes wrong, and says nothing about the
//!   token's length (both sides are hashed, the digests compared in constant time);
//! - the token is never logged.

use axum::Router;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// One page: a method and a path with the handler that serves them.
pub struct Page {
    /// The HTTP method.
    pub method: Method,
    /// The path, in axum's syntax (`/api/conversations/{id}/events`).
    pub path: &'static str,
    route: MethodRouter,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

impl Page {
    /// `handler` (with its `state`) serving `method` on `path`. The method given is the one routed, so
    /// the list says exactly what the router serves.
    ///
    /// # Panics
    /// For a method axum cannot route (an extension method): a programming error, caught by any test
    /// that builds the pages.
    pub fn new<H, T, S>(method: Method, path: &'static str, handler: H, state: S) -> Page
    where
        H: Handler<T, S>,
        T: 'static,
        S: Clone + Send + Sync + 'static,
    {
        #[allow(clippy::expect_used)] // fixed methods chosen in code, see `# Panics`
        let filter = MethodFilter::try_from(method.clone()).expect("a standard HTTP method");
        Page {
            method,
            path,
            route: axum::routing::on(filter, handler).with_state(state),
        }
    }

    /// The same page refusing request bodies over `bytes` (413).
    pub fn body_limit(mut self, bytes: usize) -> Page {
        self.route = self
            .route
            .layer(axum::extract::DefaultBodyLimit::max(bytes));
        self
    }
}

/// The pages as one router, each behind the access check when `token` is set. Two pages with the same
/// path and different methods are served together.
pub fn protect(pages: Vec<Page>, token: Option<String>) -> Router {
    let mut routes: Vec<(&'static str, MethodRouter)> = Vec::new();
    for page in pages {
        match routes.iter_mut().find(|(path, _)| *path == page.path) {
            Some((_, route)) => *route = std::mem::take(route).merge(page.route),
            None => routes.push((page.path, page.route)),
        }
    }
    let router = routes
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            router.route(path, route)
        });
    match token {
        Some(token) => {
            let expected = Sha256::digest(token.as_bytes()).to_vec();
            // `layer`, not `route_layer`: a method a page does not serve is refused (401) before it
            // can tell a caller without the token which methods exist (405).
            router.layer(middleware::from_fn_with_state(expected, authorize))
        }
        None => router,
    }
}

/// A page's HTML response from `template` (whose `{{NONCE}}` marks its inline `<style>` and
/// `<script>`): a fresh nonce per response, and a Content Security Policy that lets the page run only
/// those and talk only to this listener, so nothing is ever loaded from another host.
pub fn html_page(template: &str) -> Response {
    let nonce = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let body = template.replace("{{NONCE}}", &nonce);
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    );
    let mut response = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&csp) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

/// Whether `given` is the token whose SHA-256 digest is `expected`.
fn matches(given: &str, expected: &[u8]) -> bool {
    bool::from(Sha256::digest(given.as_bytes()).as_slice().ct_eq(expected))
}

async fn authorize(State(expected): State<Vec<u8>>, request: Request, next: Next) -> Response {
    let from_header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|v| v.trim().to_string());
    let from_query = request.uri().query().and_then(|query| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "token")
            .map(|(_, value)| value.into_owned())
    });
    let ok = [from_header, from_query]
        .into_iter()
        .flatten()
        .any(|given| matches(&given, &expected));
    if ok {
        return next.run(request).await;
    }
    tracing::debug!("request without a valid access token");
    let mut response = (
        StatusCode::UNAUTHORIZED,
        axum::Json(serde_json::json!({
            "error": "this page needs the access token: send the header `Authorization: Bearer <token>`, \
                      or open the page as `/?token=<token>`"
        })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_matches_only_itself() {
        let expected = Sha256::digest(b"secret").to_vec();
        assert!(matches("secret", &expected));
        assert!(!matches("secreT", &expected));
        assert!(!matches("secret2", &expected));
        assert!(!matches("", &expected));
    }
}
