//! A small headless-Chromium driver over the Chrome DevTools Protocol, for tests of the web chat page.
//!
//! Why not a WebDriver crate: the DevTools protocol needs only a websocket (tokio-tungstenite is already
//! here) and a handful of commands — navigate, evaluate JavaScript, type, press a key.
//!
//! Invariants:
//! - Chromium runs with a throwaway profile, background networking off, and only ever loads the URLs a
//!   test gives it (127.0.0.1);
//! - the process is killed when the [`Browser`] is dropped;
//! - every wait has a deadline, so a broken page fails a test instead of hanging it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long one protocol command may take before the test fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A running headless Chromium with one page attached.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("pid", &self.child.id())
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// The Chromium executable: `/usr/bin/chromium`, or `chromium` / `chromium-browser` on `PATH`.
    pub fn executable() -> Option<PathBuf> {
        let fixed = Path::new("/usr/bin/chromium");
        if fixed.is_file() {
            return Some(fixed.to_path_buf());
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
            .find(|candidate| candidate.is_file())
    }

    /// A started browser, or `None` when no Chromium is installed. A Chromium that is installed but
    /// fails to start is a test failure (panic), not a skip.
    pub async fn find() -> Option<Browser> {
        let executable = Browser::executable()?;
        match Browser::launch(&executable).await {
            Ok(browser) => Some(browser),
            Err(error) => panic!(
                "chromium at {} did not start: {error}",
                executable.display()
            ),
        }
    }

    /// [`Browser::find`] for a test (the browser group of `opc_testgate`): without Chromium, one line
    /// says the test is skipped and it gets `None` (it then returns) — under CI, a failure instead.
    /// The test is named by its thread, which the test harness names after it (a tokio test's body
    /// runs on that thread too).
    pub async fn for_test() -> Option<Browser> {
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("a browser test");
        let browser = Browser::find()
            .await
            .ok_or("chromium not installed (`.ci/run` installs it)");
        opc_testgate::need(opc_testgate::Group::Browser, test, browser)
    }

    /// Start Chromium headless and attach to a fresh page.
    pub async fn launch(executable: &Path) -> Result<Browser, String> {
        let profile = tempfile::tempdir().map_err(|e| format!("temp profile: {e}"))?;
        let mut child = Command::new(executable)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (found, url) = std::sync::mpsc::channel();
        // Read stderr to its end, so Chromium never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://")
                    && line.contains("DevTools listening on")
                    && let Some(found) = found.take()
                {
                    let _ = found.send(line[at..].trim().to_string());
                }
            }
        });
        let url = tokio::task::spawn_blocking(move || url.recv_timeout(COMMAND_TIMEOUT))
            .await
            .map_err(|e| format!("{e}"))?;
        let url = match url {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("no `DevTools listening on ws://…` line on stderr".to_string());
            }
        };
        let socket = match tokio_tungstenite::connect_async(url.as_str()).await {
            Ok((socket, _)) => socket,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("devtools websocket: {e}"));
            }
        };
        let mut browser = Browser {
            child,
            _profile: profile,
            socket,
            session: String::new(),
            next_id: 0,
        };
        let target = browser
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let target = target["targetId"]
            .as_str()
            .ok_or("no targetId")?
            .to_string();
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await?;
        browser.session = attached["sessionId"]
            .as_str()
            .ok_or("no sessionId")?
            .to_string();
        browser.call("Page.enable", json!({})).await?;
        browser.call("Runtime.enable", json!({})).await?;
        Ok(browser)
    }

    /// Send one protocol command (to the attached page once there is one) and return its result.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            command["sessionId"] = json!(self.session);
        }
        self.socket
            .send(Message::text(command.to_string()))
            .await
            .map_err(|e| format!("{method}: send: {e}"))?;
        let deadline = tokio::time::Instant::now() + COMMAND_TIMEOUT;
        loop {
            let message = tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .map_err(|_| format!("{method}: no answer in {COMMAND_TIMEOUT:?}"))?
                .ok_or_else(|| format!("{method}: devtools connection closed"))?
                .map_err(|e| format!("{method}: {e}"))?;
            let Message::Text(text) = message else {
                continue;
            };
            let Ok(reply) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            if reply["id"].as_u64() != Some(id) {
                continue; // an event, or another command's answer
            }
            if let Some(error) = reply.get("error") {
                return Err(format!("{method}: {error}"));
            }
            return Ok(reply["result"].clone());
        }
    }

    /// Load `url` and wait until the document is complete.
    pub async fn navigate(&mut self, url: &str) -> Result<(), String> {
        let result = self.call("Page.navigate", json!({"url": url})).await?;
        if let Some(error) = result.get("errorText").and_then(Value::as_str) {
            return Err(format!("navigate: {error}"));
        }
        self.wait_for("document.readyState === 'complete'", COMMAND_TIMEOUT)
            .await
    }

    /// Reload the page (as the browser's reload button does) and wait until the new document is
    /// complete.
    pub async fn reload(&mut self) -> Result<(), String> {
        // A mark on the old document, so the wait below cannot be satisfied by it.
        self.eval("window.__opcOldDocument = true").await?;
        self.call("Page.reload", json!({})).await?;
        self.wait_for(
            "!window.__opcOldDocument && document.readyState === 'complete'",
            COMMAND_TIMEOUT,
        )
        .await
    }

    /// Evaluate JavaScript in the page (promises awaited) and return its value as JSON.
    pub async fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            )
            .await?;
        if let Some(details) = result.get("exceptionDetails") {
            let text = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("exception");
            return Err(format!("evaluate `{expression}`: {text}"));
        }
        Ok(result["result"]["value"].clone())
    }

    /// Poll `condition` (a JavaScript expression) until it is truthy; on timeout, fail with the page's
    /// visible text to show what was there instead.
    pub async fn wait_for(&mut self, condition: &str, timeout: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let probe = format!(
            "(() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})()"
        );
        loop {
            match self.eval(&probe).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Ok(_) => {}
                // The page is between documents (a reload or navigation): poll the new one.
                Err(e) if navigating(&e) => {}
                Err(e) => return Err(e),
            }
            if tokio::time::Instant::now() >= deadline {
                let text = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await
                    .unwrap_or_default();
                return Err(format!(
                    "timed out after {timeout:?} waiting for `{condition}`; the page shows:\n{}",
                    text.as_str().unwrap_or_default()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Focus the element matching `selector` (fails if there is none).
    pub async fn focus(&mut self, selector: &str) -> Result<(), String> {
        let found = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); return document.activeElement === e; }})()",
                json!(selector)
            ))
            .await?;
        if found == Value::Bool(true) {
            Ok(())
        } else {
            Err(format!("cannot focus `{selector}`"))
        }
    }

    /// A PNG of the page as a `width` × `height` window shows it (the whole page when `full`).
    pub async fn screenshot(
        &mut self,
        width: u32,
        height: u32,
        full: bool,
    ) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}),
        )
        .await?;
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": full}),
            )
            .await?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| format!("no screenshot data in {shot}"))?;
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("screenshot data: {e}"))
    }

    /// Type `text` into the focused element, as a keyboard would insert it.
    pub async fn type_text(&mut self, text: &str) -> Result<(), String> {
        self.call("Input.insertText", json!({"text": text}))
            .await
            .map(|_| ())
    }

    /// Press and release Enter on the focused element.
    pub async fn press_enter(&mut self) -> Result<(), String> {
        for kind in ["keyDown", "keyUp"] {
            let mut event = json!({
                "type": kind, "key": "Enter", "code": "Enter",
                "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13,
            });
            if kind == "keyDown" {
                event["text"] = json!("\r");
                event["unmodifiedText"] = json!("\r");
            }
            self.call("Input.dispatchKeyEvent", event).await?;
        }
        Ok(())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a CDP error only means the page was replaced while it was being asked (a reload or a
/// navigation in progress), so asking again is right.
fn navigating(error: &str) -> bool {
    [
        "navigated or closed",
        "Execution context was destroyed",
        "Cannot find context",
    ]
    .iter()
    .any(|m| error.contains(m))
}
