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
    let Some(fx) = Fixture::enforced("run::exit_codes_and_signals_are_reported") else {
        return;
    };
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
    let Some(fx) = Fixture::enforced("run::a_timeout_kills_the_command_and_what_it_started") else {
        return;
    };
    let token = token("timeout");
    // PIDs inside are the namespace's own: the test finds the processes by the token instead.
    let command = format!("(sleep 300; : {token}) & (sleep 301; : {token}) & sleep 302");
    let output = run_for(&fx.policy(), &command, Duration::from_millis(1500)).await;
    assert!(output.timed_out);
    assert_eq!(output.signal, Some(9));
    assert_eq!(output.exit_code, None);
    none_left_within_deadline(&token, "a subshell outlived the timeout");
}

#[tokio::test]
async fn a_background_job_does_not_outlive_the_command() {
    let Some(fx) = Fixture::enforced("run::a_background_job_does_not_outlive_the_command") else {
        return;
    };
    // Output redirected, so the pipe would not even hold `run` open: only the group kill ends it.
    let token = token("background");
    let output = run_for(
        &fx.policy(),
        &format!("(sleep 300; : {token}) >/dev/null 2>&1 & sleep 301 & echo done"),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(output.exit_code, Some(0));
    assert!(!output.timed_out);
    assert!(output.text.ends_with("done\n"), "{}", output.text);
    none_left_within_deadline(&token, "the background job outlived the command");
}

#[tokio::test]
async fn dropping_the_run_kills_the_tree() {
    let Some(fx) = Fixture::enforced("run::dropping_the_run_kills_the_tree") else {
        return;
    };
    let sandbox = sandbox();
    let policy = fx.policy();
    let pid_file = fx.work.join("pid");
    let token = token("dropped");
    let command = format!("(sleep 300; : {token}) & echo started > pid; wait");
    let mut run = Box::pin(sandbox.run(&policy, &command, Duration::from_secs(300)));
    // Poll the run until the child is up, then drop it (as a cancelled tool call does).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let pid: u32 = loop {
        tokio::select! {
            result = &mut run => panic!("the run ended early: {result:?}"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if pid_file.exists()
            && let Some(pid) = running_with(&token).first()
        {
            break *pid;
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
    none_left_within_deadline(&token, "a process outlived the dropped run");
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_the_run_ends() {
    let Some(fx) = Fixture::enforced("run::a_fork_bomb_is_bounded_and_the_run_ends") else {
        return;
    };
    let mut policy = fx.policy();
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
    none_left_within_deadline(&token, "the bomb outlived the run");
}

#[tokio::test]
async fn five_megabytes_of_output_are_capped_with_the_omitted_count() {
    let Some(fx) =
        Fixture::enforced("run::five_megabytes_of_output_are_capped_with_the_omitted_count")
    else {
        return;
    };
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
async fn tmp_and_home_are_private_and_fresh_for_each_run() {
    let Some(fx) = Fixture::enforced("run::tmp_and_home_are_private_and_fresh_for_each_run") else {
        return;
    };
    let command = |n: u32| {
        format!(
            "echo tmp=$TMPDIR home=$HOME; ls -A /tmp \"$HOME\"; echo run{n} > /tmp/f; echo run{n} > \"$HOME/.gitconfig\"; \
             sleep 0.2; cat /tmp/f \"$HOME/.gitconfig\"; stat -c %a \"$HOME\""
        )
    };
    let policy = fx.policy();
    let (one, two) = (command(1), command(2));
    let (first, second) = tokio::join!(run(&policy, &one), run(&policy, &two));
    for (output, n) in [(&first, 1), (&second, 2)] {
        // Empty at the start (nothing listed), its own data only, HOME private, and not the host's.
        assert_eq!(
            output.text,
            format!("tmp=/tmp home=/home/agent\n/home/agent:\n\n/tmp:\nrun{n}\nrun{n}\n700\n"),
        );
    }
    assert!(!fx.work.join(".gitconfig").exists());
}

#[tokio::test]
async fn a_missing_workdir_or_a_bad_launcher_never_runs_the_command() {
    let Some(fx) =
        Fixture::enforced("run::a_missing_workdir_or_a_bad_launcher_never_runs_the_command")
    else {
        return;
    };
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

/// OPC as root with its workspaces under a directory only root can traverse (`/root`, or what
/// `mktemp -d` makes): the private root is built by root, so the command never walks the host path.
#[tokio::test]
async fn a_workspace_under_a_private_directory_works_as_root() {
    let Some(fx) = Fixture::enforced("run::a_workspace_under_a_private_directory_works_as_root")
    else {
        return;
    };
    if !as_root("run::a_workspace_under_a_private_directory_works_as_root") {
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let locked = fx.base.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let work = locked.join("work");
    opc_sandbox::make_writable(&work).unwrap();
    let output = run(
        &opc_sandbox::Policy::new(&work),
        "echo ok > ran && cat ran && pwd",
    )
    .await;
    assert_eq!(output.text, "ok\n/workspace\n");
    assert_eq!(output.exit_code, Some(0));
    assert_eq!(
        std::fs::metadata(work.join("ran")).unwrap().uid(),
        opc_sandbox::SANDBOX_UID
    );
}

/// `kill -9` of OPC while a command runs: nothing of the run is left, not bash, not a background
/// job, not a process that double-forked away from bash.
#[tokio::test]
async fn nothing_outlives_a_killed_opc() {
    let Some(fx) = Fixture::enforced("run::nothing_outlives_a_killed_opc") else {
        return;
    };
    let token = token("crash");
    let marker = fx.work.join("done-marker");
    // The launcher's `run` mode plays OPC.
    let mut opc = tokio::process::Command::new(launcher())
        .args([
            "run",
            fx.work.to_str().unwrap(),
            &format!("(sleep 3 && touch done-marker) & ( (sleep 3; touch orphan) & ) ; sleep 30; : {token}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Running: bash (its command line holds the token) is up.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while running_with(&token).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    opc.start_kill().unwrap();
    opc.wait().await.unwrap();
    // Every process of the run ends (bash is PID 1 of its namespace: the kernel kills the rest).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !running_with(&token).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command outlived OPC"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every shell that would have written a file is gone (their command lines hold the token).
    assert!(!marker.exists(), "a background job outlived OPC");
    assert!(
        !fx.work.join("orphan").exists(),
        "a double-forked job outlived OPC"
    );
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
    // HOME is a fresh scratch directory outside the workspace, removed after the run.
    let home = output
        .text
        .lines()
        .find_map(|l| l.strip_prefix("home="))
        .unwrap();
    assert!(!std::path::Path::new(home).starts_with(&fx.work), "{home}");
    assert!(!std::path::Path::new(home).exists(), "{home}");
    let child: u32 = output
        .text
        .lines()
        .find_map(|l| l.strip_prefix("child="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(ends_within_deadline(child));
}
