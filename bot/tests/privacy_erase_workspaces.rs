//! `opc privacy erase` and the agents' workspaces, on the real binary: files the Write tool or Bash
//! left in a workspace (made here directly in the workspace directories) are searched too.
//!
//! - Without `--workspaces` they are listed (paths relative to the workspace root, counts) and left
//!   byte for byte as they were; the hint names the flag; the value is never printed.
//! - `--workspaces --dry-run` says what would change and changes nothing.
//! - `--workspaces` replaces every occurrence (any case, JSON-escaped) with `[erased]`, keeping each
//!   file's mode (and owner, when the test can set one); a symlink to a file outside the workspace
//!   is neither followed nor changed; a binary file and a file with two hard links are listed, not
//!   edited, and the command exits 1 because copies are left; a FIFO does not block it; a path whose
//!   name holds the value is shown masked. Two agents sharing a workspace walk it once. The audit
//!   line counts the files and never holds the value or a path.
//! - Once nothing is left, `--workspaces` exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use opc_tests::wait::{WAIT_LONG, output_within};

const VALUE: &str = "alice.smith@mailhost.test";

const ORG: &str = "framework:
  defaultModel: claude-sonnet-4-5
  providers:
    anthropic: { kind: anthropic, models: { claude-sonnet-4-5: { input: 3, output: 15 } } }
agents:
  ceo:
    role: CEO
    tools: [delegate]
    children: [vp, ops]
  vp:
    role: VP
    parent: ceo
    workspace: ceo
  ops:
    role: Ops
    parent: ceo
";

