//! Cross-node wake-ups: one dedicated PostgreSQL connection that `LISTEN`s on [`CHANNEL`] and turns
//! every notification into a [`Wake`] on a broadcast channel, plus a ticker that sends
//! [`Wake::Tick`] every poll interval.
//!
//! Why a connection of its own, outside the pool: `LISTEN` belongs to a session, and a pooled
//! connection is handed to whoever asks next; a listener must also be read continuously (the
//! notifications arrive between queries), which only a connection driven by its own task is.
//!
//! Wake-ups are hints, never the record (see [`crate::store::Cluster`]): a node that misses one
//! catches up from the tables on the next [`Wake::Tick`]. So the listener's promises are about not
//! missing wake-ups *silently*:
//! - a `Tick` goes out at least every poll interval, whatever the connection does;
//! - when the connection fails or closes, a `Tick` goes out at once, the listener reconnects with
//!   backoff (from [`BACKOFF_START`], doubling up to [`BACKOFF_MAX`], with jitter so that nodes
//!   losing one server do not come back in lockstep), and a `Tick` goes out again as soon as it is
//!   listening: whatever was notified while nobody listened is read from the tables then;
//! - a half-open connection (a server gone without closing the socket) is found by a ping every
//!   [`PING_EVERY`] that must answer within [`PING_TIMEOUT`];
//! - one warning per outage, naming the server as `host:port/name` (never the URL), and a line when
//!   the connection is back;
//! - a payload it does not know is ignored with a debug line, never a panic: another node may run a
//!   newer build;
//! - dropping [`Wakes`] stops both tasks (the connection is closed cleanly, within a second): the
//!   listener never outlives its owner.
//!
//! The payloads ([`payload`], [`parse`]): `work`, `ended:<task>`, `approval:<id>`,
//! `cancelled:<task>`, `config:<id>` (a config saved in the history), and `events:<text>` (another node's relayed live events, the text as sent).

use std::future::poll_fn;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::MissedTickBehavior;
use tokio_postgres::config::SslMode;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls, Socket};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::store::{DbFailure, DbFault, StoreError, Wake};

/// The channel every node notifies and listens on.
pub(crate) const CHANNEL: &str = "opc_cluster";

/// How many wake-ups a slow subscriber may fall behind before it misses some
/// ([`broadcast::error::RecvError::Lagged`], which a subscriber treats as a [`Wake::Tick`]).
const CAPACITY: usize = 1024;

/// The first wait before reconnecting.
const BACKOFF_START: Duration = Duration::from_millis(200);

/// The longest wait between reconnection attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the listening connection is pinged (an empty query).
const PING_EVERY: Duration = Duration::from_secs(30);

/// How long a ping may take before the connection is taken for lost.
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// How long closing the connection may take when the listener stops.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// The listening session's `application_name` (unless the URL names one).
const APPLICATION_NAME: &str = "opc-wakes";

/// The shortest tick interval (a zero interval would spin).
const MIN_POLL: Duration = Duration::from_millis(50);

/// The notification payload of `wake` (`None` for [`Wake::Tick`], which is never notified: every
/// node ticks on its own). The inverse of [`parse`].
pub(crate) fn payload(wake: &Wake) -> Option<String> {
    match wake {
        Wake::Work => Some("work".to_string()),
        Wake::RootEnded(id) => Some(format!("ended:{id}")),
        Wake::Approval(id) => Some(format!("approval:{id}")),
        Wake::Cancelled(id) => Some(format!("cancelled:{id}")),
        Wake::Config(id) => Some(format!("config:{id}")),
        Wake::Events(text) => Some(format!("events:{text}")),
        Wake::Tick => None,
    }
}

/// The wake-up a notification's payload names, if it is one this build knows.
pub(crate) fn parse(payload: &str) -> Option<Wake> {
    if payload == "work" {
        return Some(Wake::Work);
    }
    // Before the ids: relayed text may hold anything, colons included.
    if let Some(text) = payload.strip_prefix("events:") {
        return Some(Wake::Events(text.to_string()));
    }
    let (kind, id) = payload.split_once(':')?;
    let id: i64 = id.parse().ok()?;
    match kind {
        "ended" => Some(Wake::RootEnded(id)),
        "approval" => Some(Wake::Approval(id)),
        "cancelled" => Some(Wake::Cancelled(id)),
        "config" => Some(Wake::Config(id)),
        _ => None,
    }
}

