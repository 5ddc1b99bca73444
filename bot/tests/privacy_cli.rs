//! `opc privacy detect` and `opc privacy eval` as a user runs them: JSON lines in and out in order,
//! code-point offsets, a bad line named by its number, the config's settings applied.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use opc_tests::wait::{WAIT, WAIT_LONG, child_within, output_within};

fn opc(args: &[&str], dir: &Path, stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPC_CONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("opc runs");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_string();
    // Written on its own thread: a pipe's buffer is small, and `opc` may be blocked writing answers.
    std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    output_within(
        child,
        WAIT_LONG,
        &format!("`opc {}` to finish", args.join(" ")),
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn detect_answers_each_line_in_order_with_code_points() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = concat!(
        r#"{"text":"Grüße an zoë@example.com, card 4111 1111 1111 1111","id":7}"#,
        "\n",
        r#"{"text":"nothing to see"}"#,
        "\n",
        r#"{"text":"call me at (212) 555-0199"}"#,
        "\n",
    );
    let out = opc(&["privacy", "detect"], dir.path(), input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 3);
    let first = &lines[0]["entities"];
    assert_eq!(first[0]["type"], "EMAIL");
    assert_eq!(
        (first[0]["start"].as_u64(), first[0]["end"].as_u64()),
        (Some(9), Some(24))
    );
    assert_eq!(first[1]["type"], "CREDIT_CARD");
    assert!(first[1]["score"].as_f64().is_some_and(|s| s > 0.85));
    assert_eq!(lines[1]["entities"].as_array().map(Vec::len), Some(0));
    assert_eq!(lines[2]["entities"][0]["type"], "PHONE");

    // From a file too; a bad line stops with its number, after the lines before it were answered.
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, "{\"text\":\"ip 10.0.0.1\"}\n{\"txt\":1}\n").expect("write");
    let out = opc(
        &["privacy", "detect", file.to_str().expect("utf-8")],
        dir.path(),
        "",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout).lines().count(), 1);
    assert!(
        text(&out.stderr).contains("in.jsonl:2:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn detect_uses_the_config_types_and_whitelist() {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("org");
    let out = opc(&["init", target.to_str().expect("utf-8")], dir.path(), "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let config = target.join("opc.config.yaml");
    let yaml = std::fs::read_to_string(&config).expect("config");
    // The example's privacy section, narrowed to e-mail addresses with one whitelisted.
    let types = "detectTypes: [PERSON_NAME, EMAIL, PHONE, CREDIT_CARD, API_KEY, ADDRESS, LOCATION, SSN, IP_ADDRESS, IBAN, URL]";
    let whitelist = "whitelist: [\"Anthropic\", \"Claude\", \"OPC\"]";
    assert!(
        yaml.contains(types) && yaml.contains(whitelist),
        "the example changed"
    );
    let yaml = yaml
        .replace(types, "detectTypes: [EMAIL]")
        .replace(whitelist, "whitelist: [\"help@acme.example.com\"]");
    std::fs::write(&config, yaml).expect("write config");
    let input = r#"{"text":"help@acme.example.com and ann@example.com, card 4111 1111 1111 1111"}"#;
    let out = opc(&["privacy", "detect"], &target, input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).expect("json");
    let entities = v["entities"].as_array().expect("entities");
    assert_eq!(entities.len(), 1, "{v}");
    assert_eq!(entities[0]["type"], "EMAIL");
    assert_eq!(entities[0]["start"], 26);
}

#[test]
fn eval_prints_per_type_scores() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("cases.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"text":"mail ann@example.com now","entities":[{"type":"EMAIL","start":5,"end":20}]}"#,
            "\n",
            r#"{"text":"card 4012-8888-8888-1882","entities":[],"expected_count":0,"recognizer_types":["CREDIT_CARD"]}"#,
            "\n",
            r#"{"text":"export T=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","label":"positive","rule":"github"}"#,
            "\n",
        ),
    )
    .expect("write");
    let out = opc(
        &["privacy", "eval", file.to_str().expect("utf-8")],
        dir.path(),
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for want in [
        "token level",
        "span level",
        "EMAIL",
        "F2",
        "API_KEY",
        "false positives on negatives: 0 of 1",
    ] {
        assert!(stdout.contains(want), "{want:?} in {stdout}");
    }
}

#[test]
fn mask_prints_what_a_model_would_see_and_the_mapping() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = "Mail ann@example.com or call +44 20 7946 0958; again: ann@example.com\n";
    let out = opc(&["privacy", "mask", "--json"], dir.path(), input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).expect("json");
    let masked = v["masked"].as_str().expect("masked text");
    assert!(
        !masked.contains("ann@example.com") && !masked.contains("7946 0958"),
        "{masked}"
    );
    let mapping = v["mapping"].as_array().expect("mapping");
    assert_eq!(mapping.len(), 2, "each real value once: {v}");
    assert_eq!(mapping[0]["type"], "EMAIL");
    assert_eq!(mapping[0]["real"], "ann@example.com");
    let fake = mapping[0]["substitute"].as_str().expect("substitute");
    assert_eq!(
        masked.matches(fake).count(),
        2,
        "the same fake both times: {masked}"
    );
    assert_eq!(mapping[1]["type"], "PHONE");
    assert_eq!(v["counts"]["EMAIL"], 2);

    // The text form ends with the mapping; the same input masks the same way on every run.
    let plain = opc(&["privacy", "mask"], dir.path(), input);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let plain = text(&plain.stdout);
    assert!(plain.starts_with(masked), "{plain}");
    assert!(plain.contains("masked 3 (EMAIL 2, PHONE 1)"), "{plain}");
    assert!(
        plain.contains(&format!("ann@example.com → {fake}")),
        "{plain}"
    );
}