fn opc(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(args)
        .current_dir(dir)
        .env_remove("OPC_CONFIG")
        .env("NO_COLOR", "1")
        .env("OPC_MODELS_OFFLINE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("opc runs");
    output_within(
        child,
        WAIT_LONG,
        &format!("`opc {}` to finish", args.join(" ")),
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file under `dir` (symlinks as links, not followed) with its bytes, for "nothing changed".
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((path, target.into_os_string().into_encoded_bytes()));
            } else if kind.is_file() {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The org of [`ORG`] in `dir`, with its workspaces holding what agents would have left there.
struct Org {
    dir: tempfile::TempDir,
    /// A file outside every workspace, reached by a symlink inside one.
    outside: PathBuf,
}

impl Org {
    fn new() -> Org {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("opc.config.yaml"), ORG).unwrap();
        let ws = dir.path().join(".opc/workspaces");
        let ceo = ws.join("ceo");
        let ops = ws.join("ops");
        std::fs::create_dir_all(ceo.join("out")).unwrap();
        std::fs::create_dir_all(&ops).unwrap();
        // What the Write tool makes: a note, the value twice in two cases.
        std::fs::write(
            ceo.join("notes.md"),
            "Mail Alice.Smith@MailHost.test or alice.smith@mailhost.test today.\nAlice.Smithson stays.\n",
        )
        .unwrap();
        std::fs::set_permissions(ceo.join("notes.md"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        // What Bash makes: a log, and JSON holding the value escaped inside a string.
        std::fs::write(ceo.join("out/run.log"), format!("sent to {VALUE}\nok\n")).unwrap();
        std::fs::write(
            ops.join("contacts.json"),
            format!("{{\"to\":\"{VALUE}\",\"args\":\"{{\\\"cc\\\":\\\"{VALUE}\\\"}}\"}}\n"),
        )
        .unwrap();
        std::fs::write(ops.join("clean.txt"), "nothing personal\n").unwrap();
        // A binary file with the value inside: found, not edited.
        let mut binary = b"SQLite format 3\0\0\x01".to_vec();
        binary.extend_from_slice(VALUE.as_bytes());
        binary.extend_from_slice(b"\0\xff\xfe");
        std::fs::write(ops.join("cache.db"), binary).unwrap();
        // Two names for one file: not read, reported.
        std::fs::write(ops.join("a.txt"), format!("{VALUE}\n")).unwrap();
        std::fs::hard_link(ops.join("a.txt"), ops.join("b.txt")).unwrap();
        // A FIFO, which must not block the walk.
        let made = Command::new("mkfifo")
            .arg(ops.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        // Symlinks to a file and a directory outside every workspace, holding the value.
        let outside_dir = dir.path().join("elsewhere");
        std::fs::create_dir(&outside_dir).unwrap();
        let outside = outside_dir.join("private.txt");
        std::fs::write(&outside, format!("{VALUE}\n")).unwrap();
        std::os::unix::fs::symlink(&outside, ceo.join("link.md")).unwrap();
        std::os::unix::fs::symlink(&outside_dir, ceo.join("up")).unwrap();
        // A file whose name holds the value.
        std::fs::write(ops.join(format!("{VALUE}.txt")), "a name, not content\n").unwrap();
        Org { dir, outside }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn ws(&self, rel: &str) -> PathBuf {
        self.path().join(".opc/workspaces").join(rel)
    }
}

fn assert_no_value(what: &str, out: &str) {
    assert!(
        !out.to_lowercase().contains(VALUE),
        "{what} prints the value:\n{out}"
    );
}

#[test]
fn workspace_files_are_listed_without_the_flag_and_redacted_with_it() {
    let org = Org::new();
    let before = snapshot(org.path());

    // Without the flag: listed, nothing changed.
    let out = opc(org.path(), &["privacy", "erase", VALUE]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("nothing stored in the database"),
        "{stdout}"
    );
    assert!(stdout.contains("in 2 workspace(s)"), "{stdout}");
    for line in [
        "ceo/notes.md      2 occurrence(s)",
        "ceo/out/run.log   1 occurrence(s)",
        "ops/contacts.json  2 occurrence(s)",
    ] {
        let line = line.split_whitespace().collect::<Vec<_>>();
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == line),
            "no line {line:?} in:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("ops/cache.db: 1 occurrence(s); binary or not UTF-8 text: not edited"),
        "{stdout}"
    );
    assert!(stdout.contains("ops/a.txt: 2 hard links"), "{stdout}");
    assert!(stdout.contains("ops/b.txt: 2 hard links"), "{stdout}");
    assert!(stdout.contains("ops/[erased].txt"), "{stdout}");
    assert!(
        stdout.contains("run the same command with --workspaces"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("clean.txt") && !stdout.contains("link.md"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("elsewhere") && !stdout.contains("private"),
        "{stdout}"
    );
    assert_no_value("the listing", &stdout);
    assert_eq!(snapshot(org.path()), before, "the listing changed a file");

    // A dry run of the flag: what would change, nothing changed.
    let out = opc(
        org.path(),
        &["privacy", "erase", VALUE, "--workspaces", "--dry-run"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("would replace 5 occurrence(s) in 3 file(s) with [erased]"),
        "{stdout}"
    );
    assert!(stdout.contains("dry run: nothing was changed"), "{stdout}");
    assert_no_value("the dry run", &stdout);
    assert_eq!(snapshot(org.path()), before, "the dry run changed a file");

    // As root, the rewritten file keeps an owner other than the one running the erase.
    let chowned = std::os::unix::fs::chown(org.ws("ceo/notes.md"), Some(4321), Some(4321)).is_ok();

    // The flag: text files redacted in place; the rest listed and left; exit 1 since copies remain.
    let out = opc(org.path(), &["privacy", "erase", VALUE, "--workspaces"]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("copies are left in the workspaces"),
        "{stderr}"
    );
    assert!(
        stdout.contains("replaced 5 occurrence(s) in 3 file(s) with [erased]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("not edited (remove the value by hand)"),
        "{stdout}"
    );
    assert_no_value("the erase", &stdout);
    assert_eq!(
        std::fs::read_to_string(org.ws("ceo/notes.md")).unwrap(),
        "Mail [erased] or [erased] today.\nAlice.Smithson stays.\n"
    );
    let notes = std::fs::metadata(org.ws("ceo/notes.md")).unwrap();
    assert_eq!(notes.permissions().mode() & 0o7777, 0o640);
    if chowned {
        use std::os::unix::fs::MetadataExt;
        assert_eq!((notes.uid(), notes.gid()), (4321, 4321));
    }
    assert_eq!(
        std::fs::read_to_string(org.ws("ceo/out/run.log")).unwrap(),
        "sent to [erased]\nok\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(org.ws("ops/contacts.json")).unwrap())
            .unwrap();
    assert_eq!(json["to"], "[erased]");
    assert_eq!(json["args"], "{\"cc\":\"[erased]\"}");
    // Left alone: the link and what it points to, the binary file, the hard-linked file, the name.
    assert!(
        std::fs::symlink_metadata(org.ws("ceo/link.md"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(&org.outside).unwrap(),
        format!("{VALUE}\n")
    );
    assert!(
        std::fs::read(org.ws("ops/cache.db"))
            .unwrap()
            .windows(VALUE.len())
            .any(|w| w == VALUE.as_bytes())
    );
    assert_eq!(
        std::fs::read_to_string(org.ws("ops/b.txt")).unwrap(),
        format!("{VALUE}\n")
    );
    // No temporary file is left beside the rewritten ones.
    let leftovers: Vec<_> = snapshot(org.path())
        .into_iter()
        .filter(|(p, _)| p.to_string_lossy().contains(".opc-erase-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The audit line counts the workspace files, never the value or a path.
    let audit = std::fs::read_to_string(org.path().join(".opc/audit.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["workspace_files"], 3, "{audit}");
    assert_eq!(line["workspace_occurrences"], 5, "{audit}");
    assert_eq!(line["database"], serde_json::Value::Null, "{audit}");
    assert_no_value("the audit line", &audit);
    assert!(!audit.contains("notes.md"), "{audit}");

    // Once what is left is removed by hand, the erase has nothing left and exits 0.
    for rel in ["ops/cache.db", "ops/a.txt", "ops/b.txt"] {
        std::fs::remove_file(org.ws(rel)).unwrap();
    }
    std::fs::remove_file(org.ws(&format!("ops/{VALUE}.txt"))).unwrap();
    let out = opc(org.path(), &["privacy", "erase", VALUE, "--workspaces"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("no file holds the value"), "{stdout}");
}

#[test]
fn a_workspace_that_is_a_symlink_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("opc.config.yaml"), ORG).unwrap();
    let ws = dir.path().join(".opc/workspaces");
    std::fs::create_dir_all(ws.join("ceo")).unwrap();
    // An agent replaced the ops workspace with a link to a directory outside the root.
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{VALUE}\n")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("ops")).unwrap();
    let out = opc(dir.path(), &["privacy", "erase", VALUE, "--workspaces"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("ops: a symbolic link or not a directory: not followed"),
        "{stdout}"
    );
    assert!(!stdout.contains("secret.txt"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        format!("{VALUE}\n")
    );
}

#[test]
fn a_large_file_is_found_across_windows_and_left_for_the_admin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("opc.config.yaml"), ORG).unwrap();
    let ceo = dir.path().join(".opc/workspaces/ceo");
    std::fs::create_dir_all(&ceo).unwrap();
    // 40 MiB of log lines, the value once, straddling the end of the first window (8 MiB and the
    // overlap: 64 KiB and 64 bytes per character of the value).
    let line = "2024-05-01 12:00:00 INFO request served in 12 ms\n";
    let mut big = line.repeat((40 << 20) / line.len());
    let at = (8 << 20) + 64 * 1024 + 64 * VALUE.len() - 10;
    big.replace_range(at..at + VALUE.len() + 2, &format!(" {VALUE} "));
    std::fs::write(ceo.join("big.log"), &big).unwrap();
    // And one without it, which must not be reported.
    std::fs::write(ceo.join("clean.log"), line.repeat((40 << 20) / line.len())).unwrap();
    let out = opc(dir.path(), &["privacy", "erase", VALUE, "--workspaces"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("ceo/big.log: larger than 32 MiB: found, not edited in place"),
        "{stdout}"
    );
    assert!(!stdout.contains("clean.log"), "{stdout}");
}