/// The running listener and ticker (see the module doc); both stop when this is dropped.
pub(crate) struct Wakes {
    sender: broadcast::Sender<Wake>,
    /// Cancels the tasks when dropped.
    _stop: DropGuard,
}

impl std::fmt::Debug for Wakes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakes")
            .field("subscribers", &self.sender.receiver_count())
            .finish()
    }
}

impl Wakes {
    /// Start listening on the database `config` names (without TLS: the caller has refused
    /// `sslmode=require`), and ticking every `poll` (at least [`MIN_POLL`]). Must be called inside a
    /// Tokio runtime (it spawns two tasks; like `tokio::spawn`, it panics outside one). Returns at
    /// once: the connection is made, and remade, in the background.
    pub(crate) fn spawn(config: Config, poll: Duration) -> Wakes {
        let (sender, _) = broadcast::channel(CAPACITY);
        let stop = CancellationToken::new();
        tokio::spawn(listen(config, poll, sender.clone(), stop.clone()));
        tokio::spawn(tick(poll.max(MIN_POLL), sender.clone(), stop.clone()));
        Wakes {
            sender,
            _stop: stop.drop_guard(),
        }
    }

    /// The wake-ups from now on. A receiver that falls [`CAPACITY`] behind gets `Lagged` (treat it
    /// as a [`Wake::Tick`]); `Closed` only after this `Wakes` was dropped.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Wake> {
        self.sender.subscribe()
    }
}

/// [`Wakes`] for tests and tools outside the engine: the same listener, started from a URL.
#[derive(Debug)]
pub struct WakeListener(Wakes);

impl WakeListener {
    /// Listen for the cluster's wake-ups on the database `url` names, with a [`Wake::Tick`] every
    /// `poll`. Returns at once (the connection is made in the background, and remade when lost);
    /// fails only when the URL cannot be used (not a PostgreSQL URL, TLS asked for) or when called
    /// outside a Tokio runtime. Errors name the database as `host:port/name`, never the URL.
    pub fn start(url: &str, poll: Duration) -> Result<WakeListener, StoreError> {
        let open = |path: String, message: String| StoreError::Open {
            path,
            source: DbFailure {
                fault: DbFault::Other,
                message,
            },
        };
        let place = opc_pg::parse(url)
            .map(|c| opc_pg::place(&c))
            .map_err(|e| open(e.place, e.message))?;
        let config: Config = url
            .parse()
            .map_err(|_| open(place.clone(), "not a PostgreSQL URL".into()))?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(open(
                format!("PostgreSQL at {place}"),
                "`sslmode=require` asks for TLS, which this build does not speak to PostgreSQL \
                 yet; reach the server over a private network and drop `sslmode`"
                    .into(),
            ));
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(open(
                format!("PostgreSQL at {place}"),
                "the wake-up listener runs on a Tokio runtime, and none is running here".into(),
            ));
        }
        Ok(WakeListener(Wakes::spawn(config, poll)))
    }

    /// The wake-ups from now on (see [`Wakes::subscribe`]).
    pub fn subscribe(&self) -> broadcast::Receiver<Wake> {
        self.0.subscribe()
    }
}

/// `host:port/name` of `config`, as `opc_pg` names a database.
fn place(config: &Config) -> String {
    opc_pg::place(&opc_pg::postgres::Config::from(config.clone()))
}

/// Send `wake` to whoever subscribes (nobody subscribed is not an error: a hint nobody needs).
fn send(sender: &broadcast::Sender<Wake>, wake: Wake) {
    let _ = sender.send(wake);
}

/// The ticker: a [`Wake::Tick`] every `poll` until stopped.
async fn tick(poll: Duration, sender: broadcast::Sender<Wake>, stop: CancellationToken) {
    let mut interval = tokio::time::interval(poll);
    // A runtime that stalled sends one tick, not a burst.
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = interval.tick() => send(&sender, Wake::Tick),
        }
    }
}

/// How one connection ended.
enum Ended {
    /// The listener was stopped.
    Stopped,
    /// The connection could not be made, or was lost (why, in the server's or driver's words);
    /// `listened`: it was listening before.
    Lost { why: String, listened: bool },
}

