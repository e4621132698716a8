//! `weir override set|delete|list`: the admin API's overrides from the command line,
//! over HTTP/1.1 to a running weir's admin listener.

use std::path::PathBuf;
use std::time::Duration;

use axum::http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// How long a call may take, connecting included.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What a path segment keeps as it is (RFC 3986 unreserved); the rest is encoded (a
/// key's `/`, `&`, `%` and `=` included).
pub(super) const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Set, delete or list the overrides of a running weir (its admin API).
///
/// An override is a limit for one key of one rule, set at runtime: it wins over the
/// key's plan and the rule's limit (override > plans file custom limit > plan > rule)
/// until it expires or is deleted, outlives reloads, and applies on every instance
/// sharing the store within a second (on the memory store, in that process, kept in
/// `overrides.file`). The KEY is the rule's key as weir writes it, e.g.
/// `client_ip=203.0.113.7` or `api_key=k1&client_ip=203.0.113.7` (`weir explain`
/// shows it), or for a rule of the decision API alone the key sent to /v1/check.
/// For an Envoy descriptor limit, the RULE is its `rate_limit.name` and the KEY the
/// domain and the descriptor's entries, `domain|key=value|key=value`.
///
/// The admin listener's address comes from --admin (or WEIR_ADMIN_URL), the admin
/// token from WEIR_ADMIN_TOKEN or --token-file (never from a flag, which other users
/// can read in the process list). Prints the API's JSON answer; exits 1 when it
/// refuses (the problem's detail on standard error).
#[derive(Debug, clap::Args)]
pub struct OverrideArgs {
    #[command(flatten)]
    access: AdminAccess,
    #[command(subcommand)]
    command: OverrideCommand,
}

/// Where the admin API is and the token it is called with: the flags `weir override`
/// and `weir lists` share.
#[derive(Debug, clap::Args)]
pub(super) struct AdminAccess {
    /// The admin listener, e.g. http://127.0.0.1:9090 (plain HTTP).
    #[arg(
        long,
        env = "WEIR_ADMIN_URL",
        default_value = "http://127.0.0.1:9090",
        global = true
    )]
    admin: String,
    /// A file whose first line is the admin token (else WEIR_ADMIN_TOKEN).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
}

