//! The listener's router, built in one place: every page (the gateway's org chart and its JSON, the
//! console's, and each adapter's [`Adapter::pages`] — the web chat) behind the one access check of
//! [`opc_adapters::pages::protect_with`], with the sign-in page it serves; outside it only `/healthz`
//! and the platform webhooks ([`Adapter::routes`]), which verify their own signatures.
//!
//! `/healthz` answers `ok` (200) as long as the process serves. Asked for JSON (`Accept:
//! application/json`), it adds where the privacy gateway's NER model stands:
//! `{"status":"ok","privacy":"loading"}` (`off`, `pattern_only`, `loading`, `ready`, `failed`). The
//! state only: the probe is outside the access check, so the reason (file paths) is the admin
//! console's. A gateway whose model is loading or failed still answers 200: it serves, and the calls
//! that need the model fail closed with the reason in the thread.
//!
//! Invariant: the router is built from the list [`pages`] returns, and the test below walks that list,
//! so a page added anywhere is protected and tested without anyone remembering to.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use opc_adapters::pages::Names;
use opc_adapters::session::Access;
use opc_adapters::{Adapter, Page};
use opc_hierarchy::OrgTree;
use opc_privacy::detect::NerSlot;

use crate::admin::Admin;
use crate::live::LiveConfig;
use serde_json::{Value, json};

/// Every page of the listener: the gateway's own, the admin console's, then each adapter's.
pub fn pages(
    live: &Arc<LiveConfig>,
    admin: &Arc<Admin>,
    adapters: &[Arc<dyn Adapter>],
) -> Vec<Page> {
    let mut pages = vec![
        Page::new(Method::GET, "/org", super::org_page::org_page, live.clone()),
        Page::new(Method::GET, "/api/org", org_json, live.clone()),
    ];
    pages.extend(admin.pages());
    for adapter in adapters {
        pages.extend(adapter.pages());
    }
    pages
}

/// The listener's router: [`pages`] behind the listener's check — the credentials of `access` (when
/// a token is set), the `Host` against `names`, same-origin JSON for changes, and no change by a
/// viewer — with the sign-in page, plus `/healthz` and the adapters' self-verifying webhooks.
pub fn app(
    live: &Arc<LiveConfig>,
    admin: &Arc<Admin>,
    adapters: &[Arc<dyn Adapter>],
    access: Arc<Access>,
    names: Names,
    ner: NerSlot,
) -> Router {
    let health = {
        let live = live.clone();
        move |headers: HeaderMap| {
            let (live, ner) = (live.clone(), ner.clone());
            async move { healthz(&live, &ner, &headers) }
        }
    };
    let mut app = opc_adapters::pages::protect_with(pages(live, admin, adapters), access, names)
        .route("/healthz", get(health));
    for adapter in adapters {
        app = app.merge(adapter.routes());
    }
    app
}

/// `/healthz`: `ok`, or with `Accept: application/json`, `{"status":"ok","privacy":<state>}`.
fn healthz(live: &LiveConfig, ner: &NerSlot, headers: &HeaderMap) -> Response {
    let wants_json = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json"));
    if !wants_json {
        return "ok".into_response();
    }
    let readiness = opc_agents::llm::privacy::readiness(&live.get().config, ner);
    Json(json!({"status": "ok", "privacy": readiness.as_str()})).into_response()
}

/// The running org as JSON: each agent with its role, level, parent and children, root first, and
/// the config's generation (it changes with every applied reload).
async fn org_json(State(live): State<Arc<LiveConfig>>) -> Json<Value> {
    let loaded = live.get();
    let org = &loaded.org;
    let agents: Vec<Value> = breadth_first(org)
        .into_iter()
        .map(|id| {
            json!({
                "id": id,
                "role": org.role(id),
                "level": org.level(id),
                "parent": org.parent(id),
                "children": org.children(id),
            })
        })
        .collect();
    Json(
        json!({"name": loaded.config.framework.name, "root": org.root(), "generation": live.generation(), "agents": agents}),
    )
}

