//! Who is asking: the listener's credentials (the access token, the viewer token, and sessions signed
//! in with either), and what a request carries of them.
//!
//! A request is let in as a [`Caller`]: its [`Role`] (an admin may do everything; a viewer may read
//! everything and change nothing) and how it proved it ([`Via`]): `Authorization: Bearer …` (scripts,
//! the API), `?token=…` (scripts, old bookmarks), a session cookie (browsers, after the sign-in page),
//! or nothing at all when no token is configured (`open`: the listener is then on loopback only, the
//! config's rule).
//!
//! Why server-side sessions and not the token in a cookie: a session can be signed out and expires on
//! its own, and the token, typed once, is never stored in the browser. The cookie holds a random id;
//! the database ([`SessionStore`], implemented by `bot` for SQLite and PostgreSQL) holds only its
//! SHA-256 digest, so a copy of the database opens no session. Each session also keeps a check value
//! bound to the token it was signed in with (a digest of the session id and the token's digest): when
//! the operator changes a token (the variable, at a restart), every session made with the old one is
//! refused, without keeping anything in the database a weak token could be guessed from offline.
//!
//! Invariants:
//! - tokens are compared as SHA-256 digests, in constant time, and never logged or echoed;
//! - a session is valid only before its expiry, only while its role's token is still the one it was
//!   made with; a session that fails either is deleted when it is seen;
//! - a viewer's role is fixed at sign-in: a viewer session is never an admin's;
//! - nothing here reads a request's body.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, Uri, header};
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "opc_session";

/// How long a session lasts after sign-in (it does not slide: after a week the token is typed
/// again). Long enough that a team member signs in about once a week, short enough that a cookie
/// left on a shared machine stops working on its own.
pub const LIFETIME: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// What a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Signed in with the access token (`channels.web.accessTokenEnv`), or no token configured.
    Admin,
    /// Signed in with the viewer token (`channels.web.viewerTokenEnv`): reads, changes nothing.
    Viewer,
}

impl Role {
    /// `admin` or `viewer`, as stored and as `/api/session` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Viewer => "viewer",
        }
    }

    /// The role named `name` (as [`Role::as_str`] writes it).
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "admin" => Some(Role::Admin),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }
}

/// How a caller proved its role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// A session cookie, from the sign-in page.
    Session,
    /// `Authorization: Bearer …`.
    Bearer,
    /// `?token=…` in the address.
    Query,
    /// No token is configured: the listener is open (on loopback only).
    Open,
}

/// Who a request is from, as the listener's check let it in. The check puts it in the request's
/// extensions, so a page can read it (`/api/session`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// What it may do.
    pub role: Role,
    /// How it proved it.
    pub via: Via,
    /// When its session expires (ms since the epoch); `None` unless `via` is a session.
    pub expires_at: Option<i64>,
}

/// One session as the store keeps it (under the digest of its id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Fixed at sign-in.
    pub role: Role,
    /// SHA-256 of the session id and the digest of the token it was signed in with (see the module
    /// doc): 32 bytes.
    pub token_check: Vec<u8>,
    /// When it was signed in, ms since the epoch.
    pub created_at: i64,
    /// When it stops being valid, ms since the epoch.
    pub expires_at: i64,
}

/// A store's failure, said as the store says it (it names the database, never a secret).
pub type StoreError = Box<dyn std::error::Error + Send + Sync>;

/// Where sessions are kept: the org's database, so they survive a restart of `opc run` and are
/// shared by a cluster's nodes. Keys are SHA-256 digests of session ids (32 bytes). Calls block (the
/// listener runs them on tokio's blocking threads). Each call is one statement.
pub trait SessionStore: Send + Sync + 'static {
    /// Keep `session` under `id_digest`.
    fn insert(&self, id_digest: &[u8], session: &Session) -> Result<(), StoreError>;
    /// The session kept under `id_digest`, expired or not.
    fn find(&self, id_digest: &[u8]) -> Result<Option<Session>, StoreError>;
    /// Forget the session under `id_digest` (nothing when there is none).
    fn remove(&self, id_digest: &[u8]) -> Result<(), StoreError>;
    /// Forget every session that expired at or before `now_ms`; how many.
    fn purge(&self, now_ms: i64) -> Result<u64, StoreError>;
}

/// How many sign-in attempts a peer may make (implemented by `bot` with governor's keyed limiter), so
/// the sign-in page is no fast oracle for guessing the token (a bearer header is checked without a
/// limit: there a long random token is the defence, as `docs/deploy.md` says).
pub trait AttemptLimit: Send + Sync + 'static {
    /// Count one attempt from `peer`: `Err(wait)` when it is over its allowance, with how long until
    /// it may try again.
    fn attempt(&self, peer: IpAddr) -> Result<(), Duration>;
}

