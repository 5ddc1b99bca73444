//! The privacy gateway end to end, over real sockets: the scripted LLM server records every request
//! body, and no real value may appear in any of them.
//!
//! - a conversation full of personal data (email, phone, card, IBAN, street address, API key; names
//!   where the NER model is present), the CEO delegating to VP Operations: no real value in any
//!   recorded body (every agent, every turn, tool results included); the user sees every value
//!   restored in the web chat and in a Slack thread; streamed edits are always a prefix of the final
//!   text (so never show a fake, whole or in part); the CEO's substitute for a value is the same one
//!   in the child's request; `opc tasks --tree` shows what was masked;
//! - the egress guard stops a value injected into the system prompt, a message and a tool result
//!   (a layer between privacy and the wire client puts it back): nothing reaches the server, the call
//!   fails closed, the bus and the ledger say so;
//! - `enabled: false` sends the text untouched; `redact` sends typed placeholders and restores them;
//!   `route` sends a request carrying personal data, unmasked, to the trusted model only.
//!
//! The hard assertions use values the pattern tier finds. A person's name needs the NER tier: the last
//! test fills the engine's NER slot with a stand-in model that tags one name (the real model is not
//! needed to check what the layer does with a name it is given; its accuracy is the `ner` work's).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use opc_agents::context::NoMemory;
use opc_agents::engine::privacy_seam;
use opc_agents::llm::layers::{StackOptions, standard_stack};
use opc_agents::llm::provider::Providers;
use opc_agents::llm::stack::CallStack;
use opc_agents::llm::{
    Content, Layer, LlmError, LlmRequest, LlmResponse, LlmService, Role, SharedLlm,
};
use opc_agents::{Engine, Event, SqliteStore, Store, TaskState};
use opc_privacy::detect::{NerModel, NerSlot};
use opc_privacy::{Entity, EntityType};
use opc_tests::fake_slack::{FakeSlack, app_mention, envelope};
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::scripted_llm::{RecordedRequest, Script, ScriptedLlm, Step};
use opc_tests::wait::{OutputWithin, WAIT, WAIT_LONG, within};

const EMAIL: &str = "dana.whitfield@example.com";
const PHONE: &str = "+1 415 555 0132";
const CARD: &str = "4012 8888 8888 1881";
const IBAN: &str = "AL47 2121 1009 0000 0002 3569 8741";
const ADDRESS: &str = "742 Evergreen Terrace, Springfield, IL 62704";
const API_KEY: &str = "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";

/// The values the pattern tier finds, and forms of them that must not leak either.
const REALS: [&str; 8] = [
    EMAIL,
    PHONE,
    CARD,
    "4012888888881881",
    IBAN,
    "AL47212110090000000235698741",
    "742 Evergreen Terrace",
    API_KEY,
];

fn message(tag: &str) -> String {
    format!(
        "{tag}: refund {EMAIL}, phone {PHONE}, card {CARD}, IBAN {IBAN}, ship to {ADDRESS}, token {API_KEY}."
    )
}

/// The CEO hands the request to VP Operations and reports its answer; VP Operations echoes its task.
/// So the final answer quotes the user's message in full, after two models saw it masked.
fn script() -> Script {
    Script::new()
        .agent(marker("ceo"), relay("vp-ops", "Handle: {{input}}", "CEO: "))
        .agent(marker("vp-ops"), vec![Step::text("Done for {{input}}")])
}

fn expected(message: &str) -> String {
    format!("CEO: Done for Handle: {message}")
}

fn body_text(request: &RecordedRequest) -> String {
    request.body.to_string()
}

/// No real value in any request the server received.
fn assert_no_real_value_sent(requests: &[RecordedRequest]) {
    for request in requests {
        let body = body_text(request);
        for real in REALS {
            assert!(
                !body.contains(real),
                "{real:?} sent to the model ({:?}): {body}",
                request.agent_marker
            );
        }
    }
}

