//! The escape list, tried from inside the sandbox with real processes: each attempt is
//! refused and nothing outside the workspace changes. Run as root (as here), the uid drop applies
//! too; every test also holds for a non-root OPC, where only Landlock and the namespaces stand in
//! the way.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;

use common::*;

/// Every `cat` of a forbidden file prints this marker instead of the file.
fn refused(output: &opc_sandbox::Output, what: &str) {
    for leaked in [
        SECRET,
        "config-beside-the-workspace",
        "database-beside-the-workspace",
    ] {
        assert!(
            !output.text.contains(leaked),
            "{what} leaked: {}",
            output.text
        );
    }
}

#[tokio::test]
async fn dot_dot_and_absolute_paths_outside_are_refused() {
    let Some(fx) = Fixture::enforced("escapes::dot_dot_and_absolute_paths_outside_are_refused")
    else {
        return;
    };
    let before = fx.snapshot_outside();
    let command = format!(
        "cat ../outside/secret.txt; echo rc=$?; cat {abs}; echo rc=$?; cat ../../{rel}; echo rc=$?",
        abs = fx.secret.display(),
        rel = fx.secret.strip_prefix("/").unwrap().display(),
    );
    let output = run(&fx.policy(), &command).await;
    refused(&output, "a .. or absolute path");
    assert_eq!(output.text.matches("rc=0").count(), 0, "{}", output.text);
    // The host's paths do not exist in the private root; what does exist is not readable.
    assert!(
        output.text.contains("No such file or directory")
            || output.text.contains("Permission denied"),
        "{}",
        output.text
    );
    assert_eq!(fx.snapshot_outside(), before);
    // `..` is the private root: it lists, but nothing of the host's directory beside the workspace.
    let listing = run(&fx.policy(), "ls -a ..").await;
    for name in ["opc.db", "opc.config.yaml", "outside"] {
        assert!(!listing.text.contains(name), "{name}: {}", listing.text);
    }
    assert!(listing.text.contains("workspace"), "{}", listing.text);
}

#[tokio::test]
async fn a_symlink_out_of_the_workspace_leads_nowhere() {
    let Some(fx) = Fixture::enforced("escapes::a_symlink_out_of_the_workspace_leads_nowhere")
    else {
        return;
    };
    // One planted from outside (as a file tool or a git checkout might), one made inside.
    std::os::unix::fs::symlink(&fx.secret, fx.work.join("planted")).unwrap();
    let output = run(
        &fx.policy(),
        "cat planted; echo rc=$?; ln -s ../outside/secret.txt made && cat made; echo rc=$?; cat -- \"$(readlink -f planted)\"; echo rc=$?",
    )
    .await;
    refused(&output, "a symlink");
    assert_eq!(output.text.matches("rc=0").count(), 0, "{}", output.text);
}

#[tokio::test]
async fn a_hard_link_out_of_the_workspace_cannot_be_made() {
    let Some(fx) = Fixture::enforced("escapes::a_hard_link_out_of_the_workspace_cannot_be_made")
    else {
        return;
    };
    let before = fx.snapshot_outside();
    let output = run(
        &fx.policy(),
        "ln ../outside/secret.txt hard; echo rc=$?; cat hard; echo rc=$?; ls",
    )
    .await;
    refused(&output, "a hard link");
    assert_eq!(output.text.matches("rc=0").count(), 0, "{}", output.text);
    assert!(!fx.work.join("hard").exists());
    assert_eq!(fx.snapshot_outside(), before);
}

#[tokio::test]
async fn a_hard_link_planted_to_a_private_file_stays_unreadable_when_root() {
    let Some(fx) = Fixture::enforced(
        "escapes::a_hard_link_planted_to_a_private_file_stays_unreadable_when_root",
    ) else {
        return;
    };
    if !as_root("escapes::a_hard_link_planted_to_a_private_file_stays_unreadable_when_root") {
        return;
    }
    // Landlock follows names, so a hard link planted *inside* the workspace by someone outside is
    // a name inside it. What still holds as root: the command's uid cannot read a 0600 root file
    // (OPC's database is such a file), whatever its name.
    let private = fx.base.join("outside/private.db");
    std::fs::write(&private, DATABASE).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&private, fx.work.join("planted-hard")).unwrap();
    let output = run(&fx.policy(), "cat planted-hard; echo rc=$?").await;
    refused(&output, "a planted hard link");
    assert!(output.text.contains("rc=1"), "{}", output.text);
}