/// The listener: connect, `LISTEN`, forward notifications; on a loss, tick, back off and do it
/// again, until stopped.
async fn listen(
    mut config: Config,
    poll: Duration,
    sender: broadcast::Sender<Wake>,
    stop: CancellationToken,
) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    // So that an operator looking at `pg_stat_activity` sees what the idle session is.
    if config.get_application_name().is_none() {
        config.application_name(APPLICATION_NAME);
    }
    let place = place(&config);
    let mut backoff = BACKOFF_START;
    // Warned about the current outage (one warning per outage).
    let mut warned = false;
    loop {
        let mut listening = || {
            backoff = BACKOFF_START;
            if warned {
                tracing::info!(database = %place, "the wake-up connection to PostgreSQL is back");
                warned = false;
            }
            // Whatever was notified while nobody listened is read from the tables now.
            send(&sender, Wake::Tick);
        };
        match session(&config, &sender, &stop, &mut listening).await {
            Ended::Stopped => return,
            Ended::Lost { why, listened } => {
                if listened {
                    // Consumers re-read the tables: a wake-up may have been lost with the connection.
                    send(&sender, Wake::Tick);
                }
                if warned {
                    tracing::debug!(database = %place, error = %why, "wake-up connection still down");
                } else {
                    tracing::warn!(
                        database = %place,
                        error = %why,
                        "{} the wake-up connection to PostgreSQL; reconnecting, and reading the \
                         tables every {} meanwhile",
                        if listened { "lost" } else { "cannot open" },
                        humantime::format_duration(poll.max(MIN_POLL)),
                    );
                    warned = true;
                }
            }
        }
        // A little jitter (±10%) so that nodes that lost one server do not all come back at once.
        let wait = backoff.mul_f64(0.9 + 0.2 * fastrand::f64());
        backoff = (backoff * 2).min(BACKOFF_MAX);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One connection: connect, `LISTEN` (then call `listening`), forward notifications and ping until
/// the connection ends or the listener is stopped (then close it cleanly).
async fn session(
    config: &Config,
    sender: &broadcast::Sender<Wake>,
    stop: &CancellationToken,
    listening: &mut impl FnMut(),
) -> Ended {
    let lost = |why: String, listened: bool| Ended::Lost { why, listened };
    let (client, mut connection) = tokio::select! {
        _ = stop.cancelled() => return Ended::Stopped,
        made = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls)) => match made {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return lost(opc_pg::message(&e), false),
            Err(_) => return lost(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()), false),
        },
    };
    // The statement runs on the client; the connection must be read meanwhile for it to complete.
    let statement = format!("LISTEN {CHANNEL}");
    let listened = tokio::select! {
        _ = stop.cancelled() => None,
        done = client.batch_execute(&statement) => Some(done.map_err(|e| opc_pg::message(&e))),
        why = drive(&mut connection, sender) => Some(Err(why)),
    };
    let ended = match listened {
        None => Ended::Stopped,
        Some(Err(why)) => lost(why, false),
        Some(Ok(())) => {
            listening();
            tokio::select! {
                _ = stop.cancelled() => Ended::Stopped,
                why = drive(&mut connection, sender) => lost(why, true),
                why = ping(&client) => lost(why, true),
            }
        }
    };
    if matches!(ended, Ended::Stopped) {
        close(client, connection).await;
    }
    ended
}

/// Read the connection, turning notifications into wake-ups, until it ends; why it ended.
async fn drive(
    connection: &mut Connection<Socket, tokio_postgres::tls::NoTlsStream>,
    sender: &broadcast::Sender<Wake>,
) -> String {
    loop {
        match poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notification(n))) => match parse(n.payload()) {
                Some(wake) => send(sender, wake),
                None => tracing::debug!(
                    channel = n.channel(),
                    payload = preview(n.payload()),
                    "ignoring a wake-up this build does not know"
                ),
            },
            Some(Ok(AsyncMessage::Notice(notice))) => {
                tracing::debug!(notice = %notice, "PostgreSQL notice on the wake-up connection");
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return opc_pg::message(&e),
            None => return "the server closed the connection".to_string(),
        }
    }
}

/// The start of `payload`, for a log line (a relayed payload may be kilobytes long).
fn preview(payload: &str) -> &str {
    const PREVIEW: usize = 64;
    match payload.char_indices().nth(PREVIEW) {
        Some((end, _)) => &payload[..end],
        None => payload,
    }
}