/// The word of `text` that holds an `@` (the email's substitute), without trailing punctuation.
fn email_in(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.contains('@'))
        .map(|w| w.trim_end_matches([',', '.']).to_string())
        .unwrap_or_else(|| panic!("no email in {text:?}"))
}

/// `text` while it streams ends with the typing marker; what it shows must begin the final text.
fn assert_prefix_of(shown: &str, final_text: &str) {
    let shown = shown.trim_end_matches(" …").trim_end_matches('…');
    assert!(
        final_text.starts_with(shown),
        "a streamed edit is not a prefix of the final text (a substitute showed):\n  shown: {shown:?}\n  final: {final_text:?}"
    );
}

/// A `privacy:` section with `body`; masking by patterns alone is accepted (`requireNer: false`):
/// these tests use values the pattern tier finds, and the NER gate has its own tests.
fn privacy_yaml(body: &str) -> String {
    format!("  privacy:\n    requireNer: false\n{body}")
}

const SLACK_BOT_VAR: &str = "OPC_TEST_SLACK_BOT";
const SLACK_APP_VAR: &str = "OPC_TEST_SLACK_APP";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_never_reaches_the_model_and_the_user_sees_it_restored_in_web_and_slack() {
    let slack = FakeSlack::start().await;
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: socket\n    botTokenEnv: {SLACK_BOT_VAR}\n    appTokenEnv: {SLACK_APP_VAR}\n    apiBaseUrl: {}\n",
        slack.api_url()
    );
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            sections: &sections,
            ..Extras::default()
        },
    );
    let opc = OpcRun::start(
        &org.config_path(),
        &[
            (KEY_VAR, KEY),
            (SLACK_BOT_VAR, &slack.bot_token()),
            (SLACK_APP_VAR, &slack.app_token()),
        ],
    );
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");

    // The web chat.
    let web_message = message("web");
    let (_, mut sse) = opc_tests::web_chat::start(&opc, &web_message).await;
    let web_final = expected(&web_message);
    sse.wait_for("message|edit", WAIT, |data| {
        data["text"].as_str() == Some(web_final.as_str())
    })
    .await;
    for event in &sse.seen {
        if (event.name == "message" || event.name == "edit")
            && let Some(text) = event.data["text"].as_str()
            && text.starts_with("CEO")
        {
            assert_prefix_of(text, &web_final);
        }
    }

    // A Slack thread.
    let slack_message = message("slack");
    let id = slack
        .push_envelope(envelope(
            "events_api",
            app_mention(
                "C1",
                "U1",
                &format!("<@W11> {slack_message}"),
                "1000.0001",
                None,
            ),
            0,
        ))
        .await;
    slack.wait_for_ack(&id, WAIT).await.expect("acked");
    let slack_final = expected(&slack_message);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let done = slack.calls().iter().any(|c| {
            (c.method == "chat.postMessage" || c.method == "chat.update")
                && c.params["text"].as_str() == Some(slack_final.as_str())
        });
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no final Slack message {slack_final:?}; calls: {:#?}",
            slack.calls()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for call in slack.calls() {
        if (call.method == "chat.postMessage" || call.method == "chat.update")
            && let Some(text) = call.params["text"].as_str()
            && text.starts_with("CEO")
        {
            assert_prefix_of(text, &slack_final);
        }
    }

    // Every agent, every turn, tool results included: no real value was sent.
    let requests = llm.requests();
    assert_no_real_value_sent(&requests);
    let ceo = llm.requests_for(&marker("ceo"));
    let vp = llm.requests_for(&marker("vp-ops"));
    assert_eq!(ceo.len(), 4, "two turns per conversation");
    assert_eq!(vp.len(), 2);
    // The CEO's second turn carried the child's result (masked) as a tool result.
    assert!(ceo.iter().any(|r| {
        r.user_texts()
            .iter()
            .any(|t| t.starts_with("Done for Handle:"))
    }));
    // The same substitute for the same value in the CEO's request and in its child's.
    for tag in ["web", "slack"] {
        let ceo_first = ceo
            .iter()
            .find(|r| r.session.starts_with(tag))
            .expect("the CEO's request");
        let fake = email_in(&ceo_first.session);
        assert_ne!(fake, EMAIL);
        let child = vp
            .iter()
            .find(|r| r.session.contains(&format!("Handle: {tag}")))
            .expect("the child's request");
        assert_eq!(email_in(&child.session), fake, "{tag}");
    }

    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));

    // The ledger: `opc tasks --tree` shows what was masked, by type.
    let database = org
        .loaded
        .base_dir
        .join(&org.loaded.config.framework.memory.path);
    let store = SqliteStore::open(&database).unwrap();
    let root = store.recent_roots(10).await.unwrap().last().unwrap().id;
    let out = std::process::Command::new(opc_binary())
        .args(["tasks", "--tree", &root.to_string(), "--config"])
        .arg(org.config_path())
        .env("NO_COLOR", "1")
        .output_within(WAIT_LONG)
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("masked "), "{tree}");
    assert!(tree.contains("EMAIL "), "{tree}");
    assert!(!tree.contains(EMAIL), "{tree}");
}

