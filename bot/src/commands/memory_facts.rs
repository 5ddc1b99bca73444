//! `opc memory facts AGENT`: an agent's long-term facts as stored, current by default, as the agent
//! believed them at a past time (`--at`), as true in the world at a time (`--valid-at`), or every
//! version ever recorded (`--history`).
//!
//! Read-only and safe beside a running `opc run`: the store is opened with
//! [`FactStore::open_read_only`] (no migration, WAL readers beside the engine's writer), and nothing
//! is created when the database does not exist yet. What it prints is the stored truth, whether or
//! not the agent has `memory.archival` on today (facts recorded while it was on stay, and are listed
//! with a note). Times on the command line are RFC 3339 or a date (its start, UTC); times printed
//! are RFC 3339 in UTC.

use std::path::Path;
use std::process::ExitCode;

use opc_memory::embed::EmbedSlot;
// TIME on the command line (RFC 3339 with an offset, or a date: its start, UTC), and times printed
// (RFC 3339, UTC): the facts store's own, as the console's are, so what is typed reads as it is stored.
use opc_memory::facts::time::{format_time as rfc3339, parse_time};
use opc_memory::facts::{FactStore, FactVersion, View};

use crate::term::{eprint, print};

/// Options of `opc memory facts`.
#[derive(Debug, clap::Args)]
pub struct FactsArgs {
    /// The agent whose facts (its own namespace, `agent/<id>`).
    pub agent: String,
    /// The versions the agent believed at TIME (system time: recorded by then and not yet replaced).
    /// TIME is RFC 3339 (`2026-05-03T14:00:00Z`, `2026-05-03T16:00:00+02:00`) or a date
    /// (`2026-05-03`, its start in UTC).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub at: Option<i64>,
    /// The current versions true in the world at TIME (their valid-from/valid-to window holds it; an
    /// open end holds every time). TIME as for `--at`.
    #[arg(long, value_name = "TIME", value_parser = parse_time, conflicts_with = "at")]
    pub valid_at: Option<i64>,
    /// Every version ever recorded, closed ones included, grouped by fact.
    #[arg(long, conflicts_with_all = ["at", "valid_at"])]
    pub history: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FactsFormat::Text)]
    pub format: FactsFormat,
}

/// Output format of `opc memory facts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FactsFormat {
    /// One block per version: text, subject, valid from/to, recorded/invalidated, reason, source.
    Text,
    /// One JSON object: `{"facts": [{id, fact_id, text, subject, valid_from, valid_to,
    /// recorded_at, invalidated_at, reason, source, agent, task, conversation}]}`.
    Json,
}

impl FactsArgs {
    /// The view the flags ask for (clap has already refused conflicting flags).
    fn view(&self) -> View {
        match (self.history, self.at, self.valid_at) {
            (true, _, _) => View::History,
            (_, Some(t), _) => View::BelievedAt(t),
            (_, _, Some(t)) => View::ValidAt(t),
            _ => View::Current,
        }
    }
}

