//! An upstream that answers with what it received, as JSON: to see what weir forwards.

use axum::extract::Request;
use axum::response::IntoResponse;
use serde_json::json;

/// Echoes what it received, as JSON.
pub(crate) async fn echo(request: Request) -> impl IntoResponse {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let header = |name: &str| {
        let all: Vec<&str> = parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        (!all.is_empty()).then(|| all.join(", "))
    };
    axum::Json(json!({
        "method": parts.method.as_str(),
        "host": header("host"),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "x-forwarded-for": header("x-forwarded-for"),
        "x-real-ip": header("x-real-ip"),
        "x-forwarded-proto": header("x-forwarded-proto"),
        "forwarded": header("forwarded"),
        "body": String::from_utf8_lossy(&body),
    }))
}

/// Starts the echo on a free loopback port.
pub(crate) async fn start() -> std::net::SocketAddr {
    let app = axum::Router::new().fallback(echo);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
