//! `weir demo-upstream`: a small app for the gateway examples to run in front of, so
//! that they work as they ship (every example's `upstream` is `127.0.0.1:9000`).
//!
//! - `POST /login` (`examples/login.yaml`): a JSON or form body with `password`
//!   [`PASSWORD`] is 200 `{"login":"ok"}`; any other is 401 `{"login":"failed"}`.
//! - `POST /v1/chat/completions` (`examples/ai-tokens.yaml`): 200 with an OpenAI-style
//!   `usage.total_tokens`, the body's `max_tokens` (default 800).
//! - anything else: 200 `{"app":"weir demo-upstream","method":...,"path":...}`.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The one password `POST /login` accepts.
pub const PASSWORD: &str = "correct horse battery staple";

/// The tokens a chat completion says it used when the request names no `max_tokens`.
const DEFAULT_TOKENS: u64 = 800;

/// The demo app.
pub fn router() -> Router {
    Router::new()
        .route("/login", post(login))
        .route("/v1/chat/completions", post(completion))
        .fallback(anything)
}

/// 200 when the body's `password` is [`PASSWORD`], else 401.
async fn login(headers: HeaderMap, body: Bytes) -> Response {
    let password = if is_form(&headers) {
        form_field(&body, "password")
    } else {
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("password")?.as_str().map(str::to_owned))
    };
    if password.as_deref() == Some(PASSWORD) {
        (StatusCode::OK, axum::Json(json!({"login": "ok"}))).into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"login": "failed"})),
        )
            .into_response()
    }
}

/// An answer with the tokens it used: the body's `max_tokens`, else [`DEFAULT_TOKENS`].
async fn completion(body: Bytes) -> Response {
    let tokens = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("max_tokens")?.as_u64())
        .unwrap_or(DEFAULT_TOKENS);
    axum::Json(json!({
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "(a demo answer)"}}],
        "usage": {"total_tokens": tokens},
    }))
    .into_response()
}

async fn anything(method: Method, uri: Uri) -> Response {
    axum::Json(json!({"app": "weir demo-upstream", "method": method.as_str(), "path": uri.path()}))
        .into_response()
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
}

/// The first value of `name` in a form body.
fn form_field(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    text.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (decode(key)? == name).then(|| decode(value)).flatten()
    })
}