impl AdminAccess {
    /// Sends one call to the admin API (see [`send`]).
    pub(super) fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<(), CommandError> {
        send(&self.admin, self.token_file.as_deref(), method, path, body)
    }
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
enum OverrideCommand {
    /// Set (or replace) the override of KEY under RULE.
    Set {
        /// The rule's name (or an Envoy descriptor limit's `rate_limit.name`).
        rule: String,
        /// The key, as weir writes it (e.g. `client_ip=203.0.113.7`).
        key: String,
        /// The limit per period.
        #[arg(long)]
        limit: u64,
        /// The period (`10s`, `1m`, `1h`, `1d`); default: the rule's.
        #[arg(long)]
        period: Option<String>,
        /// The capacity of a token_bucket, gcra or leaky_bucket rule; default: the
        /// limit.
        #[arg(long)]
        burst: Option<u64>,
        /// When it ends (RFC 3339, e.g. 2030-01-01T00:00:00Z); default: when deleted.
        #[arg(long)]
        expires_at: Option<String>,
        /// Why it is set (logged, shown on the status page).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Delete the override of KEY under RULE.
    Delete {
        /// The rule's name (or an Envoy descriptor limit's `rate_limit.name`).
        rule: String,
        /// The key, as weir writes it.
        key: String,
    },
    /// List the overrides in force.
    List {
        /// Only this rule's.
        #[arg(long)]
        rule: Option<String>,
    },
}

/// Why `weir override` (or `weir lists`) failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command line or the token is wrong.
    #[error("{0}")]
    Usage(String),
    /// The admin listener could not be reached.
    #[error("cannot reach the admin API at {url}: {why}")]
    Unreachable {
        /// The admin listener.
        url: String,
        /// Why.
        why: String,
    },
    /// The admin API refused (its problem's detail).
    #[error("the admin API answered {status}: {detail}")]
    Refused {
        /// The answer's status.
        status: u16,
        /// What it said.
        detail: String,
    },
}

/// Runs `weir override ...`: prints the admin API's answer.
pub fn run(args: &OverrideArgs) -> Result<(), CommandError> {
    let (method, path, body) = match &args.command {
        OverrideCommand::Set {
            rule,
            key,
            limit,
            period,
            burst,
            expires_at,
            reason,
        } => {
            let mut body = serde_json::json!({ "limit": limit });
            let fields = [
                ("period", period.clone().map(serde_json::Value::from)),
                ("burst", burst.map(serde_json::Value::from)),
                (
                    "expires_at",
                    expires_at.clone().map(serde_json::Value::from),
                ),
                ("reason", reason.clone().map(serde_json::Value::from)),
            ];
            for (name, value) in fields {
                if let Some(value) = value {
                    body[name] = value;
                }
            }
            (Method::PUT, item(rule, key), Some(body.to_string()))
        }
        OverrideCommand::Delete { rule, key } => (Method::DELETE, item(rule, key), None),
        OverrideCommand::List { rule } => {
            let path = match rule {
                Some(rule) => format!(
                    "/admin/api/overrides?rule={}",
                    utf8_percent_encode(rule, SEGMENT)
                ),
                None => "/admin/api/overrides".to_owned(),
            };
            (Method::GET, path, None)
        }
    };
    args.access.send(method, &path, body)
}

/// Sends one call to the admin API at `admin` (the token from `token_file`, else
/// `WEIR_ADMIN_TOKEN`) and prints its JSON answer; a refusal is an error.
fn send(
    admin: &str,
    token_file: Option<&std::path::Path>,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Result<(), CommandError> {
    let token = token(token_file)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::Usage(format!("cannot start: {e}")))?;
    let (status, text) = runtime.block_on(async {
        tokio::time::timeout(CALL_TIMEOUT, call(admin, method, path, &token, body))
            .await
            .map_err(|_| CommandError::Unreachable {
                url: admin.to_owned(),
                why: format!("no answer within {CALL_TIMEOUT:?}"),
            })?
    })?;
    if (200..300).contains(&status) {
        let pretty = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or(text);
        println!("{pretty}");
        return Ok(());
    }
    let detail = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["detail"].as_str().map(str::to_owned))
        .unwrap_or(text);
    Err(CommandError::Refused { status, detail })
}

/// The path of one override.
fn item(rule: &str, key: &str) -> String {
    format!(
        "/admin/api/overrides/{}/{}",
        utf8_percent_encode(rule, SEGMENT),
        utf8_percent_encode(key, SEGMENT)
    )
}

/// The admin token: the first line of `file`, else `WEIR_ADMIN_TOKEN`.
fn token(file: Option<&std::path::Path>) -> Result<String, CommandError> {
    let token = match file {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| CommandError::Usage(format!("cannot read `{}`: {e}", file.display())))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        None => std::env::var("WEIR_ADMIN_TOKEN").map_err(|_| {
            CommandError::Usage("no admin token: set WEIR_ADMIN_TOKEN or give --token-file".into())
        })?,
    };
    let token = token.trim().to_owned();
    if token.is_empty() || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(CommandError::Usage(
            "the admin token is empty or holds spaces or control characters".into(),
        ));
    }
    Ok(token)
}

/// One request to the admin listener at `url`: the status and the body.
async fn call(
    url: &str,
    method: Method,
    path: &str,
    token: &str,
    body: Option<String>,
) -> Result<(u16, String), CommandError> {
    let unreachable = |why: String| CommandError::Unreachable {
        url: url.to_owned(),
        why,
    };
    let authority = url
        .strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/'))
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .ok_or_else(|| {
            CommandError::Usage(format!(
                "--admin must be http://HOST:PORT (the admin listener), got `{url}`"
            ))
        })?;
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let (mut sender, connection) = http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, authority)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let request = request
        .body(Full::new(bytes::Bytes::from(body.unwrap_or_default())))
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| unreachable(e.to_string()))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}
