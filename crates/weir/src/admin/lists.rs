//! The admin API's list entries set at runtime: an address block or an API key added
//! to the global allow or deny list, beside the configuration's (the union).
//!
//! - `PUT /admin/api/lists/{list}/{kind}/{entry}` with an optional
//!   `{"reason", "expires_at"}` adds (or replaces) one;
//! - `DELETE /admin/api/lists/{list}/{kind}/{entry}` removes a runtime one (one of the
//!   configuration is a 409: it is removed there);
//! - `GET /admin/api/lists[?list=allow|deny]` lists those in force.
//!
//! `{list}` is `allow` or `deny`; `{kind}` is `client_ip` (an address or a CIDR block,
//! its `/` percent-encoded or not) or `api_key`. The entry is read canonically and the
//! answer gives it so. They are kept as overrides are (the shared store, else the
//! overrides file). Each change is an audit line (target `weir::audit`).

use std::net::SocketAddr;

use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::overrides::{expiry, rfc3339};
use super::{Admin, authorize, query};
use crate::edge::contract::{
    BodyTooLarge, InvalidRequest, ListEntryConfigured, StoreUnavailable, Unauthorized,
    UnknownListEntry,
};
use crate::edge::{Problem, json};
use crate::engine::{EntryChange, ListEntry, ListError, MAX_REASON_CHARS, list_name};

/// Where an entry's path starts.
const PREFIX: &str = "/admin/api/lists/";

/// The largest body read.
const MAX_ENTRY_BODY_BYTES: usize = 4096;

/// What may come with an entry.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EntryBody {
    /// Why it is set: kept with it, logged and shown on the status page (at most 256
    /// characters).
    #[schema(example = "credential stuffing from this block")]
    reason: Option<String>,
    /// When it ends (RFC 3339, to the second, in the future). Default: when removed.
    #[schema(example = "2030-01-01T00:00:00Z")]
    expires_at: Option<String>,
}

/// A list entry set at runtime.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EntryView {
    /// `allow` or `deny`.
    #[schema(example = "deny")]
    list: &'static str,
    /// `client_ip` or `api_key`.
    #[schema(example = "client_ip")]
    kind: &'static str,
    /// The entry, canonical (what to send to remove it).
    #[schema(example = "203.0.113.0/24")]
    entry: String,
    /// Why it was set.
    reason: String,
    /// When it ends (RFC 3339); null: when removed.
    expires_at: Option<String>,
    /// When it was set (RFC 3339).
    set_at: String,
}

/// What a change did.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EntryChangeView {
    /// The runtime entry before (null: none).
    before: Option<EntryView>,
    /// The runtime entry after (null: removed).
    after: Option<EntryView>,
}

/// Adds an entry to the global allow or deny list, beside the configuration's;
/// applied by every instance within a second. Logged as an audit line.
#[utoipa::path(put, path = "/admin/api/lists/{list}/{kind}/{entry}", operation_id = "set_list_entry", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("list" = String, Path, description = "`allow` or `deny`.", example = "deny"),
        ("kind" = String, Path, description = "`client_ip` or `api_key`.", example = "client_ip"),
        ("entry" = String, Path, description = "An address or CIDR block (`/` percent-encoded), or an API key.", example = "203.0.113.0/24"),
    ),
    request_body(content = Option<EntryBody>, description = "Optional: why, and until when."),
    responses(
        (status = 200, description = "Set (replacing the same entry set at runtime, if any).", body = EntryChangeView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 413, response = BodyTooLarge),
        (status = 503, response = StoreUnavailable),
    ))]
pub(super) async fn set(
    State(admin): State<Admin>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = async {
        let (list, kind, entry) = path_parts(uri.path()).map_err(IntoResponse::into_response)?;
        let bytes = axum::body::to_bytes(body, MAX_ENTRY_BODY_BYTES)
            .await
            .map_err(|_| Problem::body_too_large(MAX_ENTRY_BODY_BYTES).into_response())?;
        // No body, or JSON `null`: neither a reason nor an expiry.
        let text = bytes.trim_ascii();
        let body = if text.is_empty() || text == b"null" {
            EntryBody {
                reason: None,
                expires_at: None,
            }
        } else {
            json::read::<EntryBody>(
                &bytes,
                "a list entry",
                r#"{"reason": "abuse", "expires_at": "2030-01-01T00:00:00Z"}"#,
            )
            .map_err(IntoResponse::into_response)?
        };
        let expires_at = body
            .expires_at
            .as_deref()
            .map(expiry)
            .transpose()
            .map_err(IntoResponse::into_response)?;
        let reason = body.reason.unwrap_or_default();
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(Problem::invalid_request(format!(
                "`reason`: at most {MAX_REASON_CHARS} characters"
            ))
            .into_response());
        }
        let engine = admin.engine.current();
        let changed = engine
            .set_list_entry(&list, &kind, &entry, &reason, expires_at)
            .await
            .map_err(refusal)?;
        audit(&changed, peer, engine.overrides().now_secs(), "set");
        Ok(Json(change(changed)).into_response())
    };
    answer.await.unwrap_or_else(|refused: Response| refused)
}

