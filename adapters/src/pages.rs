//! The listener's pages: HTTP endpoints served to people (the web chat, the org chart, the console,
//! their JSON APIs), all behind one access check, and the sign-in page that gets a browser past it.
//!
//! Why a list and not a `Router`: the gateway builds its router from one list of [`Page`]s and puts the
//! access check on all of them at once ([`protect_with`]), and a test walks the same list to prove that
//! each one refuses a request without the token. A new page cannot be added without being protected.
//! Endpoints that verify their own signatures (Slack's and Discord's webhooks) are not pages: adapters
//! serve them from [`crate::Adapter::routes`]; so is the gateway's `/healthz`.
//!
//! The check, in this order (the first that fails answers; nothing of the body is read before):
//! 1. **the credentials**, when an access token is configured ([`Access`]): `Authorization: Bearer …`
//!    (the scheme in any case, RFC 7235), a `token=…` query parameter, or the session cookie the
//!    sign-in page set, each with the access token or the viewer token. Without them a browser asking
//!    for a page (a `GET` accepting `text/html`) is sent to the sign-in page (`303` to
//!    `/signin?next=<path>`); anything else is answered 401;
//! 2. **the `Host`** must be one of the listener's names ([`Names`]): the loopback names (`127.0.0.1`,
//!    `localhost`, `[::1]`) with the listener's port, the configured listen address, and the host of
//!    `channels.web.publicUrl`; when the listener is on an unspecified address (`0.0.0.0`, `::`), also
//!    any IP literal with its port. Else 403. This defeats DNS rebinding: a page on `attacker.example`
//!    whose name is made to point at 127.0.0.1 still sends `Host: attacker.example`;
//! 3. a request that can change something (any method but GET, HEAD and OPTIONS) must be
//!    **same-origin**: an `Origin` header, when present, must be the listener's own (`http(s)://` and a
//!    name above, or exactly the request's `Host`); with no `Origin`, a `Sec-Fetch-Site` header, when
//!    present, must be `same-origin` or `none`. A request with neither is not from a browser (curl, a
//!    script): browsers send `Origin` on every such request, so a web page cannot make one without
//!    it; such a request is let through. Else 403;
//! 4. the same requests must carry **`Content-Type: application/json`** (an optional `charset`
//!    parameter allowed), even those whose endpoint reads no body (a cancel): a cross-site form or
//!    `text/plain` post is a "simple request" that a browser sends without asking, a JSON one is not.
//!    Else 403;
//! 5. the same requests from a **viewer** (the viewer token, by any of the three means) are refused
//!    403: a viewer reads everything and changes nothing, whichever page it asks.
//!
//! The sign-in endpoints pass steps 2 to 4 but need no credentials (they are how one gets them):
//! `GET /signin` (the page), `POST /signin` (`{"token": …, "next": "/admin"}`: a session cookie, the
//! attempts limited per peer), `POST /signout` (the session deleted, the cookie cleared; a viewer may).
//! A page opened with a valid `?token=` (a script's link, an old bookmark) also gets the session
//! cookie, so the page, which takes the token out of its address at once, still works after a reload.
//!
//! Refusals are 401 or 403 with `{"error": …}` saying what was wrong and how to fix it; they never
//! echo the token.
//!
//! Invariants:
//! - with a token configured, a page runs only for a request carrying valid credentials, checked
//!   before anything else of the request is read;
//! - a viewer's request that can change something never reaches a page;
//! - tokens are compared as digests in constant time ([`crate::session`]), and never logged;
//! - a sign-in follows `next` only to a path on this listener.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter};

use crate::session::{Access, Caller, Role, Via};

/// The sign-in page, and where its form posts.
pub const SIGN_IN: &str = "/signin";
/// Where the console's "Sign out" posts.
pub const SIGN_OUT: &str = "/signout";

/// Largest sign-in body: a token and a path.
const SIGN_IN_BODY: usize = 8 << 10;

const SIGN_IN_PAGE: &str = include_str!("signin.html");
const SIGN_IN_CSS: &str = include_str!("signin.css");

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

/// The pages as one router, all behind the listener's check (see the module doc) with the access
/// `token` alone: no viewer token, no sign-in page.
pub fn protect(pages: Vec<Page>, token: Option<String>, names: Names) -> Router {
    protect_with(pages, Arc::new(Access::new(token.as_deref(), None)), names)
}

