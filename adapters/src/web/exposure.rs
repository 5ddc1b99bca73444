//! The listener's front door: two layers every request passes before the router picks a route, so
//! what they refuse never reaches a page, a webhook or the router's own 404 and 405.
//!
//! 1. **The host** ([`Exposure::guard`]'s outer layer). A request whose `Host` is not one of the
//!    listener's names ([`Names`]: the loopback names with the listener's port, the `listen` address,
//!    and the host of `channels.web.publicUrl`) is answered `421 Misdirected Request`, with or without
//!    an access token. The usual deployment is a reverse proxy in front of a loopback listener: a
//!    proxy that forwards every name it receives (a catch-all virtual host, a wildcard DNS entry) would
//!    otherwise make the console answer to names nobody chose, and a page on another name that
//!    resolves to this machine (DNS rebinding) would read it. `/healthz` is outside: a liveness probe
//!    names the machine however its orchestrator likes, and the answer carries nothing.
//! 2. **The credentials for `/admin` and `/api`** (the inner layer, only with a token configured).
//!    Any path under either prefix, served or not, answers `401` until the request carries the
//!    access token or the viewer token (`Authorization: Bearer …`, `?token=…`, or a session cookie,
//!    as [`crate::pages`] accepts them); only then does the router say `404` for a path it does not
//!    serve. Without this, a 404 before the check and a 401 after it would tell a caller without the
//!    token which routes exist. A browser asking for the console's page is sent to the sign-in page
//!    instead of the 401; a viewer's request that could change something is refused 403 here
//!    already. The caller found is handed on to the pages' check (a request extension), so a
//!    session is looked up once.
//!
//! `Forwarded` and `X-Forwarded-*` headers are what a proxy says about the original request. They
//! are trusted only when `publicUrl` is set (there is a proxy) and the peer is on loopback (it is
//! the proxy, not a client that wrote the headers itself). Trusted, every host they name must be one
//! of the listener's names too (else 421). Untrusted, they are removed before the request goes on.
//!
//! Invariants:
//! - a request whose `Host` (or trusted forwarded host) is foreign is answered 421, before routing,
//!   on every path but `/healthz`;
//! - with a token configured, no path under `/admin` or `/api` answers anything but 401 (or the
//!   sign-in page's 303) without valid credentials, and no viewer changes anything there;
//! - a handler sees `Forwarded` / `X-Forwarded-*` headers only when they were trusted;
//! - tokens are compared as in [`crate::pages`] ([`crate::session::Access`]): digests, in constant
//!   time; they are never logged.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::pages::{self, Names};
use crate::session::{Access, Role};
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

/// The path outside the host check (see the module doc).
const HEALTH: &str = "/healthz";

/// The prefixes whose every path needs the access token before it is routed.
const TOKEN_PREFIXES: [&str; 2] = ["/admin", "/api"];

/// What the front door compares requests against: the listener's names, whether a proxy is
/// configured, and the credentials.
pub struct Exposure {
    names: Names,
    /// How a refusal names the listener (`http://127.0.0.1:7420`).
    shown: String,
    /// `channels.web.publicUrl`, when set.
    public_url: Option<String>,
    /// The address the listener is bound to: a peer of a loopback-bound listener is on loopback even
    /// when the server does not pass on the peer's address.
    bound: SocketAddr,
    /// The credentials (tokens' digests, sessions).
    access: Arc<Access>,
}