/// `opc memory facts AGENT …`.
pub fn facts(config: &Path, args: FactsArgs) -> ExitCode {
    let loaded = match crate::setup::load_config(config) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let Some(agent) = loaded.config.agents.get(&args.agent) else {
        eprint(&format!(
            "error: there is no agent `{}` in {}; agents: {}\n",
            args.agent,
            config.display(),
            loaded.org.agent_ids().collect::<Vec<_>>().join(", ")
        ));
        return ExitCode::from(1);
    };
    if !agent.memory.archival {
        eprint(&format!(
            "note: `{}` has archival memory off (`agents.{}.memory.archival`): no new facts are recorded; listing what is stored\n",
            args.agent, args.agent
        ));
    }
    let view = args.view();
    let database = match crate::setup::database(&loaded) {
        Ok(database) => database,
        Err(code) => return code,
    };
    let exists = match &database {
        crate::setup::Database::Sqlite(path) => path.exists(),
        crate::setup::Database::Postgres { .. } => true,
    };
    let versions = if exists {
        let opened = match &database {
            crate::setup::Database::Sqlite(path) => {
                FactStore::open_read_only(path, EmbedSlot::new())
            }
            crate::setup::Database::Postgres { url, .. } => opc_pg::Blocking::connect(url, "facts")
                .map_err(opc_memory::facts::FactError::from)
                .and_then(|conn| FactStore::open_postgres_read_only(conn, EmbedSlot::new())),
        };
        let store = match opened {
            Ok(store) => store,
            Err(e) => {
                eprint(&format!("error: {e}\n"));
                return ExitCode::from(2);
            }
        };
        match store.list(&opc_memory::blocks::agent_namespace(&args.agent), view) {
            Ok(versions) => versions,
            Err(e) => {
                eprint(&format!("error: {e}\n"));
                return ExitCode::from(2);
            }
        }
    } else {
        // Nothing was ever stored: say so rather than create a database the engine did not ask for.
        if args.format == FactsFormat::Text
            && let crate::setup::Database::Sqlite(path) = &database
        {
            eprint(&format!(
                "note: {} does not exist yet (it is created when `opc run` or `opc chat` first starts)\n",
                path.display()
            ));
        }
        Vec::new()
    };
    match args.format {
        FactsFormat::Json => print(&format!("{}\n", render_json(&versions))),
        FactsFormat::Text => print(&render_text(&args.agent, view, &versions)),
    }
    ExitCode::SUCCESS
}

/// `{"facts": [...]}`, each version as [`FactVersion::to_json`] renders it.
pub fn render_json(versions: &[FactVersion]) -> serde_json::Value {
    serde_json::json!({ "facts": versions.iter().map(FactVersion::to_json).collect::<Vec<_>>() })
}

/// What the view is, in words, for the empty listing and the header.
fn describe(view: View) -> String {
    match view {
        View::Current => "current".into(),
        View::BelievedAt(t) => format!("believed at {}", rfc3339(t)),
        View::ValidAt(t) => format!("true in the world at {}", rfc3339(t)),
        View::History => "every version".into(),
    }
}