/// What signing in needs beside the tokens.
pub struct SignIn {
    /// Where sessions are kept.
    pub store: Arc<dyn SessionStore>,
    /// The sign-in attempts' limit per peer.
    pub limit: Arc<dyn AttemptLimit>,
    /// Whether the cookie is `Secure`: `channels.web.publicUrl` is `https://…` (the browser then
    /// sends it over HTTPS only).
    pub secure: bool,
    /// The org's name, shown on the sign-in page.
    pub title: String,
}

/// The listener's credentials (see the module doc).
pub struct Access {
    /// SHA-256 of the access token; `None`: the listener is open.
    admin: Option<[u8; 32]>,
    /// SHA-256 of the viewer token (only beside an access token).
    viewer: Option<[u8; 32]>,
    /// Sessions, when the listener offers a sign-in page.
    sign_in: Option<SignIn>,
}

/// Without the digests: a digest of a weak token can be guessed offline.
impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("admin", &self.admin.is_some())
            .field("viewer", &self.viewer.is_some())
            .field("sign_in", &self.sign_in.is_some())
            .finish()
    }
}

/// Why a request's credentials could not be checked (the session store failed).
#[derive(Debug)]
pub struct Unavailable(pub String);

impl Access {
    /// No token: every request is an admin's (the listener is on loopback only).
    pub fn open() -> Access {
        Access {
            admin: None,
            viewer: None,
            sign_in: None,
        }
    }

    /// The access token `admin` and the viewer token `viewer`, when configured. A viewer token
    /// without an access token is ignored (the config refuses it): a listener without a token is open.
    pub fn new(admin: Option<&str>, viewer: Option<&str>) -> Access {
        let admin = admin.map(digest);
        Access {
            viewer: admin.and(viewer.map(digest)),
            admin,
            sign_in: None,
        }
    }

    /// The same, with a sign-in page and sessions (only meaningful with an access token).
    pub fn with_sign_in(mut self, sign_in: SignIn) -> Access {
        if self.admin.is_some() {
            self.sign_in = Some(sign_in);
        }
        self
    }

    /// Whether a request needs credentials (an access token is configured).
    pub fn required(&self) -> bool {
        self.admin.is_some()
    }

    /// The sign-in settings, when the listener offers a sign-in page.
    pub fn sign_in(&self) -> Option<&SignIn> {
        self.sign_in.as_ref()
    }