/// The pages as one router, all behind the listener's check (see the module doc): the credentials
/// of `access`, the `Host` against `names`, and for requests that change something the origin, the
/// JSON content type and the caller's role. Two pages with the same path and different methods are
/// served together. With sign-in (or no token at all), the sign-in endpoints are served too.
pub fn protect_with(pages: Vec<Page>, access: Arc<Access>, names: Names) -> Router {
    let mut routes: Vec<(&'static str, MethodRouter)> = Vec::new();
    for page in pages {
        match routes.iter_mut().find(|(path, _)| *path == page.path) {
            Some((_, route)) => *route = std::mem::take(route).merge(page.route),
            None => routes.push((page.path, page.route)),
        }
    }
    let mut router = routes
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            router.route(path, route)
        });
    let sign_in_served = access.sign_in().is_some() || !access.required();
    if sign_in_served {
        router = router
            .route(
                SIGN_IN,
                axum::routing::get(sign_in_page)
                    .post(sign_in)
                    .with_state(access.clone())
                    .layer(axum::extract::DefaultBodyLimit::max(SIGN_IN_BODY)),
            )
            .route(
                SIGN_OUT,
                axum::routing::post(sign_out).with_state(access.clone()),
            );
    }
    let guard = Arc::new(Guard {
        access,
        names,
        sign_in_served,
    });
    // `layer`, not `route_layer`: a method or path no page serves is refused (401, 403) before it can
    // tell a caller without the token which methods exist (405) — and a wrong `Host` learns nothing.
    router.layer(middleware::from_fn_with_state(guard, check))
}

/// The names a listener answers to, and so the origins that are its own.
///
/// Why a list of names and not "any `Host`": a web page can make the browser resolve its own domain to
/// 127.0.0.1 (DNS rebinding) and then read this listener's answers as same-origin ones; the `Host` it
/// sends is still its own domain, which is not one of these.
#[derive(Clone, Debug)]
pub struct Names {
    /// Accepted `Host` values, lower case, as browsers send them (`127.0.0.1:7420`, `[::1]:7420`; a
    /// name without a port where the port is the scheme's default).
    hosts: Vec<String>,
    /// The port an IP-literal `Host` may carry when the listener is on an unspecified address.
    any_ip_port: Option<u16>,
    /// How a refusal names the listener (its first name).
    shown: String,
    /// Whether `publicUrl` is set (a refusal suggests setting it when it is not).
    public: bool,
}

impl Names {
    /// The names of a listener bound to `bound` (the address it actually listens on: its port is
    /// the one browsers send), plus the host of `public_url` (`channels.web.publicUrl`, the address
    /// people open when a reverse proxy stands in front: `https://opc.example.com`).
    ///
    /// # Errors
    /// When `public_url` is not an `http(s)://host[:port]` URL (the config's validation refuses
    /// those first; this is the message for a caller that skipped it).
    pub fn new(bound: SocketAddr, public_url: Option<&str>) -> Result<Names, String> {
        let port = bound.port();
        let mut hosts = Vec::new();
        let mut add = |host: &str, port: u16, default: u16| {
            let host = host.to_ascii_lowercase();
            let with_port = format!("{host}:{port}");
            if !hosts.contains(&with_port) {
                hosts.push(with_port);
            }
            // Browsers leave the port out of `Host` and `Origin` when it is the scheme's default.
            if port == default && !hosts.contains(&host) {
                hosts.push(host);
            }
        };
        for loopback in ["127.0.0.1", "localhost", "[::1]"] {
            add(loopback, port, 80);
        }
        let ip = bound.ip();
        if !ip.is_unspecified() {
            let host = match ip {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            };
            add(&host, port, 80);
        }
        let mut public = false;
        if let Some(url) = public_url {
            let (host, port, default) = public_origin(url)?;
            add(&host, port, default);
            public = true;
        }
        Ok(Names {
            shown: match ip {
                IpAddr::V4(v4) if !v4.is_unspecified() => format!("http://{v4}:{port}"),
                IpAddr::V6(v6) if !v6.is_unspecified() => format!("http://[{v6}]:{port}"),
                _ => format!("http://127.0.0.1:{port}"),
            },
            hosts,
            any_ip_port: ip.is_unspecified().then_some(port),
            public,
        })
    }

