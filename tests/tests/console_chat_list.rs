//! The web chat's list of this browser's conversations, on the real `opc run` in headless Chromium:
//! two conversations started in one browser are both listed (title, last message, time), newest
//! first; opening one from the list (by keyboard) shows its thread and marks it current; a message in
//! the open conversation moves it to the top with its new last message; an id the server does not
//! know is dropped from the list and from the browser's storage; a fresh browser profile lists
//! nothing. The console link follows `GET /api/session` (shown for an admin only). Also the list
//! endpoint's contract: unknown ids left out, clear 400s for bad or too many ids; and the same list
//! when the transcript is in PostgreSQL (`framework.memory.storage: postgres`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Extras, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// `GET` `path`: status and JSON answer.
async fn get(opc: &OpcRun, path: &str) -> (u16, Value) {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Wait until the page's JavaScript `condition` holds (or fail after [`WAIT`], naming it).
async fn wait(browser: &mut Browser, condition: &str) {
    if let Err(e) = browser.wait_for(condition, WAIT).await {
        let list = browser
            .eval("document.getElementById('conversations').innerText")
            .await;
        panic!("{e}: {condition}\nthe list: {list:?}");
    }
}

/// Type `text` in the message box and send it with Enter.
async fn send(browser: &mut Browser, text: &str) {
    browser.focus("#input").await.unwrap();
    browser.type_text(text).await.unwrap();
    browser.press_enter().await.unwrap();
}

/// The list's entries as `[id, title, last, time]`, top first.
async fn entries(browser: &mut Browser) -> Vec<Vec<String>> {
    let rows = browser
        .eval(
            "[...document.querySelectorAll('#conversation-list a[data-conversation]')].map(a => \
             [a.dataset.conversation, a.querySelector('.title').textContent, \
              a.querySelector('.last').textContent, a.querySelector('time').textContent])",
        )
        .await
        .unwrap();
    serde_json::from_value(rows).unwrap()
}

/// A JavaScript test that the list shows exactly `titles`, top first.
fn listed(titles: &[&str]) -> String {
    format!(
        "JSON.stringify([...document.querySelectorAll('#conversation-list a[data-conversation] .title')]\
         .map(t => t.textContent)) === '{}'",
        serde_json::to_string(titles).unwrap()
    )
}

/// A JavaScript test that the conversation shows a bot message `text`.
fn answered(text: &str) -> String {
    format!(
        "[...document.querySelectorAll('.msg.bot .body')].some(b => b.textContent === '{text}')"
    )
}

/// Save a PNG of the page to `$OPC_SCREENSHOTS/<name>.png` when that variable names a directory;
/// always check the browser produced one.
async fn screenshot(browser: &mut Browser, name: &str, width: u32, height: u32) {
    let png = browser.screenshot(width, height, false).await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG of {name}");
    if let Some(dir) = std::env::var_os("OPC_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_lists_this_browsers_conversations_newest_first() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let script = Script::new().agent(
        marker("ceo"),
        vec![
            // The scripted model keeps a cursor per conversation (its first message): each new
            // conversation is answered with the first step, a follow-up with the next.
            Step::text("First answer"),
            Step::text("Second answer"),
        ],
    );
    let (_llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);

    browser.navigate(&opc.url("/")).await.unwrap();
    wait(
        &mut browser,
        "document.activeElement && document.activeElement.id === 'input'",
    )
    .await;
    assert_eq!(entries(&mut browser).await.len(), 0);
    assert_eq!(
        browser
            .eval("document.getElementById('conversations-empty').hidden")
            .await
            .unwrap(),
        json!(false)
    );

    // Two conversations, each with its answer.
    send(&mut browser, "Alpha question about the roadmap").await;
    wait(&mut browser, &answered("First answer")).await;
    wait(&mut browser, &listed(&["Alpha question about the roadmap"])).await;
    let alpha = browser
        .eval("location.hash.slice(3)")
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    browser
        .eval("document.querySelector('[data-new-conversation]').click()")
        .await
        .unwrap();
    wait(&mut browser, "location.hash === ''").await;
    send(&mut browser, "Beta question").await;
    wait(
        &mut browser,
        "document.querySelector('#log .msg.user .body').textContent === 'Beta question'",
    )
    .await;
    wait(&mut browser, &answered("First answer")).await;
    wait(
        &mut browser,
        &listed(&["Beta question", "Alpha question about the roadmap"]),
    )
    .await;
    wait(
        &mut browser,
        "[...document.querySelectorAll('#conversation-list .last')].map(l => l.textContent).join('|') === 'First answer|First answer'",
    )
    .await;
    let beta = browser
        .eval("location.hash.slice(3)")
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(alpha, beta);
    let shown = entries(&mut browser).await;
    assert_eq!(shown[0][0], beta);
    assert_eq!(shown[1][0], alpha);
    for row in &shown {
        assert_eq!(row[3], "just now", "a time on each entry: {row:?}");
    }
    // The open one is marked current.
    assert_eq!(
        browser
            .eval("document.querySelector('[aria-current=true]').dataset.conversation")
            .await
            .unwrap(),
        json!(beta)
    );

    // The endpoint behind it: newest first, unknown ids left out, times in order.
    let (status, body) = get(
        &opc,
        &format!("/api/conversations?ids={alpha},0000000000000bad,{beta}"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let list = body["conversations"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{body}");
    assert_eq!(list[0]["id"], beta.as_str());
    assert_eq!(list[0]["title"], "Beta question");
    assert_eq!(list[0]["last"], "First answer");
    assert_eq!(list[0]["last_author"], "bot");
    assert_eq!(list[1]["title"], "Alpha question about the roadmap");
    assert!(list[0]["at"].as_i64().unwrap() >= list[1]["at"].as_i64().unwrap());
    let (status, body) = get(&opc, "/api/conversations?ids=../etc").await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("conversation ids"));
    let many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
    let (status, body) = get(&opc, &format!("/api/conversations?ids={}", many.join(","))).await;
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("at most 100"),
        "{body}"
    );

    // Open Alpha from the list with the keyboard: its thread, marked current.
    browser
        .focus(&format!(
            "#conversation-list a[data-conversation='{alpha}']"
        ))
        .await
        .unwrap();
    browser.press_enter().await.unwrap();
    wait(&mut browser, &format!("location.hash === '#c={alpha}'")).await;
    wait(
        &mut browser,
        "[...document.querySelectorAll('#log .msg.user .body')].map(b => b.textContent).join('|') === 'Alpha question about the roadmap'",
    )
    .await;
    wait(&mut browser, &answered("First answer")).await;
    assert_eq!(
        browser
            .eval("document.querySelector('[aria-current=true]').dataset.conversation")
            .await
            .unwrap(),
        json!(alpha)
    );
    // A new message in the open conversation moves it up, with its new last message.
    send(&mut browser, "And the budget?").await;
    wait(&mut browser, &answered("Second answer")).await;
    wait(
        &mut browser,
        &listed(&["Alpha question about the roadmap", "Beta question"]),
    )
    .await;
    wait(
        &mut browser,
        "document.querySelector('#conversation-list .last').textContent === 'Second answer'",
    )
    .await;

    // The console link follows /api/session: shown for an admin only (absent while the server has
    // no such endpoint, or for a viewer).
    let (status, session) = get(&opc, "/api/session").await;
    let admin = status == 200 && session["role"] == "admin";
    assert_eq!(
        browser
            .eval("!document.querySelector('[data-console-link]').hidden")
            .await
            .unwrap(),
        json!(admin),
        "/api/session answered {status} {session}"
    );
    screenshot(&mut browser, "chat", 1280, 800).await;

    // An id this server does not know, kept by the browser, is dropped from the list and storage.
    browser
        .eval(
            "localStorage.setItem('opc.conversations', JSON.stringify(\
             ['00000000deadbeef', ...JSON.parse(localStorage.getItem('opc.conversations'))]))",
        )
        .await
        .unwrap();
    browser.navigate(&opc.url("/")).await.unwrap();
    wait(
        &mut browser,
        &listed(&["Alpha question about the roadmap", "Beta question"]),
    )
    .await;
    wait(
        &mut browser,
        "!localStorage.getItem('opc.conversations').includes('00000000deadbeef')",
    )
    .await;
    assert_eq!(
        browser
            .eval("JSON.parse(localStorage.getItem('opc.conversations')).length")
            .await
            .unwrap(),
        json!(2)
    );

    // Another browser (a fresh profile) lists none of them.
    let mut other = Browser::for_test().await.unwrap();
    other.navigate(&opc.url("/")).await.unwrap();
    other
        .wait_for(
            "document.activeElement && document.activeElement.id === 'input'",
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(entries(&mut other).await.len(), 0);
    assert_eq!(
        other
            .eval("document.getElementById('conversations-empty').hidden")
            .await
            .unwrap(),
        json!(false)
    );

    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// On a narrow screen the list is a panel behind the "Conversations" button: it opens with the
/// keyboard, Escape closes it, and opening a conversation from it closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_narrow_screen_the_list_opens_and_closes_from_its_button() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Narrow answer")]);
    let (_llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    browser.navigate(&opc.url("/")).await.unwrap();
    // Chromium applies the narrow window's media queries once it is that size.
    let _ = browser.screenshot(420, 800, false).await.unwrap();
    wait(&mut browser, "matchMedia('(max-width: 48rem)').matches").await;
    send(&mut browser, "Narrow question").await;
    wait(&mut browser, &answered("Narrow answer")).await;
    let visible = "getComputedStyle(document.getElementById('conversations')).display !== 'none'";
    assert_eq!(browser.eval(visible).await.unwrap(), json!(false));
    wait(&mut browser, &listed(&["Narrow question"])).await;
    browser.focus("[data-conversations-toggle]").await.unwrap();
    browser.press_enter().await.unwrap();
    wait(&mut browser, visible).await;
    wait(
        &mut browser,
        "document.querySelector('[data-conversations-toggle]').getAttribute('aria-expanded') === 'true' \
         && document.activeElement.dataset.conversation !== undefined",
    )
    .await;
    browser
        .call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyDown", "key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27}),
        )
        .await
        .unwrap();
    wait(&mut browser, &format!("!({visible})")).await;
    wait(
        &mut browser,
        "document.activeElement === document.querySelector('[data-conversations-toggle]')",
    )
    .await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// The list endpoint on PostgreSQL: each conversation's first question and last answer, newest first,
/// unknown ids left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_reads_the_transcript_on_postgres() {
    let Some(url) = opc_tests::postgres::fresh_database("chat_list").await else {
        return;
    };
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Stored answer")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Default::default(),
        &Extras {
            framework: "  memory:\n    storage: postgres\n",
            sections: WEB,
            ..Extras::default()
        },
    );
    let opc = OpcRun::start(
        &org.config_path(),
        &[(KEY_VAR, KEY), ("DATABASE_URL", url.as_str())],
    );
    let mut ids = Vec::new();
    for question in ["First on postgres", "Second on postgres"] {
        let (id, mut sse) = opc_tests::web_chat::start(&opc, question).await;
        sse.wait_for("message|edit", WAIT, |d| d["text"] == "Stored answer")
            .await;
        ids.push(id);
    }
    let (status, body) = get(
        &opc,
        &format!(
            "/api/conversations?ids={},{},00000000deadbeef",
            ids[0], ids[1]
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let list = body["conversations"].as_array().unwrap();
    let titles: Vec<&str> = list.iter().map(|c| c["title"].as_str().unwrap()).collect();
    assert_eq!(
        titles,
        ["Second on postgres", "First on postgres"],
        "{body}"
    );
    for c in list {
        assert_eq!(c["last"], "Stored answer");
        assert_eq!(c["messages"], 2);
        assert!(c["at"].as_i64().unwrap() > 0);
    }
    let (code, stderr) = opc.stop();
    assert_eq!(code, Some(0), "{stderr}");
}
