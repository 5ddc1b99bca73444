//! Naming a database without its password: `host:port/name`.

use postgres::config::Host;

use crate::error::{Fault, PgError};

/// The database `config` names, as `host:port/name` (never the user or the password).
pub fn place(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let name = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{name}")
}

/// Parse a connection URL; the error describes what is wrong without repeating the URL.
/// The config carries OPC's session settings ([`crate::session_options`]).
pub fn parse(url: &str) -> Result<postgres::Config, PgError> {
    let mut config = url.parse::<postgres::Config>().map_err(|e| PgError {
        place: "(the PostgreSQL URL)".to_string(),
        doing: "reading the connection URL",
        fault: Fault::Other,
        // The parser's words name the part it could not read, never the URL's text.
        message: format!(
            "it is not a PostgreSQL URL ({e}); write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE"
        ),
    })?;
    let options = crate::session_options(config.get_options());
    config.options(&options);
    Ok(config)
}