/// An engine in this process on `org`, its providers (at the scripted server, over loopback) each
/// with `inject` on top of its stack when given, and the privacy layer the config asks for.
async fn engine(org: &TestOrg, inject: Option<&'static str>) -> Engine {
    engine_with_ner(org, inject, NerSlot::default()).await
}

async fn engine_with_ner(org: &TestOrg, inject: Option<&'static str>, ner: NerSlot) -> Engine {
    let loaded = &org.loaded;
    let options = TestOrg::options(false);
    let providers = Providers::build(
        &loaded.config.framework.providers,
        |var| (var == KEY_VAR).then(|| KEY.to_string()),
        |id, p| {
            let stack = standard_stack(StackOptions {
                provider: id.to_string(),
                attempt_timeout: options.attempt_timeout,
                retry: options.retry,
                max_concurrent: None,
                requests_per_minute: None,
                prices: p.models.clone(),
                shared: None,
            });
            match inject {
                Some(part) => opc_agents::llm::Stack::new()
                    .layer(Inject(part))
                    .boxed_layer(Box::new(StackLayer(std::sync::Mutex::new(Some(stack))))),
                None => stack,
            }
        },
    );
    let seam = privacy_seam(&loaded.config, ner).unwrap();
    Engine::new(
        Arc::new(loaded.config.clone()),
        Arc::new(loaded.org.clone()),
        &loaded.base_dir,
        CallStack::with_privacy(providers, seam),
        Arc::new(SqliteStore::open(&org.database()).unwrap()),
        Arc::new(NoMemory),
        options,
    )
    .await
    .unwrap()
}

/// A whole stack used as one layer (so a test layer can sit above a provider's standard stack).
struct StackLayer(std::sync::Mutex<Option<opc_agents::llm::Stack>>);

impl Layer for StackLayer {
    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        let stack = self.0.lock().unwrap().take().unwrap_or_default();
        stack.service(inner)
    }
}

/// Puts a real value back into one part of the masked request: the bug the egress guard is for.
struct Inject(&'static str);

struct Injecting {
    part: &'static str,
    inner: SharedLlm,
}

impl Layer for Inject {
    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Injecting {
            part: self.0,
            inner,
        })
    }
}

type Reply<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<LlmResponse, LlmError>> + Send + 'a>>;