#[tokio::test]
async fn proc_self_root_leads_nowhere() {
    let Some(fx) = Fixture::enforced("escapes::proc_self_root_leads_nowhere") else {
        return;
    };
    let command = format!(
        "cat /proc/self/root{}; echo rc=$?; cat /proc/$$/root{}; echo rc=$?; cat /proc/1/environ; echo rc=$?; cat /proc/$PPID/environ; echo rc=$?",
        fx.secret.display(),
        fx.config.display(),
    );
    let output = run(&fx.policy(), &command).await;
    refused(&output, "/proc/self/root");
    assert_eq!(output.text.matches("rc=0").count(), 0, "{}", output.text);
    assert!(!output.text.contains("PATH="), "{}", output.text);
}

#[tokio::test]
async fn the_config_and_database_beside_the_workspace_are_unreadable() {
    let Some(fx) =
        Fixture::enforced("escapes::the_config_and_database_beside_the_workspace_are_unreadable")
    else {
        return;
    };
    let command = format!(
        "cat ../opc.config.yaml; echo rc=$?; head -c 100 {db}; echo rc=$?; grep -r beside ..; echo rc=$?; find .. -name 'opc.*'; cp {db} ./copy; echo rc=$?",
        db = fx.database.display()
    );
    let output = run(&fx.policy(), &command).await;
    refused(&output, "the config or database");
    assert_eq!(output.text.matches("rc=0").count(), 0, "{}", output.text);
    assert!(!fx.work.join("copy").exists());
}

#[tokio::test]
async fn nothing_outside_the_workspace_and_temp_dir_can_be_written() {
    let Some(fx) =
        Fixture::enforced("escapes::nothing_outside_the_workspace_and_temp_dir_can_be_written")
    else {
        return;
    };
    let before = fx.snapshot_outside();
    let token = token("write");
    let command = format!(
        "echo x > ../new.txt; echo rc=$?; echo x >> ../outside/secret.txt; echo rc=$?; rm ../opc.db; echo rc=$?; \
         mv ../opc.config.yaml .; echo rc=$?; mkdir ../dir; echo rc=$?; touch /tmp/{token}; echo private_tmp=$?; \
         touch /var/tmp/{token}; echo rc=$?; touch /dev/shm/{token}; echo rc=$?; {chmod} \
         echo ok > inside.txt && echo inside=$?; echo ok > \"$TMPDIR/t\" && echo tmpdir=$?",
        // Landlock does not cover metadata (chmod, chown, utimes): outside the workspace only file
        // ownership stops them, which holds when OPC is root (the command is another uid). As an
        // ordinary user, a command can chmod OPC's own files by path: a limit in docs/sandbox.md.
        chmod = if opc_sandbox::sandbox_owner().is_some() {
            "chmod 777 .. ../opc.db; echo rc=$?;"
        } else {
            ""
        },
    );
    let output = run(&fx.policy(), &command).await;
    assert_eq!(output.text.matches("rc=0").count(), 0, "{}", output.text);
    assert!(
        output.text.contains("inside=0")
            && output.text.contains("tmpdir=0")
            && output.text.contains("private_tmp=0"),
        "{}",
        output.text
    );
    assert_eq!(fx.snapshot_outside(), before);
    for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
        assert!(!std::path::Path::new(dir).join(&token).exists());
    }
    assert_eq!(
        std::fs::read_to_string(fx.work.join("inside.txt")).unwrap(),
        "ok\n"
    );
}

#[tokio::test]
async fn the_environment_holds_no_key_of_the_parent() {
    let Some(fx) = Fixture::enforced("escapes::the_environment_holds_no_key_of_the_parent") else {
        return;
    };
    // The launcher binary's `run` mode plays OPC: a parent with provider keys in its environment.
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new(launcher())
            .args([
                "run",
                fx.work.to_str().unwrap(),
                "env; echo; cat /proc/$PPID/environ; echo rc=$?",
            ])
            .env("ANTHROPIC_API_KEY", "sk-ant-api03-FAKEFAKEFAKE")
            .env("SLACK_BOT_TOKEN", "xoxb-fake-token")
            .output(),
    )
    .await
    .expect("the run ended")
    .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.code().is_some(), "{output:?}");
    assert!(text.contains("HOME="), "{text}");
    for leaked in ["ANTHROPIC", "sk-ant", "SLACK", "xoxb"] {
        assert!(!text.contains(leaked), "{leaked} leaked: {text}");
    }
    assert!(text.contains("TERM=dumb"), "{text}");
    // HOME is private and outside the workspace: a planted `.gitconfig` there is not read.
    assert!(text.contains("HOME=/home/agent\n"), "{text}");
}