/// Without the credentials' digests (`Access` shows none).
impl std::fmt::Debug for Exposure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exposure")
            .field("names", &self.names)
            .field("public_url", &self.public_url)
            .field("bound", &self.bound)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Exposure {
    /// The front door of a listener bound to `bound` (the address it actually listens on), with
    /// `public_url` (`channels.web.publicUrl`) and the listener's credentials.
    ///
    /// # Errors
    /// When `public_url` is not an `http(s)://host[:port]` URL (the config's validation refuses those
    /// first; this is the message for a caller that skipped it).
    pub fn new(
        bound: SocketAddr,
        public_url: Option<&str>,
        access: Arc<Access>,
    ) -> Result<Exposure, String> {
        let port = bound.port();
        Ok(Exposure {
            names: Names::new(bound, public_url)?,
            shown: match bound.ip() {
                ip if ip.is_unspecified() => format!("http://127.0.0.1:{port}"),
                IpAddr::V4(v4) => format!("http://{v4}:{port}"),
                IpAddr::V6(v6) => format!("http://[{v6}]:{port}"),
            },
            public_url: public_url.map(|url| url.trim().trim_end_matches('/').to_string()),
            bound,
            access,
        })
    }

    /// `app` behind the front door: the host check outside, the token check for `/admin` and `/api`
    /// inside it, then `app`'s own routing. The app is the router's fallback service, so both layers
    /// run for every request, including paths `app` does not serve.
    ///
    /// Serve it with `into_make_service_with_connect_info::<SocketAddr>()` so forwarded headers can be
    /// trusted from a loopback peer on any listener; without it they are trusted only on a loopback-bound
    /// one.
    pub fn guard(self, app: Router) -> Router {
        let exposure = Arc::new(self);
        Router::new()
            .fallback_service(app)
            .layer(middleware::from_fn_with_state(exposure.clone(), token_gate))
            .layer(middleware::from_fn_with_state(exposure, host_check))
    }

    /// Whether `Forwarded` / `X-Forwarded-*` headers of a request from `peer` (when known) are a
    /// proxy's: only with `publicUrl` set, and only from loopback.
    fn trusts_forwarding(&self, peer: Option<SocketAddr>) -> bool {
        let peer = peer.map_or(self.bound.ip(), |peer| peer.ip());
        self.public_url.is_some() && peer.to_canonical().is_loopback()
    }

    /// The hint of a 421: how to reach this listener.
    fn how_to_reach(&self) -> String {
        match &self.public_url {
            Some(url) => format!(
                "open it as {url}/ or {}/; behind a reverse proxy, pass the original `Host` on \
                 (`channels.web.publicUrl` is {url})",
                self.shown
            ),
            None => format!(
                "open it as {}/ (or localhost); behind a reverse proxy, set \
                 `channels.web.publicUrl` to the address people open (e.g. https://opc.example.com) \
                 and `accessTokenEnv`",
                self.shown
            ),
        }
    }
}

/// The outer layer: the `Host` (and trusted forwarded hosts) must name this listener; untrusted
/// forwarding headers are removed.
async fn host_check(
    State(exposure): State<Arc<Exposure>>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| *peer);
    let trusted = exposure.trusts_forwarding(peer);
    if !trusted {
        strip_forwarding(request.headers_mut());
    }
    if request.uri().path() == HEALTH {
        return next.run(request).await;
    }
    let headers = request.headers();
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(host), None) => text(host),
        (None, _) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                format!(
                    "the request has no `Host` header; {}",
                    exposure.how_to_reach()
                ),
            );
        }
        (Some(_), Some(_)) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "the request has more than one `Host` header; send one".to_string(),
            );
        }
    };
    if !exposure.names.host_allowed(&host) {
        return misdirected(&exposure, "host", &host);
    }
    if trusted
        && let Some(foreign) = forwarded_hosts(headers)
            .into_iter()
            .find(|forwarded| !exposure.names.host_allowed(forwarded))
    {
        return misdirected(&exposure, "forwarded host", &foreign);
    }
    next.run(request).await
}