impl LlmService for Injecting {
    fn call<'a, 'b>(&'a self, mut request: LlmRequest) -> Reply<'b>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            match self.part {
                "system" => request.system.push_str(&format!("\nCustomer: {EMAIL}")),
                "message" => {
                    if let Some(first) = request.messages.first_mut() {
                        first.content.push(Content::text(format!("cc {EMAIL}")));
                    }
                }
                "tool_result" => {
                    let id = request
                        .messages
                        .iter()
                        .flat_map(|m| m.tool_uses().map(|(id, _, _)| id.to_string()))
                        .next();
                    if let (Some(id), Some(last)) = (id, request.messages.last_mut())
                        && last.role == Role::User
                    {
                        last.content = vec![Content::ToolResult {
                            tool_use_id: id,
                            content: format!("sent to {EMAIL}"),
                            is_error: false,
                        }];
                    } else {
                        return self.inner.call(request).await;
                    }
                }
                _ => {}
            }
            self.inner.call(request).await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_egress_guard_stops_a_leak_in_the_system_prompt_a_message_and_a_tool_result() {
    for part in ["system", "message", "tool_result"] {
        let llm = ScriptedLlm::start(script()).await.unwrap();
        let org = TestOrg::new(&llm.url(), Wire::OpenAi, Execution::default());
        let engine = engine(&org, Some(part)).await;
        let mut events = engine.events().subscribe();
        let run = engine.send(None, &message(part)).await.unwrap();
        let root = run.task;
        let outcome = within(WAIT, "the request to finish", run.wait()).await;
        assert_eq!(outcome.state, TaskState::Failed, "{part}: {}", outcome.text);
        assert!(
            outcome.text.contains("egress guard"),
            "{part}: {}",
            outcome.text
        );
        assert!(!outcome.text.contains(EMAIL));
        // Nothing carrying the value reached the server (the tool-result case sends the CEO's first
        // turn and VP Operations' call, masked, before the CEO's second turn is stopped).
        assert_no_real_value_sent(&llm.requests());
        if part != "tool_result" {
            assert!(llm.requests().is_empty(), "{part}: nothing was sent");
        }
        // The bus and the ledger say so, with the type only.
        let mut blocked = None;
        while let Ok(event) = events.try_recv() {
            if let Event::PrivacyBlocked { task, kind, .. } = event {
                blocked = Some((task, kind));
            }
        }
        let (task, kind) = blocked.expect("a PrivacyBlocked event");
        assert_eq!(kind, "EMAIL");
        let calls = engine.store().calls(task).await.unwrap();
        let last = calls.last().unwrap();
        assert_eq!(
            last.privacy.as_ref().and_then(|p| p.blocked.as_deref()),
            Some("EMAIL")
        );
        assert!(last.error.as_deref().unwrap().contains("egress guard"));
        assert!(!last.error.as_deref().unwrap().contains(EMAIL));
        let _ = root;
        engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privacy_disabled_sends_the_text_untouched() {
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let privacy = privacy_yaml("    enabled: false\n");
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            framework: &privacy,
            ..Extras::default()
        },
    );
    let engine = engine(&org, None).await;
    let text = message("off");
    let outcome = within(
        WAIT,
        "the request to finish",
        engine.send(None, &text).await.unwrap().wait(),
    )
    .await;
    assert_eq!(outcome.text, expected(&text));
    let ceo = llm.requests_for(&marker("ceo"));
    assert!(ceo[0].session.contains(EMAIL) && ceo[0].session.contains(CARD));
    assert!(body_text(&llm.requests_for(&marker("vp-ops"))[0]).contains(IBAN));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redact_sends_typed_placeholders_and_restores_them() {
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let privacy = privacy_yaml("    mode: redact\n");
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::OpenAi,
        Execution::default(),
        &Extras {
            framework: &privacy,
            ..Extras::default()
        },
    );
    let engine = engine(&org, None).await;
    let text = message("redact");
    let outcome = within(
        WAIT,
        "the request to finish",
        engine.send(None, &text).await.unwrap().wait(),
    )
    .await;
    assert_eq!(outcome.text, expected(&text));
    assert_no_real_value_sent(&llm.requests());
    let ceo = llm.requests_for(&marker("ceo"));
    assert!(ceo[0].session.contains("[EMAIL_1]"), "{}", ceo[0].session);
    let vp = llm.requests_for(&marker("vp-ops"));
    assert!(vp[0].session.contains("[EMAIL_1]"), "{}", vp[0].session);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_sends_personal_data_only_to_the_trusted_model() {
    let cloud =
        ScriptedLlm::start(Script::new().agent(marker("ceo"), vec![Step::text("cloud answer")]))
            .await
            .unwrap();
    let trusted = ScriptedLlm::start(
        Script::new().agent(marker("ceo"), vec![Step::text("trusted saw: {{input}}")]),
    )
    .await
    .unwrap();
    let providers = format!(
        "    trusted:\n      kind: openai-compatible\n      baseUrl: {}/v1\n      models:\n        local-model: {{ input: 0, output: 0 }}\n",
        trusted.url()
    );
    let privacy = privacy_yaml("    mode: route\n    routeModel: trusted/local-model\n");
    let org = TestOrg::with_extras(
        &cloud.url(),
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            providers: &providers,
            framework: &privacy,
            ..Extras::default()
        },
    );
    let engine = engine(&org, None).await;

    let text = message("route");
    let outcome = within(
        WAIT,
        "the request to finish",
        engine.send(None, &text).await.unwrap().wait(),
    )
    .await;
    assert_eq!(outcome.text, format!("trusted saw: {text}"));
    assert!(
        cloud.requests().is_empty(),
        "nothing went to the cloud model"
    );
    let routed = trusted.requests();
    assert_eq!(routed.len(), 1);
    assert!(
        routed[0].session.contains(EMAIL),
        "sent unmasked to the trusted model"
    );
    assert_eq!(routed[0].body["model"], "local-model");
    let calls = engine.store().calls(outcome.task).await.unwrap();
    assert_eq!(calls[0].model, "trusted/local-model");
    assert_eq!(
        calls[0].privacy.as_ref().unwrap().routed_to.as_deref(),
        Some("trusted/local-model")
    );

    let outcome = within(
        WAIT,
        "the request to finish",
        engine
            .send(None, "What is our refund policy?")
            .await
            .unwrap()
            .wait(),
    )
    .await;
    assert_eq!(outcome.text, "cloud answer");
    assert_eq!(
        cloud.requests().len(),
        1,
        "a request without personal data goes to its model"
    );
    assert_eq!(trusted.requests().len(), 1);
    engine.shutdown().await;
}

/// A stand-in for the NER model: tags every occurrence of one full name as a `PERSON_NAME`.
struct OneName(&'static str);

impl NerModel for OneName {
    fn entities(&self, text: &str) -> Vec<Entity> {
        text.match_indices(self.0)
            .map(|(start, name)| Entity {
                kind: EntityType::PersonName,
                start,
                end: start + name.len(),
                score: 0.99,
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_from_the_ner_tier_gets_the_same_substitute_in_the_ceo_and_the_child() {
    const NAME: &str = "Dana Whitfield";
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = TestOrg::new(&llm.url(), Wire::Anthropic, Execution::default());
    let ner = NerSlot::default();
    assert!(ner.set(Arc::new(OneName(NAME))));
    let engine = engine_with_ner(&org, None, ner).await;
    let text = format!("Call {NAME} about the refund, then email {EMAIL}.");
    let outcome = within(
        WAIT,
        "the request to finish",
        engine.send(None, &text).await.unwrap().wait(),
    )
    .await;
    assert_eq!(outcome.text, expected(&text));
    for request in llm.requests() {
        let body = body_text(&request);
        assert!(!body.contains(NAME) && !body.contains(EMAIL), "{body}");
    }
    // The substitute is what stands between "Call " and " about" in the CEO's message.
    let ceo = &llm.requests_for(&marker("ceo"))[0].session;
    let fake = ceo
        .strip_prefix("Call ")
        .and_then(|rest| rest.split(" about").next())
        .unwrap()
        .to_string();
    assert_ne!(fake, NAME);
    assert!(fake.contains(' '), "a name for a name: {fake:?}");
    let vp = &llm.requests_for(&marker("vp-ops"))[0].session;
    assert!(vp.contains(&format!("Call {fake} about")), "{vp}");
    let calls = engine.store().calls(outcome.task).await.unwrap();
    let counts = &calls[0].privacy.as_ref().unwrap().counts;
    assert_eq!(counts.get(EntityType::PersonName), 1, "{counts}");
    engine.shutdown().await;
}