#[tokio::test]
async fn only_the_listed_variables_are_added() {
    let Some(fx) = Fixture::enforced("escapes::only_the_listed_variables_are_added") else {
        return;
    };
    let mut policy = fx.policy();
    policy.env = vec![("CARGO_TERM_COLOR".into(), "never".into())];
    let output = run(&policy, "env | sort").await;
    let names: Vec<&str> = output
        .text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    // What the policy sets, plus what bash itself adds (PWD, OLDPWD, SHLVL, `_`).
    let allowed = [
        "CARGO_TERM_COLOR",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_KEY_1",
        "GIT_CONFIG_KEY_2",
        "GIT_CONFIG_KEY_3",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_VALUE_0",
        "GIT_CONFIG_VALUE_1",
        "GIT_CONFIG_VALUE_2",
        "GIT_CONFIG_VALUE_3",
        "GIT_PAGER",
        "HOME",
        "LANG",
        "OLDPWD",
        "PATH",
        "PWD",
        "SHLVL",
        "TERM",
        "TMPDIR",
        "_",
    ];
    for name in &names {
        assert!(
            allowed.contains(name),
            "unexpected variable {name}: {}",
            output.text
        );
    }
    for name in ["CARGO_TERM_COLOR", "HOME", "LANG", "PATH", "TERM", "TMPDIR"] {
        assert!(names.contains(&name), "{name} missing: {}", output.text);
    }
}

#[tokio::test]
async fn a_tcp_connect_to_a_local_listener_fails_without_network() {
    let Some(fx) =
        Fixture::enforced("escapes::a_tcp_connect_to_a_local_listener_fails_without_network")
    else {
        return;
    };
    let mut policy = fx.policy();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected; echo rc=$?; ip -brief link 2>/dev/null"
    );
    let output = run(&policy, &command).await;
    assert!(!output.text.contains("connected"), "{}", output.text);
    assert!(!output.text.contains("rc=0"), "{}", output.text);
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );

    // The same connect works once the policy allows the network: what refused it was the sandbox.
    policy.network = true;
    let output = run(&policy, &command).await;
    assert!(output.text.contains("connected"), "{}", output.text);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match listener.accept() {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::WouldBlock && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("no connection arrived: {e}"),
        }
    }
}

#[tokio::test]
async fn the_command_runs_as_an_unprivileged_user_when_opc_is_root() {
    let Some(fx) =
        Fixture::enforced("escapes::the_command_runs_as_an_unprivileged_user_when_opc_is_root")
    else {
        return;
    };
    let output = run(&fx.policy(), "id -u; id -g; id -G").await;
    let ids: Vec<&str> = output.text.lines().collect();
    match opc_sandbox::sandbox_owner() {
        Some((uid, gid)) => {
            assert_eq!(ids, [uid.to_string(), gid.to_string(), gid.to_string()]);
        }
        None => assert_eq!(ids[0], nix_uid()),
    }
    assert_ne!(ids[0], "0");
}

fn nix_uid() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn leaving_the_process_group_or_making_namespaces_is_denied() {
    let Some(fx) =
        Fixture::enforced("escapes::leaving_the_process_group_or_making_namespaces_is_denied")
    else {
        return;
    };
    let output = run(
        &fx.policy(),
        "setsid -w true; echo setsid=$?; unshare -n true; echo unshare=$?; unshare -U true; echo userns=$?; \
         python3 -c 'import os; os.setpgid(0, 0)' 2>/dev/null; echo setpgid=$?",
    )
    .await;
    for call in ["setsid", "unshare", "userns", "setpgid"] {
        assert!(
            !output.text.contains(&format!("{call}=0")),
            "{}",
            output.text
        );
    }
}

#[tokio::test]
async fn read_only_trees_can_be_read_but_not_written() {
    let Some(fx) = Fixture::enforced("escapes::read_only_trees_can_be_read_but_not_written") else {
        return;
    };
    let mut policy = fx.policy();
    let team = fx.base.join("team");
    opc_sandbox::make_writable(&team).unwrap();
    std::fs::write(team.join("report.md"), "team report").unwrap();
    opc_sandbox::make_writable(&team).unwrap();
    policy.read_only = vec![team.clone(), fx.base.join("not-yet-created")];
    // Seen at /team/<its directory name>, never at its host path.
    let command = "cat /team/team/report.md; echo; echo x > /team/team/report.md; echo write=$?; \
                   touch /team/team/new; echo new=$?; ls /team";
    let output = run(&policy, command).await;
    assert!(output.text.ends_with("team\n"), "{}", output.text);
    assert!(output.text.starts_with("team report"), "{}", output.text);
    assert!(
        !output.text.contains("write=0") && !output.text.contains("new=0"),
        "{}",
        output.text
    );
    assert_eq!(
        std::fs::read_to_string(team.join("report.md")).unwrap(),
        "team report"
    );
    assert!(!team.join("new").exists());
}