/// Removes an entry set at runtime (one of the configuration is removed there: 409);
/// every instance stops applying it within a second. Logged as an audit line.
#[utoipa::path(delete, path = "/admin/api/lists/{list}/{kind}/{entry}", operation_id = "delete_list_entry", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("list" = String, Path, description = "`allow` or `deny`.", example = "deny"),
        ("kind" = String, Path, description = "`client_ip` or `api_key`.", example = "client_ip"),
        ("entry" = String, Path, description = "The entry (any spelling of it; `/` percent-encoded).", example = "203.0.113.0/24"),
    ),
    responses(
        (status = 200, description = "Removed.", body = EntryChangeView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownListEntry),
        (status = 409, response = ListEntryConfigured),
        (status = 503, response = StoreUnavailable),
    ))]
pub(super) async fn delete(
    State(admin): State<Admin>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = async {
        let (list, kind, entry) = path_parts(uri.path()).map_err(IntoResponse::into_response)?;
        let engine = admin.engine.current();
        let changed = engine
            .delete_list_entry(&list, &kind, &entry)
            .await
            .map_err(refusal)?;
        audit(&changed, peer, engine.overrides().now_secs(), "removed");
        Ok(Json(change(changed)).into_response())
    };
    answer.await.unwrap_or_else(|refused: Response| refused)
}

/// The list entries set at runtime in force (of one list, with `list`).
#[utoipa::path(get, path = "/admin/api/lists", operation_id = "list_list_entries", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("list" = Option<String>, Query, description = "Only this list's: `allow` or `deny`.", example = "deny"),
    ),
    responses(
        (status = 200, description = "The runtime entries in force, by list, kind and entry.", body = Vec<EntryView>),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
    ))]
pub(super) async fn list(State(admin): State<Admin>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = || -> Result<Response, Problem> {
        let query = query(&uri, &["list"])?;
        let list = query
            .get("list")
            .map(|l| list_name(l))
            .transpose()
            .map_err(|e| Problem::invalid_request(e.to_string()))?;
        let engine = admin.engine.current();
        let views: Vec<EntryView> = engine
            .overrides()
            .entry_list(list)
            .into_iter()
            .map(view)
            .collect();
        Ok(Json(views).into_response())
    };
    answer().unwrap_or_else(IntoResponse::into_response)
}

/// The list, the kind and the entry of a path, each percent-decoded once (an entry
/// may hold `/`, written `%2F` or as it is: the entry is the rest of the path).
fn path_parts(path: &str) -> Result<(String, String, String), Problem> {
    let rest = path.strip_prefix(PREFIX).unwrap_or_default();
    let shape = || Problem::invalid_request("the path is /admin/api/lists/{list}/{kind}/{entry}");
    let (list, rest) = rest.split_once('/').ok_or_else(shape)?;
    let (kind, entry) = rest.split_once('/').ok_or_else(shape)?;
    let decode = |text: &str, name: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|s| s.into_owned())
            .ok()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Problem::invalid_request(format!(
                    "`{name}` must be non-empty UTF-8, percent-encoded"
                ))
            })
    };
    Ok((
        decode(list, "list")?,
        decode(kind, "kind")?,
        decode(entry, "entry")?,
    ))
}

/// The answer to a change the engine refused.
fn refusal(error: ListError) -> Response {
    match error {
        ListError::Invalid { .. } => Problem::invalid_request(error.to_string()).into_response(),
        ListError::Configured(_) => Problem::configured_entry(error.to_string()).into_response(),
        ListError::NotSet => Problem::no_list_entry().into_response(),
        ListError::Unavailable(error) => {
            tracing::warn!(%error, "admin: the list entry could not be kept");
            Problem::store_unavailable().into_response()
        }
    }
}

/// The audit line of a change.
fn audit(changed: &EntryChange, peer: SocketAddr, at: u64, what: &str) {
    let Some(entry) = changed.after.as_ref().or(changed.before.as_ref()) else {
        return;
    };
    tracing::info!(
        target: "weir::audit",
        list = entry.list.as_str(),
        kind = entry.kind.as_str(),
        entry = %entry.entry.escape_debug(),
        reason = %entry.reason.escape_debug(),
        expires_at = %entry.expires_at.map_or_else(|| "never".to_owned(), rfc3339),
        replaced = changed.before.is_some() && changed.after.is_some(),
        at = %rfc3339(at),
        by = %peer,
        "admin: list entry {what}"
    );
}

fn change(changed: EntryChange) -> EntryChangeView {
    EntryChangeView {
        before: changed.before.map(view),
        after: changed.after.map(view),
    }
}

fn view(entry: ListEntry) -> EntryView {
    EntryView {
        list: entry.list.as_str(),
        kind: entry.kind.as_str(),
        entry: entry.entry,
        reason: entry.reason,
        expires_at: entry.expires_at.map(rfc3339),
        set_at: rfc3339(entry.set_at),
    }
}

#[cfg(test)]
mod tests {
    use super::path_parts;

    #[test]
    fn an_entry_may_hold_slashes_written_either_way() {
        let found = |path: &str| path_parts(path).ok();
        let block = Some((
            "deny".to_owned(),
            "client_ip".to_owned(),
            "2001:db8::/64".to_owned(),
        ));
        assert_eq!(
            found("/admin/api/lists/deny/client_ip/2001:db8::%2F64"),
            block
        );
        assert_eq!(
            found("/admin/api/lists/deny/client_ip/2001:db8::/64"),
            block
        );
        assert_eq!(found("/admin/api/lists/deny/client_ip/"), None);
        assert_eq!(found("/admin/api/lists/deny/client_ip"), None);
        assert_eq!(found("/admin/api/lists/deny/api_key/%ff"), None);
    }
}