/// The inner layer: with a token configured, every path under [`TOKEN_PREFIXES`] needs valid
/// credentials (a page request without them goes to the sign-in page), and a viewer changes nothing.
async fn token_gate(
    State(exposure): State<Arc<Exposure>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !exposure.access.required() || !needs_token(request.uri().path()) {
        return next.run(request).await;
    }
    let caller = match exposure
        .access
        .identify(request.headers(), request.uri())
        .await
    {
        Ok(caller) => caller,
        Err(unavailable) => return pages::sessions_unavailable(&unavailable.0),
    };
    match caller {
        Some(caller) if caller.role == Role::Viewer && !is_safe(request.method()) => {
            pages::read_only()
        }
        Some(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None if exposure.access.sign_in().is_some() && pages::wants_page(&request) => {
            pages::to_sign_in(request.uri())
        }
        None => {
            tracing::debug!("request under /admin or /api without a valid access token");
            let mut response = refusal(StatusCode::UNAUTHORIZED, pages::UNAUTHORIZED.to_string());
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Whether `method` cannot change anything.
fn is_safe(method: &axum::http::Method) -> bool {
    use axum::http::Method;
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether `path` is one of [`TOKEN_PREFIXES`] or under one (`/admin`, `/admin/…`; not `/administer`).
fn needs_token(path: &str) -> bool {
    TOKEN_PREFIXES.iter().any(|prefix| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// Every host named by `Forwarded` (`host=`) and `X-Forwarded-Host` headers, in order.
fn forwarded_hosts(headers: &HeaderMap) -> Vec<String> {
    let mut hosts = Vec::new();
    for value in headers.get_all(header::FORWARDED) {
        for element in split_outside_quotes(&text(value), ',') {
            for pair in split_outside_quotes(&element, ';') {
                if let Some((name, host)) = pair.split_once('=')
                    && name.trim().eq_ignore_ascii_case("host")
                {
                    hosts.push(host.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    for value in headers.get_all(HeaderName::from_static("x-forwarded-host")) {
        hosts.extend(text(value).split(',').map(|host| host.trim().to_string()));
    }
    hosts
}

/// `text` cut at each `separator` outside a quoted string (RFC 7239's values may be quoted).
fn split_outside_quotes(text: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    let mut escaped = false;
    for c in text.chars() {
        if quoted && escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == separator && !quoted {
            parts.push(String::new());
            continue;
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

/// Remove `Forwarded` and every `X-Forwarded-*` header: untrusted, they are a client's own words.
fn strip_forwarding(headers: &mut HeaderMap) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|name| *name == header::FORWARDED || name.as_str().starts_with("x-forwarded-"))
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

/// A header's value as text (`(not text)` when it is not), for comparison and for a refusal.
fn text(value: &HeaderValue) -> String {
    value
        .to_str()
        .map_or_else(|_| "(not text)".to_string(), str::to_string)
}

fn misdirected(exposure: &Exposure, what: &str, host: &str) -> Response {
    let shown: String = host.chars().take(100).collect();
    tracing::debug!(host = %shown, "request for another host refused");
    refusal(
        StatusCode::MISDIRECTED_REQUEST,
        format!(
            "this listener does not answer to the {what} `{shown}`: {}",
            exposure.how_to_reach()
        ),
    )
}

fn refusal(status: StatusCode, reason: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": reason }))).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn access(token: Option<&str>) -> Arc<Access> {
        Arc::new(Access::new(token, None))
    }

    fn exposure(public_url: Option<&str>, token: Option<&str>) -> Exposure {
        Exposure::new("127.0.0.1:7420".parse().unwrap(), public_url, access(token)).unwrap()
    }

    #[test]
    fn only_admin_and_api_paths_need_the_token_first() {
        for path in [
            "/admin",
            "/admin/",
            "/admin/nonexistent",
            "/api",
            "/api/x/y",
        ] {
            assert!(needs_token(path), "{path}");
        }
        for path in [
            "/",
            "/administer",
            "/apis",
            "/org",
            "/healthz",
            "/slack/events",
        ] {
            assert!(!needs_token(path), "{path}");
        }
    }

    #[test]
    fn forwarding_is_trusted_only_from_loopback_with_a_public_url() {
        let loopback: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:50000".parse().unwrap();
        let remote: SocketAddr = "203.0.113.9:50000".parse().unwrap();
        let proxied = exposure(Some("https://opc.example.com"), Some("t"));
        assert!(proxied.trusts_forwarding(Some(loopback)));
        assert!(proxied.trusts_forwarding(Some(mapped)));
        assert!(!proxied.trusts_forwarding(Some(remote)));
        // Peer unknown: a loopback-bound listener has only loopback peers.
        assert!(proxied.trusts_forwarding(None));
        let open = Exposure::new(
            "0.0.0.0:7420".parse().unwrap(),
            Some("https://opc.example.com"),
            access(Some("t")),
        )
        .unwrap();
        assert!(!open.trusts_forwarding(None));
        assert!(open.trusts_forwarding(Some(loopback)));
        // No proxy configured: never.
        assert!(!exposure(None, None).trusts_forwarding(Some(loopback)));
    }

    #[test]
    fn forwarded_hosts_are_read_from_both_headers() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::FORWARDED,
            HeaderValue::from_static(
                "for=192.0.2.60;proto=https;host=opc.example.com, for=\"[2001:db8::1]\";Host=\"b.example;x\"",
            ),
        );
        headers.append(
            HeaderName::from_static("x-forwarded-host"),
            HeaderValue::from_static("c.example, d.example:8443"),
        );
        assert_eq!(
            forwarded_hosts(&headers),
            [
                "opc.example.com",
                "b.example;x",
                "c.example",
                "d.example:8443"
            ]
        );
        strip_forwarding(&mut headers);
        headers.insert(header::HOST, HeaderValue::from_static("x"));
        assert!(forwarded_hosts(&headers).is_empty());
        assert_eq!(headers.len(), 1, "only Host is left: {headers:?}");
    }

    /// One HTTP/1.1 GET, raw, to `address`: the status code.
    async fn status(address: SocketAddr, path: &str, headers: &[(&str, &str)]) -> u16 {
        request(address, "GET", path, headers).await
    }

    /// One HTTP/1.1 request, raw, to `address`: the status code.
    async fn request(
        address: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status in {response:?}"))
    }

    #[tokio::test]
    async fn both_layers_run_before_routing() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let bound = listener.local_addr().unwrap();
        // A router with one page and a merged one, as the gateway builds it: an unknown path falls
        // through both.
        let app = Router::new()
            .route("/admin/known", axum::routing::get(|| async { "known" }))
            .merge(Router::new().route("/healthz", axum::routing::get(|| async { "ok" })));
        let guarded = Exposure::new(
            bound,
            Some("https://opc.example.com"),
            Arc::new(Access::new(Some("s3cret"), Some("viewer"))),
        )
        .unwrap()
        .guard(app);
        tokio::spawn(async move {
            axum::serve(
                listener,
                guarded.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
        });
        let own = bound.to_string();
        let own = own.as_str();
        let token = ("authorization", "Bearer s3cret");
        for path in [
            "/admin/known",
            "/admin/nonexistent",
            "/api/nonexistent",
            "/admin",
        ] {
            assert_eq!(status(bound, path, &[("host", own)]).await, 401, "{path}");
        }
        assert_eq!(
            status(bound, "/admin/known", &[("host", own), token]).await,
            200
        );
        assert_eq!(
            status(bound, "/admin/known?token=s3cret", &[("host", own)]).await,
            200
        );
        assert_eq!(
            status(bound, "/admin/nonexistent", &[("host", own), token]).await,
            404
        );
        // The viewer token reads, and changes nothing: refused before routing, whatever the path.
        let viewer = ("authorization", "Bearer viewer");
        assert_eq!(
            status(bound, "/admin/known", &[("host", own), viewer]).await,
            200
        );
        for path in ["/admin/known", "/api/nonexistent"] {
            assert_eq!(
                request(bound, "POST", path, &[("host", own), viewer]).await,
                403,
                "{path}"
            );
        }
        assert_eq!(
            request(bound, "POST", "/admin/known", &[("host", own), token]).await,
            405
        );
        // A foreign host is misdirected, token or not, known path or not; the public name is ours.
        for path in ["/admin/known", "/api/nonexistent", "/"] {
            assert_eq!(status(bound, path, &[("host", "evil.example")]).await, 421);
            assert_eq!(
                status(bound, path, &[("host", "evil.example"), token]).await,
                421
            );
        }
        assert_eq!(
            status(bound, "/admin/known", &[("host", "opc.example.com"), token]).await,
            200
        );
        // From this (loopback) peer with publicUrl set, forwarded hosts are trusted, so checked.
        let forwarded = [("host", own), token, ("x-forwarded-host", "evil.example")];
        assert_eq!(status(bound, "/admin/known", &forwarded).await, 421);
        let forwarded = [
            ("host", own),
            token,
            ("forwarded", "host=opc.example.com;proto=https"),
        ];
        assert_eq!(status(bound, "/admin/known", &forwarded).await, 200);
        // The probe answers whatever it is called.
        assert_eq!(
            status(bound, "/healthz", &[("host", "evil.example")]).await,
            200
        );
    }
}