/// A 0777 pathname Unix socket outside the workspace (a `docker.sock`, a sibling's socket): Landlock
/// does not cover `connect()` on it and the network namespace does not either; the private root
/// does, since the path does not exist for the command.
#[tokio::test]
async fn a_unix_socket_outside_the_workspace_is_unreachable() {
    let Some(fx) = Fixture::enforced("escapes::a_unix_socket_outside_the_workspace_is_unreachable")
    else {
        return;
    };
    let path = fx.base.join("outside/daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let Some(python) = installed(
        "escapes::a_unix_socket_outside_the_workspace_is_unreachable",
        &["/usr/bin/python3"],
    ) else {
        return;
    };
    let command = format!(
        "{python} -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' {p}; echo rc=$?; ls -la {p}",
        p = path.display()
    );
    let output = run(&fx.policy(), &command).await;
    assert!(!output.text.contains("connected"), "{}", output.text);
    assert!(!output.text.contains("rc=0"), "{}", output.text);
    match listener.accept() {
        Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
        Ok(_) => panic!("the sandboxed command reached the socket"),
    }
}

/// `AF_VSOCK` (a VM's channel to its host) is refused without the network, allowed with it.
#[tokio::test]
async fn vsock_sockets_need_the_network() {
    let Some(fx) = Fixture::enforced("escapes::vsock_sockets_need_the_network") else {
        return;
    };
    let mut policy = fx.policy();
    let Some(python) = installed(
        "escapes::vsock_sockets_need_the_network",
        &["/usr/bin/python3"],
    ) else {
        return;
    };
    let command = format!(
        "{python} -c 'import socket\ntry:\n  socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(\"made\")\nexcept OSError as e: print(\"errno\", e.errno)'"
    );
    let output = run(&policy, &command).await;
    assert_eq!(
        output.text,
        format!("errno {}\n", libc::EPERM),
        "{}",
        output.text
    );
    policy.network = true;
    let output = run(&policy, &command).await;
    // With the network the filter does not stand in the way (the kernel may still lack vsock).
    assert_ne!(
        output.text,
        format!("errno {}\n", libc::EPERM),
        "{}",
        output.text
    );
}

/// A repository config planted in the workspace (the file tools write without approval) must not
/// make `git status` run code: `core.fsmonitor`, `core.hooksPath`, `core.pager` are overridden, and
/// a `.gitconfig` in the workspace is not HOME's.
#[tokio::test]
async fn git_does_not_run_code_planted_in_the_workspace() {
    let Some(fx) = Fixture::enforced("escapes::git_does_not_run_code_planted_in_the_workspace")
    else {
        return;
    };
    let Some(git) = installed(
        "escapes::git_does_not_run_code_planted_in_the_workspace",
        &["/usr/bin/git", "/usr/local/bin/git"],
    ) else {
        return;
    };
    let setup = format!(
        "{git} init -q . && {git} config core.fsmonitor 'touch pwned-fsmonitor; echo' && \
         {git} config core.pager 'touch pwned-pager; cat' && mkdir -p hooks && \
         printf '#!/bin/sh\\ntouch pwned-hook\\n' > hooks/post-checkout && chmod +x hooks/post-checkout && \
         {git} config core.hooksPath hooks && \
         printf '[core]\\n\\tfsmonitor = \"touch pwned-home; echo\"\\n' > .gitconfig && echo set"
    );
    let output = run(&fx.policy(), &setup).await;
    assert_eq!(output.text, "set\n", "{}", output.text);
    let output = run(
        &fx.policy(),
        &format!("{git} status --short; {git} log; {git} checkout -q -b x 2>&1; echo done"),
    )
    .await;
    assert!(output.text.contains("done"), "{}", output.text);
    for planted in ["pwned-fsmonitor", "pwned-pager", "pwned-hook", "pwned-home"] {
        assert!(
            !fx.work.join(planted).exists(),
            "{planted}: {}",
            output.text
        );
    }
}