/// Ping the connection every [`PING_EVERY`]; returns why it stopped answering.
async fn ping(client: &Client) -> String {
    loop {
        tokio::time::sleep(PING_EVERY).await;
        match tokio::time::timeout(PING_TIMEOUT, client.simple_query("")).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return opc_pg::message(&e),
            Err(_) => {
                return format!(
                    "the server did not answer a ping within {}s",
                    PING_TIMEOUT.as_secs()
                );
            }
        }
    }
}

/// Close the connection cleanly: dropping the client asks the connection to end the session, and
/// the connection finishes once that is sent (bounded: a dead server is not waited for).
async fn close(
    client: Client,
    mut connection: Connection<Socket, tokio_postgres::tls::NoTlsStream>,
) {
    drop(client);
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, &mut connection).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_the_wake_ups() {
        assert_eq!(parse("work"), Some(Wake::Work));
        assert_eq!(parse("ended:7"), Some(Wake::RootEnded(7)));
        assert_eq!(parse("approval:12"), Some(Wake::Approval(12)));
        assert_eq!(parse("cancelled:3"), Some(Wake::Cancelled(3)));
        assert_eq!(parse("config:5"), Some(Wake::Config(5)));
        assert_eq!(parse("ended:-1"), Some(Wake::RootEnded(-1)));
        assert_eq!(
            parse(r#"events:{"a":"b:c"}"#),
            Some(Wake::Events(r#"{"a":"b:c"}"#.to_string()))
        );
        assert_eq!(parse("events:"), Some(Wake::Events(String::new())));
    }

    #[test]
    fn payloads_this_build_does_not_know_are_ignored() {
        for unknown in [
            "",
            "tick",
            "Work",
            "work:1",
            "ended",
            "ended:",
            "ended:x",
            "ended:7:8",
            "ended: 7",
            "approval:99999999999999999999",
            "moved:7",
            ":7",
            "Events:x",
            "config:",
            "config:x",
            "events",
        ] {
            assert_eq!(parse(unknown), None, "{unknown:?}");
        }
    }

    #[test]
    fn every_notified_wake_up_reads_back_as_itself() {
        for wake in [
            Wake::Work,
            Wake::RootEnded(41),
            Wake::Approval(i64::MAX),
            Wake::Cancelled(0),
            Wake::Config(9),
            Wake::Events("ended:7".to_string()),
        ] {
            let text = payload(&wake).unwrap_or_else(|| panic!("{wake:?} has a payload"));
            assert_eq!(parse(&text), Some(wake));
        }
        assert_eq!(payload(&Wake::Tick), None, "a tick is never notified");
    }

    #[test]
    fn previews_are_short_and_cut_between_characters() {
        assert_eq!(preview("moved:7"), "moved:7");
        let long = "é".repeat(100);
        assert_eq!(preview(&long), "é".repeat(64));
    }

    #[tokio::test]
    async fn ticks_come_every_poll_and_stop_with_the_listener() {
        // An address where nothing listens: the listener keeps retrying, the ticker ticks regardless.
        let config: Config = "postgres://nobody@127.0.0.1:1/none"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let wakes = Wakes::spawn(config, Duration::from_millis(50));
        let mut rx = wakes.subscribe();
        for _ in 0..3 {
            let wake = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no tick within 10s"));
            assert_eq!(wake.ok(), Some(Wake::Tick));
        }
        drop(wakes);
        // Both tasks end, dropping their senders: the channel closes (after any ticks in flight).
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match rx.recv().await {
                    Err(broadcast::error::RecvError::Closed) => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the listener's tasks did not stop");
    }

    #[test]
    fn start_refuses_tls_and_never_shows_the_url() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let _guard = rt.enter();
        let err = WakeListener::start(
            "postgres://u:s3cret@db.example:5433/org?sslmode=require",
            Duration::from_secs(1),
        )
        .err()
        .unwrap_or_else(|| panic!("sslmode=require is refused"));
        let text = err.to_string();
        assert!(text.contains("db.example:5433/org"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        let err = WakeListener::start("mysql://u:s3cret@db/x", Duration::from_secs(1))
            .err()
            .unwrap_or_else(|| panic!("not a PostgreSQL URL"));
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn start_needs_a_runtime() {
        let err = WakeListener::start("postgres://u@127.0.0.1:1/x", Duration::from_secs(1))
            .err()
            .unwrap_or_else(|| panic!("no runtime here"));
        assert!(err.to_string().contains("Tokio runtime"), "{err}");
    }
}
