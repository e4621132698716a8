//! `weir lists add|remove|list`: the admin API's runtime list entries from the
//! command line (as `weir override` does for overrides).

use axum::http::Method;
use percent_encoding::utf8_percent_encode;

use super::command::{AdminAccess, CommandError, SEGMENT};

/// Add, remove or list the allow and deny list entries set at runtime on a running
/// weir (its admin API).
///
/// A runtime entry adds to the configuration's global `lists:` (the union): a `deny`
/// entry refuses the client (403) before any rule counts it, an `allow` entry lets it
/// skip every rule. KIND is `client_ip` (an address or a CIDR block, e.g.
/// 203.0.113.0/24) or `api_key` (read by the identity the configuration's list names,
/// default `api_key`). Entries outlive reloads and apply on every instance sharing
/// the store within a second (on the memory store, in that process, kept in
/// `overrides.file`). Only runtime entries are removed here.
///
/// The admin listener's address comes from --admin (or WEIR_ADMIN_URL), the admin
/// token from WEIR_ADMIN_TOKEN or --token-file. Prints the API's JSON answer; exits 1
/// when it refuses (the problem's detail on standard error).
#[derive(Debug, clap::Args)]
pub struct ListsArgs {
    #[command(flatten)]
    access: AdminAccess,
    #[command(subcommand)]
    command: ListsCommand,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
enum ListsCommand {
    /// Add (or replace) ENTRY to LIST as a KIND.
    Add {
        /// `allow` or `deny`.
        list: String,
        /// `client_ip` or `api_key`.
        kind: String,
        /// The address, CIDR block or API key.
        entry: String,
        /// When it ends (RFC 3339, e.g. 2030-01-01T00:00:00Z); default: when removed.
        #[arg(long)]
        expires_at: Option<String>,
        /// Why it is set (logged, shown on the status page).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Remove the runtime ENTRY of LIST.
    Remove {
        /// `allow` or `deny`.
        list: String,
        /// `client_ip` or `api_key`.
        kind: String,
        /// The address, CIDR block or API key (any spelling of it).
        entry: String,
    },
    /// List the runtime entries in force.
    List {
        /// Only this list's (`allow` or `deny`).
        #[arg(long)]
        list: Option<String>,
    },
}

/// Runs `weir lists ...`: prints the admin API's answer.
pub fn run(args: &ListsArgs) -> Result<(), CommandError> {
    let item = |list: &str, kind: &str, entry: &str| {
        format!(
            "/admin/api/lists/{}/{}/{}",
            utf8_percent_encode(list, SEGMENT),
            utf8_percent_encode(kind, SEGMENT),
            utf8_percent_encode(entry, SEGMENT)
        )
    };
    let (method, path, body) = match &args.command {
        ListsCommand::Add {
            list,
            kind,
            entry,
            expires_at,
            reason,
        } => {
            let mut body = serde_json::json!({});
            if let Some(at) = expires_at {
                body["expires_at"] = at.clone().into();
            }
            if let Some(reason) = reason {
                body["reason"] = reason.clone().into();
            }
            (Method::PUT, item(list, kind, entry), Some(body.to_string()))
        }
        ListsCommand::Remove { list, kind, entry } => {
            (Method::DELETE, item(list, kind, entry), None)
        }
        ListsCommand::List { list } => {
            let path = match list {
                Some(list) => format!(
                    "/admin/api/lists?list={}",
                    utf8_percent_encode(list, SEGMENT)
                ),
                None => "/admin/api/lists".to_owned(),
            };
            (Method::GET, path, None)
        }
    };
    args.access.send(method, &path, body)
}