    /// Whether `host` (a `Host` header's value) names this listener.
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        if self.hosts.contains(&host) {
            return true;
        }
        // Listening on every address, the listener is also reached by any of the machine's IPs. An IP
        // literal cannot be rebound, so it is safe to accept; a DNS name still must be listed.
        match self.any_ip_port {
            Some(port) => match host.parse::<SocketAddr>() {
                Ok(addr) => addr.port() == port,
                Err(_) => port == 80 && host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok(),
            },
            None => false,
        }
    }

    /// Whether `origin` (an `Origin` header's value) is this listener's own, for a request that came
    /// with `host` (already checked by [`Names::host_allowed`]).
    pub fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        let Some(authority) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            // `null` (a sandboxed frame, a file) and anything else: not an origin of ours.
            return false;
        };
        if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
            return false;
        }
        // A listed name is ours whatever `Host` the request carries (a proxy may rewrite `Host` to the
        // loopback address it forwards to); an IP literal accepted by the unspecified-address rule is
        // ours only as the request's own `Host`, so another machine's page cannot pass as this one.
        self.hosts.iter().any(|h| h == authority) || authority == host.trim().to_ascii_lowercase()
    }
}

/// The host, port and the scheme's default port of `url` (`http(s)://host[:port]`, a trailing `/`
/// allowed).
fn public_origin(url: &str) -> Result<(String, u16, u16), String> {
    let bad = || {
        format!(
            "`{url}` is not a public URL: write the scheme, host and optional port people open, e.g. \
             https://opc.example.com"
        )
    };
    let uri: Uri = url.trim().parse().map_err(|_| bad())?;
    let default = match uri.scheme_str() {
        Some("https") => 443,
        Some("http") => 80,
        _ => return Err(bad()),
    };
    let authority = uri.authority().ok_or_else(bad)?;
    if authority.as_str().contains('@') || !matches!(uri.path(), "" | "/") || uri.query().is_some()
    {
        return Err(bad());
    }
    let host = authority.host();
    if host.is_empty() {
        return Err(bad());
    }
    Ok((
        host.to_string(),
        authority.port_u16().unwrap_or(default),
        default,
    ))
}

/// What [`check`] compares requests against.
struct Guard {
    /// The credentials.
    access: Arc<Access>,
    names: Names,
    /// Whether the sign-in endpoints are served (they then need no credentials).
    sign_in_served: bool,
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

/// Whether a `Content-Type` value is JSON: `application/json`, with at most a `charset` parameter.
fn is_json(content_type: &str) -> bool {
    let mut parts = content_type.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
        && parts.all(|param| {
            param
                .split_once('=')
                .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("charset"))
        })
}

/// Whether `method` cannot change anything (so the origin and content-type rules do not apply).
fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// At most 100 characters of a header's value, for a refusal (a header is not a secret, but it is the
/// caller's text: kept short).
fn shown(value: &str) -> String {
    value.chars().take(100).collect()
}

fn forbidden(reason: String) -> Response {
    tracing::debug!(%reason, "request refused");
    (
        StatusCode::FORBIDDEN,
        axum::Json(serde_json::json!({ "error": reason })),
    )
        .into_response()
}