pub(super) fn breadth_first(org: &OrgTree) -> Vec<&str> {
    let mut order = vec![org.root()];
    order.extend(org.descendants(org.root()));
    order
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use opc_adapters::web::{WebChat, WebConfig};
    use opc_tests::org::{Execution, TestOrg, Wire};

    use super::*;

    const TOKEN: &str = "walk-the-routes";
    const VIEWER: &str = "walk-and-look";

    /// A request to `page`, its `{parameters}` filled in, with or without the token; a POST sends `{}`
    /// as JSON (what the listener's own pages send), plus `extra` headers.
    async fn call(base: &str, page: &Page, token: bool, extra: &[(&str, &str)]) -> u16 {
        call_as(base, page, token.then_some(TOKEN), extra).await.0
    }

    /// The same with `token` (any, or none): the status and the body.
    async fn call_as(
        base: &str,
        page: &Page,
        token: Option<&str>,
        extra: &[(&str, &str)],
    ) -> (u16, String) {
        let client = opc_tests::http_client();
        let path: String = page
            .path
            .split('/')
            .map(|part| if part.starts_with('{') { "1" } else { part })
            .collect::<Vec<_>>()
            .join("/");
        let mut request = client.request(page.method.clone(), format!("{base}{path}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if page.method != Method::GET {
            request = request.body("{}");
            if !extra.iter().any(|(name, _)| *name == "content-type") {
                request = request.header("content-type", "application/json");
            }
        }
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let response = tokio::time::timeout(Duration::from_secs(20), request.send())
            .await
            .unwrap_or_else(|_| panic!("{page:?} did not answer in time"))
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// A browser's `GET` of `path` (accepting HTML), raw, so that a redirect is read, not followed:
    /// the status.
    async fn raw_get(base: &str, path: &str) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = base.trim_start_matches("http://");
        let path = path.replace(['{', '}'], "");
        let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/html\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        tokio::time::timeout(
            Duration::from_secs(20),
            stream.read_to_string(&mut response),
        )
        .await
        .unwrap()
        .unwrap();
        response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status in {response:?}"))
    }

    #[tokio::test]
    async fn every_page_refuses_a_request_without_the_token() {
        let org = TestOrg::with_extras(
            "http://127.0.0.1:9",
            Wire::Anthropic,
            Execution::default(),
            &opc_tests::org::Extras {
                framework: "  privacy:\n    requireNer: true\n",
                ..Default::default()
            },
        );
        let loaded = Arc::new(opc_hierarchy::load(&org.config_path()).unwrap());
        let live = crate::live::LiveConfig::new(loaded.clone());
        let (inbox, _inbound) = tokio::sync::mpsc::channel(8);
        let web = WebChat::new(
            WebConfig {
                title: "walk".into(),
                database: opc_adapters::web::WebDatabase::Memory,
            },
            inbox,
        )
        .unwrap();
        let adapters: Vec<Arc<dyn Adapter>> = vec![web];
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let admin = Admin::new(org.config_path(), loaded.base_dir.clone(), "walk", None);
        let names = Names::new(listener.local_addr().unwrap(), None).unwrap();
        let ner = opc_privacy::detect::NerSlot::new();
        let sessions = crate::sessions::Sessions::open(&org.database()).unwrap();
        let access =
            Access::new(Some(TOKEN), Some(VIEWER)).with_sign_in(opc_adapters::session::SignIn {
                store: Arc::new(sessions),
                limit: Arc::new(crate::sessions::Attempts::new()),
                secure: false,
                title: "walk".into(),
            });
        let app = app(
            &live,
            &admin,
            &adapters,
            Arc::new(access),
            names,
            ner.clone(),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let pages = pages(&live, &admin, &adapters);
        assert!(
            pages.len() >= 7,
            "the gateway's and the web chat's pages: {pages:?}"
        );
        for page in &pages {
            assert_eq!(
                call(&base, page, false, &[]).await,
                401,
                "{page:?} without the token"
            );
            // With the token, still not from another name (DNS rebinding) …
            assert_eq!(
                call(&base, page, true, &[("host", "attacker.example")]).await,
                403,
                "{page:?} with a foreign Host"
            );
            // … nor a change from another site, nor one that is not JSON.
            if page.method != Method::GET {
                for extra in [
                    ("origin", "https://attacker.example"),
                    ("sec-fetch-site", "cross-site"),
                    ("content-type", "text/plain"),
                ] {
                    assert_eq!(
                        call(&base, page, true, &[extra]).await,
                        403,
                        "{page:?} with {extra:?}"
                    );
                }
            }
            let with = call(&base, page, true, &[]).await;
            assert!(
                with != 401 && with != 404 && with != 405 || page.path.contains('{') && with == 404,
                "{page:?} with the token answered {with}"
            );
            // The viewer token reads every page and changes nothing, whichever page it is.
            let (viewed, body) = call_as(&base, page, Some(VIEWER), &[]).await;
            if page.method == Method::GET {
                assert!(
                    viewed != 401 && viewed != 403 && viewed != 405,
                    "{page:?} for a viewer answered {viewed}"
                );
            } else {
                assert_eq!(viewed, 403, "{page:?} for a viewer: {body}");
                assert!(
                    body.contains("read-only (viewer token)"),
                    "{page:?}: {body}"
                );
            }
            // A browser without credentials asking for a page is sent to sign in; a script is not.
            if page.method == Method::GET {
                assert_eq!(
                    raw_get(&base, page.path).await,
                    303,
                    "{page:?} as a page without the token"
                );
            }
        }
        // The sign-in endpoints are served without the token, and only from the listener's own pages.
        let client = opc_tests::http_client();
        let signin = client
            .get(format!("{base}/signin?next=/admin"))
            .send()
            .await
            .unwrap();
        assert_eq!(signin.status(), 200);
        assert!(
            signin.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let attempt = |token: &str, origin: &str| {
            client
                .post(format!("{base}/signin"))
                .header("content-type", "application/json")
                .header("origin", origin)
                .body(json!({"token": token}).to_string())
                .send()
        };
        let foreign = attempt(TOKEN, "https://attacker.example").await.unwrap();
        assert_eq!(foreign.status(), 403, "a sign-in from another site");
        assert_eq!(attempt("wrong", &base).await.unwrap().status(), 401);
        let signed_in = attempt(VIEWER, &base).await.unwrap();
        assert_eq!(signed_in.status(), 200);
        let cookie = signed_in.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .to_string();
        let session = cookie.split(';').next().unwrap().to_string();
        let who: Value = client
            .get(format!("{base}/api/session"))
            .header("cookie", &session)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(who["role"], "viewer", "{who}");
        assert_eq!(who["via"], "session", "{who}");
        // A method a page does not serve tells nothing without the token either (401, not 405).
        let client = opc_tests::http_client();
        for (method, path) in [
            (Method::POST, "/org"),
            (Method::DELETE, "/api/conversations"),
        ] {
            let status = client
                .request(method.clone(), format!("{base}{path}"))
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, 401, "{method} {path} without the token");
        }
        // Outside the check: the health probe, plain for probes, and with the NER state in JSON.
        let health = opc_tests::http_client()
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        assert_eq!(health.text().await.unwrap(), "ok");
        let state = || async {
            let health = opc_tests::http_client()
                .get(format!("{base}/healthz"))
                .header("accept", "application/json")
                .send()
                .await
                .unwrap();
            assert_eq!(health.status(), 200);
            health.json::<Value>().await.unwrap()
        };
        assert_eq!(state().await, json!({"status": "ok", "privacy": "loading"}));
        ner.set_loader(std::sync::Arc::new(|| {
            Err("/home/someone/.cache: not fetched".into())
        }));
        ner.load_blocking();
        assert_eq!(
            state().await,
            json!({"status": "ok", "privacy": "failed"}),
            "the state, never the reason (paths) outside the access check"
        );
    }
}