    /// The role `token` gives: the access token's or the viewer token's. Both digests are compared
    /// whatever the first said, so the time taken says nothing about which one matched.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        let given = digest(token);
        let admin = self
            .admin
            .as_ref()
            .is_some_and(|expected| bool::from(given.ct_eq(expected)));
        let viewer = self
            .viewer
            .as_ref()
            .is_some_and(|expected| bool::from(given.ct_eq(expected)));
        match (admin, viewer) {
            (true, _) => Some(Role::Admin),
            (false, true) => Some(Role::Viewer),
            (false, false) => None,
        }
    }

    /// Who sends `headers` for `uri`, without looking at sessions: the open listener's admin, a
    /// bearer token, or a `?token=`. `None` when none of them.
    pub fn by_token(&self, headers: &HeaderMap, uri: &Uri) -> Option<Caller> {
        if self.admin.is_none() {
            return Some(Caller {
                role: Role::Admin,
                via: Via::Open,
                expires_at: None,
            });
        }
        let caller = |role, via| Caller {
            role,
            via,
            expires_at: None,
        };
        let from_header = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .filter_map(bearer)
            .find_map(|given| self.role_of(given));
        if let Some(role) = from_header {
            return Some(caller(role, Via::Bearer));
        }
        uri.query().and_then(|query| {
            form_urlencoded::parse(query.as_bytes())
                .filter(|(key, _)| key == "token")
                .find_map(|(_, value)| self.role_of(&value))
                .map(|role| caller(role, Via::Query))
        })
    }

    /// Who sends `headers` for `uri`: [`Access::by_token`], else a valid session cookie (looked up
    /// on a blocking thread). `Ok(None)`: no valid credentials.
    ///
    /// # Errors
    /// When the session store cannot be read.
    pub async fn identify(
        self: &Arc<Self>,
        headers: &HeaderMap,
        uri: &Uri,
    ) -> Result<Option<Caller>, Unavailable> {
        if let Some(caller) = self.by_token(headers, uri) {
            return Ok(Some(caller));
        }
        let ids = session_ids(headers);
        if self.sign_in.is_none() || ids.is_empty() {
            return Ok(None);
        }
        let access = self.clone();
        let now = now_ms();
        tokio::task::spawn_blocking(move || {
            for id in ids {
                if let Some(caller) = access.session(&id, now)? {
                    return Ok(Some(caller));
                }
            }
            Ok(None)
        })
        .await
        .map_err(|e| Unavailable(format!("the session lookup stopped: {e}")))?
        .map_err(|e: StoreError| Unavailable(e.to_string()))
    }

    /// The session whose id is `id` as a caller at `now_ms`, when it is valid; an expired session,
    /// or one whose token is no longer configured, is deleted and refused. Blocks on the store.
    ///
    /// # Errors
    /// When the store fails.
    pub fn session(&self, id: &str, now_ms: i64) -> Result<Option<Caller>, StoreError> {
        let Some(sign_in) = &self.sign_in else {
            return Ok(None);
        };
        // Not an id this listener made: nothing to look up.
        let Some(raw) = decode_id(id) else {
            return Ok(None);
        };
        let key = Sha256::digest(raw).to_vec();
        let Some(session) = sign_in.store.find(&key)? else {
            return Ok(None);
        };
        let token = match session.role {
            Role::Admin => self.admin,
            Role::Viewer => self.viewer,
        };
        let valid = session.expires_at > now_ms
            && token.is_some_and(|token| {
                bool::from(token_check(&raw, &token).ct_eq(session.token_check.as_slice()))
            });
        if !valid {
            sign_in.store.remove(&key)?;
            return Ok(None);
        }
        Ok(Some(Caller {
            role: session.role,
            via: Via::Session,
            expires_at: Some(session.expires_at),
        }))
    }

    /// Start a session for `role` at `now_ms` (purging expired ones first): its id (for the cookie)
    /// and its caller. Blocks on the store.
    ///
    /// # Errors
    /// When the store fails, or when no session can be made (no sign-in, no token for `role`, no
    /// system randomness).
    pub fn start(&self, role: Role, now_ms: i64) -> Result<(String, Caller), StoreError> {
        let sign_in = self
            .sign_in
            .as_ref()
            .ok_or("this listener offers no sign-in")?;
        let token = match role {
            Role::Admin => self.admin,
            Role::Viewer => self.viewer,
        }
        .ok_or("no token is configured for that role")?;
        let mut raw = [0u8; 32];
        rustls::crypto::ring::default_provider()
            .secure_random
            .fill(&mut raw)
            .map_err(|_| "the system's random number generator failed")?;
        let expires_at = now_ms.saturating_add(i64::try_from(LIFETIME.as_millis()).unwrap_or(0));
        // Expired sessions go when new ones come: the table holds live sessions and a week's worth.
        sign_in.store.purge(now_ms)?;
        sign_in.store.insert(
            Sha256::digest(raw).as_slice(),
            &Session {
                role,
                token_check: token_check(&raw, &token).to_vec(),
                created_at: now_ms,
                expires_at,
            },
        )?;
        Ok((
            hex::encode(raw),
            Caller {
                role,
                via: Via::Session,
                expires_at: Some(expires_at),
            },
        ))
    }

    /// Forget the sessions whose ids `headers` carry (sign-out). Blocks on the store.
    ///
    /// # Errors
    /// When the store fails.
    pub fn end(&self, headers: &HeaderMap) -> Result<(), StoreError> {
        let Some(sign_in) = &self.sign_in else {
            return Ok(());
        };
        for id in session_ids(headers) {
            if let Some(raw) = decode_id(&id) {
                sign_in.store.remove(Sha256::digest(raw).as_slice())?;
            }
        }
        Ok(())
    }

    /// The `Set-Cookie` value that keeps session `id` in the browser for [`LIFETIME`].
    pub fn cookie(&self, id: &str) -> HeaderValue {
        self.cookie_value(id, LIFETIME.as_secs())
    }

    /// The `Set-Cookie` value that removes the session cookie.
    pub fn cleared_cookie(&self) -> HeaderValue {
        self.cookie_value("", 0)
    }

    fn cookie_value(&self, id: &str, max_age: u64) -> HeaderValue {
        let secure = if self.sign_in.as_ref().is_some_and(|s| s.secure) {
            "; Secure"
        } else {
            ""
        };
        // The id is hex (or empty): always a valid header value.
        HeaderValue::from_str(&format!(
            "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
        ))
        .unwrap_or_else(|_| HeaderValue::from_static("opc_session=; Path=/; Max-Age=0"))
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `next` when it is a path on this listener (`/admin#config`), else `/admin`: a sign-in never sends
/// the browser to another site (an open redirect). Browsers read `\` as `/`, so `/\evil` is refused
/// like `//evil`.
pub fn local_path(next: Option<&str>) -> String {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.starts_with("/\\")
                && !path.chars().any(char::is_control) =>
        {
            path.to_string()
        }
        _ => "/admin".to_string(),
    }
}