/// One block per version: a head line (fact, version, state), the text, then one line per field.
pub fn render_text(agent: &str, view: View, versions: &[FactVersion]) -> String {
    if versions.is_empty() {
        return format!("No facts of `{agent}` ({}).\n", describe(view));
    }
    let mut out = format!(
        "{} fact version{} of `{agent}` ({}):\n\n",
        versions.len(),
        if versions.len() == 1 { "" } else { "s" },
        describe(view)
    );
    let open = |t: Option<i64>| t.map(rfc3339).unwrap_or_else(|| "open".into());
    for v in versions {
        let state = if v.invalidated_at.is_none() {
            "current"
        } else {
            "closed"
        };
        out.push_str(&format!(
            "fact {} · version {} · {state}\n",
            v.fact_id, v.id
        ));
        for line in v.text.lines() {
            out.push_str(&format!("  | {line}\n"));
        }
        if let Some(subject) = &v.subject {
            out.push_str(&format!("  subject:      {subject}\n"));
        }
        out.push_str(&format!(
            "  valid:        from {} to {}\n",
            open(v.valid_from),
            open(v.valid_to)
        ));
        out.push_str(&format!("  recorded:     {}\n", rfc3339(v.recorded_at)));
        if let Some(at) = v.invalidated_at {
            out.push_str(&format!("  invalidated:  {}\n", rfc3339(at)));
        }
        if let Some(reason) = &v.reason {
            out.push_str(&format!("  reason:       {reason}\n"));
        }
        let mut source = format!("{} by {}", v.source.as_str(), v.agent);
        if let Some(task) = v.task {
            source.push_str(&format!(", task {task}"));
        }
        out.push_str(&format!("  source:       {source}\n"));
        if let Some(conversation) = &v.conversation {
            out.push_str(&format!("  conversation: {conversation}\n"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use opc_memory::facts::Source;

    fn version(id: i64, closed: bool) -> FactVersion {
        FactVersion {
            id,
            fact_id: 7,
            namespace: "agent/ceo".into(),
            text: "The launch is on May 3rd".into(),
            subject: Some("launch".into()),
            predicate: None,
            object: None,
            valid_from: Some(parse_time("2026-05-03").unwrap()),
            valid_to: None,
            recorded_at: parse_time("2026-04-01T10:00:00Z").unwrap(),
            invalidated_at: closed.then(|| parse_time("2026-04-02T09:30:00Z").unwrap()),
            reason: closed.then(|| "moved to May 17th".to_string()),
            source: Source::Agent,
            agent: "ceo".into(),
            task: Some(5),
            conversation: Some("web:c1".into()),
            source_messages: vec![1, 2],
            model: Some("llm/fast".into()),
            ledger_id: Some(9),
        }
    }

    #[test]
    fn times_are_rfc3339_or_a_date_and_bad_ones_say_what_was_expected() {
        assert_eq!(parse_time("1970-01-02"), Ok(86_400_000));
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(1_000));
        assert_eq!(parse_time("1970-01-01T02:00:00+02:00"), Ok(0));
        assert_eq!(parse_time(" 1970-01-01T00:00:00.250Z "), Ok(250));
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-05-03T25:00:00Z",
            "",
            "2026-05-03 14:00",
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(
                e.contains("RFC 3339") || e.contains(bad.trim()),
                "{bad:?}: {e}"
            );
        }
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert!(rfc3339(250).starts_with("1970-01-01T00:00:00.25"));
    }

    #[test]
    fn the_flags_pick_the_view() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: FactsArgs,
        }
        let view = |argv: &[&str]| {
            Cli::try_parse_from(std::iter::once("facts").chain(argv.iter().copied()))
                .map(|c| c.args.view())
        };
        assert_eq!(view(&["ceo"]).unwrap(), View::Current);
        assert_eq!(view(&["ceo", "--history"]).unwrap(), View::History);
        assert_eq!(
            view(&["ceo", "--at", "1970-01-02"]).unwrap(),
            View::BelievedAt(86_400_000)
        );
        assert_eq!(
            view(&["ceo", "--valid-at", "1970-01-01T00:00:01Z"]).unwrap(),
            View::ValidAt(1_000)
        );
        for conflict in [
            &["ceo", "--at", "2026-05-03", "--valid-at", "2026-05-03"][..],
            &["ceo", "--history", "--at", "2026-05-03"],
            &["ceo", "--history", "--valid-at", "2026-05-03"],
        ] {
            let e = view(conflict).err().unwrap();
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
        }
        let e = view(&["ceo", "--at", "soon"]).err().unwrap();
        assert!(e.to_string().contains("is not a time"), "{e}");
    }

    #[test]
    fn text_has_one_block_per_version_and_json_the_contracts_keys() {
        let versions = [version(12, true), version(13, false)];
        let text = render_text("ceo", View::History, &versions);
        assert!(
            text.starts_with("2 fact versions of `ceo` (every version):\n\nfact 7 · version 12 · closed\n  | The launch is on May 3rd\n  subject:      launch\n  valid:        from 2026-05-03T00:00:00Z to open\n  recorded:     2026-04-01T10:00:00Z\n  invalidated:  2026-04-02T09:30:00Z\n  reason:       moved to May 17th\n  source:       agent by ceo, task 5\n  conversation: web:c1\n\nfact 7 · version 13 · current\n"),
            "{text}"
        );
        assert_eq!(
            render_text("ceo", View::BelievedAt(0), &[]),
            "No facts of `ceo` (believed at 1970-01-01T00:00:00Z).\n"
        );
        let json = render_json(&versions);
        let first = json["facts"][0].as_object().unwrap();
        let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "agent",
                "conversation",
                "fact_id",
                "id",
                "invalidated_at",
                "reason",
                "recorded_at",
                "source",
                "subject",
                "task",
                "text",
                "valid_from",
                "valid_to"
            ]
        );
        assert_eq!(json["facts"][1]["invalidated_at"], serde_json::Value::Null);
    }
}