/// Why `headers` of a `method` request may not reach a page, or `None` when they may (the token is
/// checked before, in [`check`]).
fn refusal(names: &Names, method: &Method, headers: &HeaderMap) -> Option<String> {
    let text = |name: header::HeaderName| {
        headers.get(name).map(|v| {
            v.to_str()
                .map(str::to_string)
                .unwrap_or_else(|_| "(not text)".into())
        })
    };
    // One value each: a second `Host`, `Origin` or `Content-Type` could make this check and the page
    // read different ones.
    for name in [
        header::HOST,
        header::ORIGIN,
        header::CONTENT_TYPE,
        HeaderName::from_static("sec-fetch-site"),
    ] {
        if headers.get_all(&name).iter().nth(1).is_some() {
            return Some(format!(
                "the request has more than one `{name}` header; send one"
            ));
        }
    }
    let public_hint = if names.public {
        "check `channels.web.publicUrl`: it must be the address people open"
    } else {
        "behind a reverse proxy, set `channels.web.publicUrl` to the address people open \
         (e.g. https://opc.example.com)"
    };
    let Some(host) = text(header::HOST) else {
        return Some(format!(
            "the request has no `Host` header; open this listener as {}/",
            names.shown
        ));
    };
    if !names.host_allowed(&host) {
        return Some(format!(
            "this listener does not answer to the host `{}`: open it as {}/ (or localhost), or {public_hint}",
            shown(&host),
            names.shown
        ));
    }
    if is_safe(method) {
        return None;
    }
    match (
        text(header::ORIGIN),
        text(HeaderName::from_static("sec-fetch-site")),
    ) {
        (Some(origin), _) if !names.origin_allowed(&origin, &host) => {
            return Some(format!(
                "refused a cross-site request: it comes from `{}`, not from this listener's own pages ({}/); \
                 use the web chat or the console served here, or {public_hint}",
                shown(&origin),
                names.shown
            ));
        }
        (None, Some(site)) if !matches!(site.as_str(), "same-origin" | "none") => {
            return Some(format!(
                "refused a cross-site request (`Sec-Fetch-Site: {}`): only this listener's own pages \
                 ({}/) may change anything; or {public_hint}",
                shown(&site),
                names.shown
            ));
        }
        _ => {}
    }
    match text(header::CONTENT_TYPE) {
        Some(content_type) if is_json(&content_type) => None,
        given => Some(format!(
            "a {method} here must send a JSON body with `Content-Type: application/json` ({}); \
             from a script: curl -H 'Content-Type: application/json' -d '{{}}' …",
            match given {
                Some(content_type) => format!("got `{}`", shown(&content_type)),
                None => "it had no Content-Type".to_string(),
            }
        )),
    }
}

/// The listener's check (see the module doc), in its order: credentials, `Host`, origin, content
/// type, role. The caller it let in is put in the request's extensions ([`Caller`]).
async fn check(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let signing_in = guard.sign_in_served && (path == SIGN_IN || path == SIGN_OUT);
    let caller = if signing_in {
        None
    } else {
        // The front door (`web::exposure`) may have identified the caller already.
        let known = request.extensions().get::<Caller>().copied();
        let found = match known {
            Some(caller) => Some(caller),
            None => match guard
                .access
                .identify(request.headers(), request.uri())
                .await
            {
                Ok(found) => found,
                Err(unavailable) => return sessions_unavailable(&unavailable.0),
            },
        };
        match found {
            Some(caller) => Some(caller),
            None if guard.access.sign_in().is_some() && wants_page(&request) => {
                return to_sign_in(request.uri());
            }
            None => return unauthorized(),
        }
    };
    if let Some(reason) = refusal(&guard.names, request.method(), request.headers()) {
        return forbidden(reason);
    }
    let Some(caller) = caller else {
        return next.run(request).await;
    };
    if caller.role == Role::Viewer && !is_safe(request.method()) {
        return read_only();
    }
    // A page opened with `?token=`: its cookie too, so that it survives a reload once the page has
    // taken the token out of its address.
    let keep = caller.via == Via::Query && wants_page(&request) && guard.access.sign_in().is_some();
    request.extensions_mut().insert(caller);
    let mut response = next.run(request).await;
    if keep && response.status().is_success() {
        let access = guard.access.clone();
        let started = tokio::task::spawn_blocking(move || {
            access.start(caller.role, crate::session::now_ms())
        })
        .await;
        match started {
            Ok(Ok((id, _))) => {
                response
                    .headers_mut()
                    .append(header::SET_COOKIE, guard.access.cookie(&id));
            }
            // The page is served all the same; its next reload needs the token again.
            Ok(Err(e)) => tracing::warn!(error = %e, "could not keep a session for a ?token= page"),
            Err(e) => tracing::warn!(error = %e, "could not keep a session for a ?token= page"),
        }
    }
    response
}

/// Whether `request` is a browser asking for a page: a `GET` (or `HEAD`) accepting `text/html`.
/// Scripts and the pages' own `fetch` calls ask for JSON or anything (`*/*`): they get a 401.
pub fn wants_page(request: &Request) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
        && request
            .headers()
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("text/html"))
}