/// The SHA-256 digest of a token.
fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The token of an `Authorization` header's value when its scheme is `Bearer` (in any case: schemes
/// are case-insensitive, RFC 7235).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// A session's check value: bound to its id and to the token it was made with (see the module doc).
fn token_check(id: &[u8], token_digest: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"opc-session-token\0");
    hasher.update(id);
    hasher.update(token_digest);
    hasher.finalize().into()
}

/// A session id as this listener writes it (64 hex digits) back to its 32 bytes.
fn decode_id(id: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(id).ok()?;
    bytes.try_into().ok()
}

/// The values of the session cookie in `headers` (a browser may send several `Cookie` headers, and a
/// name twice when cookies of several paths match), at most [`MAX_SESSION_IDS`]: each costs a database
/// lookup, and a request without credentials must not buy hundreds of them.
fn session_ids(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, value)| *name == COOKIE && !value.is_empty())
        .map(|(_, value)| value.trim_matches('"').to_string())
        .take(MAX_SESSION_IDS)
        .collect()
}

/// The most session cookie values one request is looked up by (a browser sends one; two when an old
/// cookie of another path lingers).
const MAX_SESSION_IDS: usize = 2;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for header in ["Bearer tok", "bearer tok", "BEARER  tok ", "bEaReR tok"] {
            assert_eq!(bearer(header), Some("tok"), "{header}");
        }
        for header in ["Basic tok", "Bearertok", "Bearer ", "tok", ""] {
            assert_eq!(bearer(header), None, "{header}");
        }
    }

    #[test]
    fn each_token_gives_its_role_and_an_open_listener_is_an_admins() {
        let access = Access::new(Some("admin-t"), Some("viewer-t"));
        assert_eq!(access.role_of("admin-t"), Some(Role::Admin));
        assert_eq!(access.role_of("viewer-t"), Some(Role::Viewer));
        assert_eq!(access.role_of("viewer-T"), None);
        assert_eq!(access.role_of("admin-t2"), None);
        assert_eq!(access.role_of(""), None);
        // A viewer token alone opens nothing: without an access token the listener is open.
        let open = Access::new(None, Some("viewer-t"));
        assert!(!open.required());
        let caller = open
            .by_token(&HeaderMap::new(), &Uri::from_static("/admin"))
            .unwrap();
        assert_eq!((caller.role, caller.via), (Role::Admin, Via::Open));
        assert_eq!(open.role_of("viewer-t"), None);
    }

    #[test]
    fn a_bearer_or_a_query_token_names_its_caller() {
        let access = Access::new(Some("admin-t"), Some("viewer-t"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer viewer-t"),
        );
        let caller = access
            .by_token(&headers, &Uri::from_static("/admin"))
            .unwrap();
        assert_eq!((caller.role, caller.via), (Role::Viewer, Via::Bearer));
        let caller = access
            .by_token(
                &HeaderMap::new(),
                &Uri::from_static("/admin?x=1&token=admin-t"),
            )
            .unwrap();
        assert_eq!((caller.role, caller.via), (Role::Admin, Via::Query));
        assert!(
            access
                .by_token(&HeaderMap::new(), &Uri::from_static("/admin?token=nope"))
                .is_none()
        );
    }

    #[test]
    fn next_is_followed_only_to_a_local_path() {
        for (next, expected) in [
            (Some("/admin#config"), "/admin#config"),
            (Some("/org?x=1"), "/org?x=1"),
            (Some("/"), "/"),
            (Some("//evil.example/admin"), "/admin"),
            (Some("/\\evil.example"), "/admin"),
            (Some("https://evil.example"), "/admin"),
            (Some("admin"), "/admin"),
            (Some("/a\nb"), "/admin"),
            (Some(""), "/admin"),
            (None, "/admin"),
        ] {
            assert_eq!(local_path(next), expected, "{next:?}");
        }
    }

    #[test]
    fn session_ids_are_read_from_every_cookie_header() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; opc_session=abc; b=2"),
        );
        headers.append(header::COOKIE, HeaderValue::from_static("opc_session=def"));
        headers.append(header::COOKIE, HeaderValue::from_static("opc_session="));
        assert_eq!(session_ids(&headers), vec!["abc", "def"]);
        assert!(decode_id("abc").is_none());
        assert!(decode_id(&"ab".repeat(32)).is_some());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_only_over_https() {
        let access = Access::new(Some("t"), None);
        // Without sign-in (no store): never Secure.
        let cookie = access.cookie("ab");
        let cookie = cookie.to_str().unwrap();
        assert!(
            cookie.starts_with("opc_session=ab; Path=/; HttpOnly; SameSite=Strict; Max-Age=604800")
        );
        assert!(!cookie.contains("Secure"));
        assert!(
            access
                .cleared_cookie()
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }
}
