//! How a run ends and what it returns: exit codes and signals, timeouts and cancellation killing
//! the whole tree, background jobs not outliving the command, a fork bomb bounded, 5 MB of output
//! capped, the private temp dir, and failures to start that never run the command.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use opc_sandbox::{Limits, Mode, SandboxError};

#[tokio::test]
async fn exit_codes_and_signals_are_reported() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    let output = run(&fx.policy(), "echo out; echo err >&2; exit 7").await;
    assert_eq!(output.exit_code, Some(7));
    assert_eq!(output.signal, None);
    assert!(!output.timed_out);
    assert_eq!(output.text, "out\nerr\n");
    assert_eq!(output.omitted_bytes, 0);

    let output = run(&fx.policy(), "kill -TERM $$").await;
    assert_eq!((output.exit_code, output.signal), (None, Some(15)));
    let output = run(&fx.policy(), "kill -KILL $$").await;
    assert_eq!((output.exit_code, output.signal), (None, Some(9)));
    let output = run(&fx.policy(), "true").await;
    assert_eq!((output.exit_code, output.signal), (Some(0), None));
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_what_it_started() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    let token = token("timeout");
    let command = format!("sleep 300 & echo child=$!; (sleep 301; : {token}) & sleep 302");
    let output = run_for(&fx.policy(), &command, Duration::from_millis(1500)).await;
    assert!(output.timed_out);
    assert_eq!(output.signal, Some(9));
    assert_eq!(output.exit_code, None);
    let child: u32 = output
        .text
        .lines()
        .find_map(|l| l.strip_prefix("child="))
        .expect("the child's pid was printed")
        .parse()
        .unwrap();
    assert!(
        ends_within_deadline(child),
        "the background child {child} still runs"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !running_with(&token).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "a subshell outlived the timeout"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_background_job_does_not_outlive_the_command() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    // Output redirected, so the pipe would not even hold `run` open: only the group kill ends it.
    let output = run_for(
        &fx.policy(),
        "sleep 300 >/dev/null 2>&1 & echo child=$!; sleep 301 & echo done",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(output.exit_code, Some(0));
    assert!(!output.timed_out);
    assert!(output.text.ends_with("done\n"), "{}", output.text);
    let child: u32 = output
        .text
        .lines()
        .find_map(|l| l.strip_prefix("child="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        ends_within_deadline(child),
        "the background child {child} still runs"
    );
}

#[tokio::test]
async fn dropping_the_run_kills_the_tree() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    let sandbox = sandbox();
    let policy = fx.policy();
    let pid_file = fx.work.join("pid");
    let mut run = Box::pin(sandbox.run(
        &policy,
        "sleep 300 & echo $! > pid; wait",
        Duration::from_secs(300),
    ));
    // Poll the run until the child is up, then drop it (as a cancelled tool call does).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let pid: u32 = loop {
        tokio::select! {
            result = &mut run => panic!("the run ended early: {result:?}"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse()
        {
            break pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command did not start"
        );
    };
    drop(run);
    assert!(
        ends_within_deadline(pid),
        "the child {pid} outlived the dropped run"
    );
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_the_run_ends() {
    let fx = Fixture::new();
    let mut policy = fx.policy();
    if !supported(&policy) {
        return;
    }
    policy.limits = Limits {
        processes: 64,
        ..Limits::default()
    };
    let token = token("bomb");
    let command = format!("bomb() {{ bomb | bomb & }}; bomb; sleep 2; : {token}");
    let output = run_for(&policy, &command, Duration::from_secs(20)).await;
    assert!(!output.timed_out, "{output:?}");
    assert!(
        output.text.contains("Resource temporarily unavailable"),
        "{}",
        output.text
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !running_with(&token).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the bomb outlived the run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn five_megabytes_of_output_are_capped_with_the_omitted_count() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    let lines = 800_000u32;
    let total: u64 = (1..=lines).map(|n| n.to_string().len() as u64 + 1).sum();
    assert!(total > 5_000_000);
    let output = run(&fx.policy(), &format!("seq 1 {lines}")).await;
    assert_eq!(output.exit_code, Some(0));
    let kept = (opc_sandbox::KEEP_HEAD + opc_sandbox::KEEP_TAIL) as u64;
    assert_eq!(output.omitted_bytes, total - kept);
    assert!(output.text.chars().count() <= 30_000);
    assert!(
        output.text.starts_with("1\n2\n3\n"),
        "{}",
        &output.text[..20]
    );
    assert!(output.text.ends_with(&format!("{}\n{lines}\n", lines - 1)));
    assert!(
        output
            .text
            .contains(&format!("\n… {} bytes omitted …\n", total - kept))
    );
}

#[tokio::test]
async fn the_temp_dir_is_private_and_removed() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    let command = "echo tmp=$TMPDIR; stat -c %a \"$TMPDIR\"; echo data > \"$TMPDIR/f\"; cat \"$TMPDIR/f\"; ls /tmp; echo ls=$?";
    let policy = fx.policy();
    let (first, second) = tokio::join!(run(&policy, command), run(&policy, command));
    let dir = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("tmp="))
            .unwrap()
            .to_string()
    };
    for output in [&first, &second] {
        assert!(output.text.contains("\n700\ndata\n"), "{}", output.text);
        assert!(!output.text.contains("ls=0"), "{}", output.text);
        assert!(!std::path::Path::new(&dir(&output.text)).exists());
    }
    assert_ne!(dir(&first.text), dir(&second.text));
}

#[tokio::test]
async fn a_missing_workdir_or_a_bad_launcher_never_runs_the_command() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    let policy = opc_sandbox::Policy::new(fx.base.join("missing"));
    let err = sandbox()
        .run(&policy, "true", Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Policy(_)), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");

    // An executable that is not a launcher: the run fails, the command does not run unsandboxed.
    let not_a_launcher = opc_sandbox::Sandbox::new("/usr/bin/true".into());
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        not_a_launcher.run(&fx.policy(), "touch ran", Duration::from_secs(10)),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert!(matches!(err, SandboxError::Spawn(_)), "{err}");
    assert!(!fx.work.join("ran").exists());
}