/// `303` to the sign-in page, which comes back to `uri` (without a `token` parameter: it was wrong,
/// and a token is never put back into an address).
pub fn to_sign_in(uri: &Uri) -> Response {
    let query: Vec<(String, String)> = uri
        .query()
        .map(|query| {
            form_urlencoded::parse(query.as_bytes())
                .filter(|(key, _)| key != "token")
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let mut back = uri.path().to_string();
    if !query.is_empty() {
        back.push('?');
        back.push_str(
            &form_urlencoded::Serializer::new(String::new())
                .extend_pairs(query)
                .finish(),
        );
    }
    let location = format!(
        "{SIGN_IN}?{}",
        form_urlencoded::Serializer::new(String::new())
            .append_pair("next", &back)
            .finish()
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn unauthorized() -> Response {
    tracing::debug!("request without a valid access token");
    let mut response = (
        StatusCode::UNAUTHORIZED,
        axum::Json(serde_json::json!({ "error": UNAUTHORIZED })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// What a request without credentials is told (the front door says the same).
pub(crate) const UNAUTHORIZED: &str = "this page needs the access token: sign in at /signin, send the \
     header `Authorization: Bearer <token>`, or open the page as `/?token=<token>`";

/// A viewer's change, refused.
pub(crate) fn read_only() -> Response {
    forbidden(
        "refused: this console is read-only (viewer token): a viewer may look at everything but change \
         nothing; sign in with the access token (`channels.web.accessTokenEnv`) to do this"
            .to_string(),
    )
}

/// The session store could not be read: the credentials cannot be checked (503, never let in).
pub(crate) fn sessions_unavailable(why: &str) -> Response {
    tracing::warn!(error = %why, "session store unavailable");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({
            "error": format!("sessions cannot be checked right now ({why}); try again, or send the token as `Authorization: Bearer <token>`")
        })),
    )
        .into_response()
}

/// A JSON answer with `status`, never cached.
fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(body),
    )
        .into_response()
}

/// The `next` parameter of `uri`'s query, made local ([`crate::session::local_path`]).
fn next_of(uri: &Uri) -> String {
    let next = uri.query().and_then(|query| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "next")
            .map(|(_, value)| value.into_owned())
    });
    crate::session::local_path(next.as_deref())
}

/// `303` to `path` (already a local path).
fn see_other(path: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(path) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// `GET /signin`: the sign-in page; straight on to `next` when no token is needed or the browser is
/// signed in already.
async fn sign_in_page(State(access): State<Arc<Access>>, request: Request) -> Response {
    let next = next_of(request.uri());
    let Some(sign_in) = access.sign_in() else {
        return see_other(&next);
    };
    if let Ok(Some(_)) = access.identify(request.headers(), request.uri()).await {
        return see_other(&next);
    }
    let page = SIGN_IN_PAGE
        .replace("{{CSS}}", SIGN_IN_CSS)
        .replace(
            "{{NEXT}}",
            &html_escape::encode_double_quoted_attribute(&next),
        )
        .replace("{{TITLE}}", &html_escape::encode_text(&sign_in.title));
    html_page(&page)
}

/// What `POST /signin` reads.
#[derive(serde::Deserialize)]
struct SignInBody {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// `POST /signin`: the token exchanged for a session cookie (see the module doc).
async fn sign_in(State(access): State<Arc<Access>>, request: Request) -> Response {
    let Some(sign_in) = access.sign_in() else {
        return answer(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": "this listener has no access token (`channels.web.accessTokenEnv`): \
                there is nothing to sign in to; open /admin"}),
        );
    };
    if let Err(wait) = sign_in.limit.attempt(peer(&request)) {
        let seconds = wait.as_secs().max(1);
        let mut response = answer(
            StatusCode::TOO_MANY_REQUESTS,
            serde_json::json!({"error": format!(
                "too many sign-in attempts from this address: wait {seconds} s and try again"
            )}),
        );
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let body = match axum::body::to_bytes(request.into_body(), SIGN_IN_BODY).await {
        Ok(body) => body,
        Err(_) => {
            return answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                serde_json::json!({"error": format!(
                    "the sign-in body is over {} KiB: send {{\"token\": \"…\", \"next\": \"/admin\"}}",
                    SIGN_IN_BODY >> 10
                )}),
            );
        }
    };
    // serde's message is not repeated: it could quote the body, which holds a token.
    let form: SignInBody = match serde_json::from_slice(&body) {
        Ok(form) => form,
        Err(e) => {
            return answer(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": format!(
                    "the sign-in body must be JSON: {{\"token\": \"…\", \"next\": \"/admin\"}} (the token a \
                     string; `next` optional); what was sent is not, at line {} column {}",
                    e.line(),
                    e.column()
                )}),
            );
        }
    };
    let Some(role) = access.role_of(form.token.trim()) else {
        tracing::debug!("a sign-in with a wrong token");
        return answer(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": "wrong token: it is neither this OPC's access token \
                (`channels.web.accessTokenEnv`) nor its viewer token (`channels.web.viewerTokenEnv`); \
                check the value with whoever runs `opc run`"}),
        );
    };
    let started = {
        let access = access.clone();
        tokio::task::spawn_blocking(move || access.start(role, crate::session::now_ms())).await
    };
    let (id, caller) = match started {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => return sessions_unavailable(&e.to_string()),
        Err(e) => return sessions_unavailable(&e.to_string()),
    };
    let mut response = answer(
        StatusCode::OK,
        serde_json::json!({
            "role": caller.role,
            "expires_at": caller.expires_at,
            "next": crate::session::local_path(form.next.as_deref()),
        }),
    );
    response
        .headers_mut()
        .append(header::SET_COOKIE, access.cookie(&id));
    response
}