#[test]
fn mask_in_redact_mode_prints_placeholders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("org");
    let out = opc(&["init", target.to_str().expect("utf-8")], dir.path(), "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let config = target.join("opc.config.yaml");
    let yaml = std::fs::read_to_string(&config).expect("config");
    assert!(yaml.contains("    mode: mask\n"), "the example changed");
    std::fs::write(
        &config,
        yaml.replace("    mode: mask\n", "    mode: redact\n"),
    )
    .expect("write");
    let out = opc(&["privacy", "mask"], &target, "write to ann@example.com");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("write to [EMAIL_1]\n"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn mask_names_a_file_it_cannot_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["privacy", "mask", "missing.txt"], dir.path(), "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot read missing.txt"),
        "{}",
        text(&out.stderr)
    );
}

/// Plain text piped to `detect` (the first thing a newcomer tries) is refused with the line shape it
/// expects and the two ways on: `mask` for plain text, or wrapping each line.
#[test]
fn detect_of_plain_text_shows_the_expected_shape() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(
        &["privacy", "detect"],
        dir.path(),
        "call Ann on 0151 234 5678\n",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("stdin:1: not JSON"), "{stderr}");
    assert!(stderr.contains(r#"{"text": "#), "{stderr}");
    assert!(stderr.contains("opc privacy mask"), "{stderr}");
    assert!(
        !stderr.contains("0151"),
        "the input is not echoed: {stderr}"
    );
}

/// `eval --help` describes the files it scores by their shape, not by a path inside this repository.
#[test]
fn eval_help_names_the_line_shape_not_a_repository_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = opc(&["privacy", "eval", "--help"], dir.path(), "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    assert!(help.contains(r#""entities""#), "{help}");
    assert!(!help.contains("shared/data"), "{help}");
}

/// Lines are read ahead and detected in chunks (faster with the NER model), yet a program that writes
/// one line and waits for its answer gets it before sending the next: nothing is held back waiting for
/// input that has not come.
#[test]
fn detect_answers_a_line_before_the_next_is_sent() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::time::Duration;

    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(["privacy", "detect"])
        .current_dir(dir.path())
        .env_remove("OPC_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("opc runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.expect("utf-8 line")).is_err() {
                break;
            }
        }
    });
    for i in 0..3 {
        writeln!(stdin, r#"{{"text":"write to u{i}@example.com"}}"#).expect("write");
        stdin.flush().expect("flush");
        let answer = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("no answer to line {} before the next was sent", i + 1));
        let v: serde_json::Value = serde_json::from_str(&answer).expect("json line");
        assert_eq!(v["entities"][0]["type"], "EMAIL", "{answer}");
    }
    drop(stdin);
    let status = child_within(
        &mut child,
        WAIT,
        "`opc privacy detect` to exit at end of input",
    );
    assert!(status.success());
}

/// More lines than one chunk: every line answered once, in order.
#[test]
fn detect_answers_many_lines_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input: String = (0..700)
        .map(|i| {
            format!(
                "{{\"text\":\"{}mail u{i}@example.com\"}}\n",
                "x".repeat(i % 7)
            )
        })
        .collect();
    let out = opc(&["privacy", "detect"], dir.path(), &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 700);
    for (i, line) in lines.iter().enumerate() {
        let start = (i % 7 + 5) as u64;
        let end = start + format!("u{i}@example.com").len() as u64;
        let e = &line["entities"][0];
        assert_eq!(e["type"], "EMAIL", "line {}: {line}", i + 1);
        assert_eq!(
            (e["start"].as_u64(), e["end"].as_u64()),
            (Some(start), Some(end)),
            "line {}",
            i + 1
        );
    }
}
