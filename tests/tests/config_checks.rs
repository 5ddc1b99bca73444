//! The shipped example and `opc validate`'s privacy warning, on the real `opc` binary:
//!
//! - `opc validate` on a privacy-enabled config whose `detectTypes` leaves out `IBAN` warns and names
//!   it (with its position and a hint); the shipped example (`opc init`'s copy) has no such warning;
//! - an IBAN in a message to the shipped example org, its provider pointed at the scripted LLM, never
//!   reaches the model — and, as a control that the check can fail, it does with the example's old
//!   `detectTypes` (the list without `IBAN` and `URL` that leaked it in 7 of 7 requests).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use opc_tests::opc_process::opc_binary;
use opc_tests::org::marker;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{OutputWithin, WAIT, WAIT_LONG, output_of};

const IBAN: &str = "DE89 3704 0044 0532 0130 00";
const IBAN_COMPACT: &str = "DE89370400440532013000";
const OLD_TYPES: &str =
    "detectTypes: [PERSON_NAME, EMAIL, PHONE, CREDIT_CARD, API_KEY, ADDRESS, SSN, IP_ADDRESS]";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn example() -> String {
    std::fs::read_to_string(repo().join("opc.config.yaml")).unwrap()
}

/// The example's `detectTypes` line, whatever it lists.
fn example_types_line(text: &str) -> String {
    text.lines()
        .find(|l| l.trim_start().starts_with("detectTypes:"))
        .expect("the example lists detectTypes")
        .trim()
        .to_string()
}

/// The example org in a temporary directory (config and prompt files), with `edit` applied to its text.
fn example_dir(edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    for entry in std::fs::read_dir(repo().join("prompts")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(
            &path,
            dir.path().join("prompts").join(path.file_name().unwrap()),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("opc.config.yaml"), edit(example())).unwrap();
    dir
}

fn validate(config: &Path) -> Output {
    Command::new(opc_binary())
        .args(["validate", "--config"])
        .arg(config)
        .env("NO_COLOR", "1")
        .output_within(WAIT)
        .unwrap()
}

#[test]
fn validate_names_each_type_a_privacy_config_leaves_out() {
    let dir = example_dir(|text| {
        let line = example_types_line(&text);
        text.replace(&line, "detectTypes: [PERSON_NAME, EMAIL, PHONE, CREDIT_CARD, API_KEY, ADDRESS, LOCATION, SSN, IP_ADDRESS, URL]")
    });
    let out = validate(&dir.path().join("opc.config.yaml"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning, not an error: {stderr}"
    );
    assert!(
        stderr.contains(
            "warning: framework.privacy.detectTypes: `detectTypes` leaves out `IBAN`, which the detector supports"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("framework.privacy.detectTypes"), "{stderr}");
    assert!(
        stderr.contains("add IBAN to the list, or remove `detectTypes`"),
        "{stderr}"
    );
    assert!(!stderr.contains("`URL`"), "URL is listed: {stderr}");

    // The JSON form carries it with its position.
    let out = Command::new(opc_binary())
        .args(["validate", "--format", "json", "--config"])
        .arg(dir.path().join("opc.config.yaml"))
        .output_within(WAIT)
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warning = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["path"] == "framework.privacy.detectTypes")
        .unwrap_or_else(|| panic!("{report}"));
    assert!(warning["message"].as_str().unwrap().contains("`IBAN`"));
    assert!(warning["line"].as_u64().unwrap() > 1);
}

#[test]
fn the_shipped_example_validates_without_a_detect_types_warning() {
    let out = validate(&repo().join("opc.config.yaml"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("detectTypes"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(stdout.contains("valid"), "{stdout}");
    // Every type the detector supports is in the list the example ships.
    let line = example_types_line(&example());
    for kind in opc_privacy::EntityType::ALL {
        assert!(line.contains(kind.as_str()), "{kind} missing from {line}");
    }
}

/// `opc chat MESSAGE` on the example org in `dir`, its Anthropic provider at `llm`: what the scripted
/// server received.
async fn chat_with_example(
    edit: impl Fn(String) -> String + Send + 'static,
) -> Vec<opc_tests::scripted_llm::RecordedRequest> {
    let llm = ScriptedLlm::start(
        Script::new()
            .agent(
                marker("ceo"),
                vec![Step::text("Noted, the refund is on its way.")],
            )
            .fallback(vec![Step::text("Noted.")]),
    )
    .await
    .unwrap();
    let url = llm.url();
    let dir = example_dir(move |text| {
        let provider = "      kind: anthropic\n      apiKeyEnv: ANTHROPIC_API_KEY";
        assert!(text.contains(provider), "the example's provider changed");
        edit(text.replace(
            provider,
            &format!(
                "      kind: anthropic\n      baseUrl: {url}\n      apiKeyEnv: ANTHROPIC_API_KEY"
            ),
        ))
    });
    let config = dir.path().join("opc.config.yaml");
    let message = format!("Please refund the customer to IBAN {IBAN} today.");
    let mut command = Command::new(opc_binary());
    command
        .args(["chat", &message, "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .env("ANTHROPIC_API_KEY", "test-key-123")
        .env("OPC_MODELS_OFFLINE", "1")
        .env_remove("OPC_CONFIG");
    let out = output_of(command, WAIT_LONG).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("the refund is on its way"),
        "{stderr}"
    );
    let requests = llm.requests();
    assert!(
        !llm.requests_for(&marker("ceo")).is_empty(),
        "the CEO was asked: {requests:?}"
    );
    llm.shutdown().await;
    drop(dir);
    requests
}

fn leaked(requests: &[opc_tests::scripted_llm::RecordedRequest]) -> bool {
    requests.iter().any(|r| {
        let body = r.body.to_string();
        body.contains(IBAN) || body.contains(IBAN_COMPACT)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_iban_sent_to_the_example_org_never_reaches_the_model() {
    let requests = chat_with_example(|text| text).await;
    assert!(!leaked(&requests), "the IBAN reached the model");

    // The control: the example's old list lets it through, so the check above can fail.
    let requests = chat_with_example(|text| {
        let line = example_types_line(&text);
        text.replace(&line, OLD_TYPES)
    })
    .await;
    assert!(
        leaked(&requests),
        "with IBAN left out, the IBAN is sent as is"
    );
}