/// `POST /signout`: the browser's session deleted and its cookie cleared.
async fn sign_out(State(access): State<Arc<Access>>, headers: HeaderMap) -> Response {
    let ended = {
        let access = access.clone();
        tokio::task::spawn_blocking(move || access.end(&headers)).await
    };
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return sessions_unavailable(&e.to_string()),
        Err(e) => return sessions_unavailable(&e.to_string()),
    }
    let mut response = answer(
        StatusCode::OK,
        serde_json::json!({"signed_out": true, "next": SIGN_IN}),
    );
    response
        .headers_mut()
        .append(header::SET_COOKIE, access.cleared_cookie());
    response
}

/// The address sign-in attempts are counted against: the client a trusted proxy names (the last
/// `X-Forwarded-For` entry, the one the proxy added; the front door removes the header when it does
/// not trust it), else the peer. Behind a proxy without it, every client counts as the proxy.
fn peer(request: &Request) -> IpAddr {
    let forwarded = request
        .headers()
        .get_all(HeaderName::from_static("x-forwarded-for"))
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next_back()
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    forwarded
        .or_else(|| {
            request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(peer)| peer.ip())
        })
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn loopback() -> Names {
        Names::new("127.0.0.1:7420".parse().unwrap(), None).unwrap()
    }

    #[test]
    fn the_host_must_be_one_of_the_listeners_names() {
        let names = loopback();
        for host in [
            "127.0.0.1:7420",
            "localhost:7420",
            "LocalHost:7420",
            "[::1]:7420",
        ] {
            assert!(names.host_allowed(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:7420",
            "127.0.0.1",
            "127.0.0.1:7421",
            "localhost",
            "10.0.0.5:7420",
            "",
        ] {
            assert!(!names.host_allowed(host), "{host}");
        }
        // On port 80 the browser leaves the port out.
        let names = Names::new("127.0.0.1:80".parse().unwrap(), None).unwrap();
        assert!(names.host_allowed("localhost") && names.host_allowed("127.0.0.1:80"));

        // The configured address counts; on an unspecified one, any IP literal with the port, but no name.
        let names = Names::new("192.168.1.5:7420".parse().unwrap(), None).unwrap();
        assert!(names.host_allowed("192.168.1.5:7420") && !names.host_allowed("192.168.1.6:7420"));
        let names = Names::new("0.0.0.0:7420".parse().unwrap(), None).unwrap();
        assert!(names.host_allowed("192.168.1.6:7420") && names.host_allowed("[fe80::1]:7420"));
        assert!(
            !names.host_allowed("192.168.1.6:7421") && !names.host_allowed("evil.example:7420")
        );
        assert!(!names.host_allowed("0.0.0.0.evil.example:7420"));
    }

    #[test]
    fn the_public_url_adds_its_host_with_and_without_its_default_port() {
        let names = Names::new(
            "127.0.0.1:7420".parse().unwrap(),
            Some("https://OPC.example.com/"),
        )
        .unwrap();
        for host in ["opc.example.com", "opc.example.com:443", "127.0.0.1:7420"] {
            assert!(names.host_allowed(host), "{host}");
        }
        assert!(!names.host_allowed("opc.example.com:7420"));
        assert!(names.origin_allowed("https://opc.example.com", "127.0.0.1:7420"));
        let names = Names::new(
            "127.0.0.1:7420".parse().unwrap(),
            Some("http://opc.example.com:8080"),
        )
        .unwrap();
        assert!(
            names.host_allowed("opc.example.com:8080") && !names.host_allowed("opc.example.com")
        );
        for bad in [
            "opc.example.com",
            "ftp://x",
            "https://",
            "https://a@b",
            "https://x/path",
            "https://x/?q",
        ] {
            assert!(
                Names::new("127.0.0.1:7420".parse().unwrap(), Some(bad)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_origin_must_be_the_listeners_own() {
        let names = loopback();
        let host = "127.0.0.1:7420";
        for origin in [
            "http://127.0.0.1:7420",
            "http://localhost:7420",
            "http://[::1]:7420",
        ] {
            assert!(names.origin_allowed(origin, host), "{origin}");
        }
        for origin in [
            "https://attacker.example",
            "http://127.0.0.1:7421",
            "http://localhost",
            "null",
            "127.0.0.1:7420",
            "http://127.0.0.1:7420.attacker.example",
            "http://127.0.0.1:7420@attacker.example",
        ] {
            assert!(!names.origin_allowed(origin, host), "{origin}");
        }
        // On an unspecified address an IP literal is ours only as the request's own Host.
        let names = Names::new("0.0.0.0:7420".parse().unwrap(), None).unwrap();
        assert!(names.origin_allowed("http://10.0.0.5:7420", "10.0.0.5:7420"));
        assert!(!names.origin_allowed("http://10.0.0.6:7420", "10.0.0.5:7420"));
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_state_change_must_be_same_origin_and_json() {
        let names = loopback();
        let json = ("content-type", "application/json");
        let host = ("host", "127.0.0.1:7420");
        let allowed = |method: Method, pairs: &[(&'static str, &str)]| {
            refusal(&names, &method, &headers(pairs)).is_none()
        };
        // From the listener's own page.
        assert!(allowed(
            Method::POST,
            &[host, json, ("origin", "http://127.0.0.1:7420")]
        ));
        assert!(allowed(
            Method::POST,
            &[
                host,
                ("content-type", "Application/JSON; charset=UTF-8"),
                ("sec-fetch-site", "same-origin")
            ]
        ));
        // Not a browser (no Origin, no Sec-Fetch-Site): curl, a script.
        assert!(allowed(Method::POST, &[host, json]));
        // A browser on another site.
        assert!(!allowed(
            Method::POST,
            &[host, json, ("origin", "https://attacker.example")]
        ));
        assert!(!allowed(
            Method::POST,
            &[host, json, ("sec-fetch-site", "cross-site")]
        ));
        assert!(!allowed(
            Method::POST,
            &[host, json, ("sec-fetch-site", "same-site")]
        ));
        assert!(allowed(
            Method::POST,
            &[host, json, ("sec-fetch-site", "none")]
        ));
        // Any body but JSON, or none.
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json-seq",
            "application/json; foo=bar",
            "text/plain; application/json",
        ] {
            assert!(
                !allowed(Method::POST, &[host, ("content-type", content_type)]),
                "{content_type}"
            );
        }
        assert!(!allowed(Method::POST, &[host]));
        // Two values of a header the check reads: refused, whichever comes first.
        let mut twice = headers(&[host, json]);
        twice.append(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(refusal(&names, &Method::POST, &twice).is_some());
        assert!(!allowed(Method::DELETE, &[host]));
        // Reading: only the Host counts.
        assert!(allowed(
            Method::GET,
            &[host, ("origin", "https://attacker.example")]
        ));
        assert!(!allowed(Method::GET, &[("host", "attacker.example")]));
        assert!(!allowed(Method::GET, &[]));
        let reason = refusal(
            &names,
            &Method::GET,
            &headers(&[("host", "attacker.example")]),
        )
        .unwrap();
        assert!(
            reason.contains("attacker.example") && reason.contains("publicUrl"),
            "{reason}"
        );
    }
}