#[tokio::test]
async fn a_workdir_the_sandbox_user_cannot_reach_is_a_setup_error() {
    let fx = Fixture::new();
    if !supported(&fx.policy()) {
        return;
    }
    if opc_sandbox::sandbox_owner().is_none() {
        eprintln!("skipped: not root, so no uid drop to test");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let locked = fx.base.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let work = locked.join("work");
    opc_sandbox::make_writable(&work).unwrap();
    let err = sandbox()
        .run(
            &opc_sandbox::Policy::new(&work),
            "touch ran",
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Setup(_)), "{err}");
    assert!(err.to_string().contains("chmod o+x"), "{err}");
    assert!(!work.join("ran").exists());
}

#[tokio::test]
async fn a_kernel_without_a_feature_refuses_by_name() {
    let fx = Fixture::new();
    let mut probe = opc_sandbox::Probe::detect();
    probe.landlock = Err("not built into this kernel".into());
    let mut policy = fx.policy();
    let missing = probe.missing(&policy);
    assert_eq!(missing, ["landlock (not built into this kernel)"]);
    assert!(probe.report()[0].starts_with("landlock: missing"));
    policy.mode = Mode::Off;
    assert!(probe.missing(&policy).is_empty());
    let err = SandboxError::Unsupported {
        feature: missing[0].clone(),
    };
    assert!(err.to_string().contains("landlock"), "{err}");
    assert!(err.to_string().contains("mode: off"), "{err}");
}

#[tokio::test]
async fn mode_off_runs_unsandboxed_but_scrubbed_and_bounded() {
    let fx = Fixture::new();
    let mut policy = fx.policy();
    policy.mode = Mode::Off;
    let token = token("off");
    let command = format!(
        "cat ../outside/secret.txt; echo; echo home=$HOME; sleep 300 & echo child=$!; : {token}"
    );
    let output = run(&policy, &command).await;
    // Off means off: the file outside is readable. What still holds: env, cwd, group kill.
    assert!(output.text.contains(SECRET), "{}", output.text);
    assert!(output.text.contains(&format!("home={}", fx.work.display())));
    let child: u32 = output
        .text
        .lines()
        .find_map(|l| l.strip_prefix("child="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(ends_within_deadline(child));
}
