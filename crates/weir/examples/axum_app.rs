//! weir inside an axum service: the tower layer in front of a small app.
//!
//! Run (from the repository's root): `cargo run --release -p weir --example axum_app`
//! (optionally `-- path/to/rules.yaml`; `examples/axum-app.yaml` by default), then:
//!
//! ```sh
//! curl -i localhost:3000/books/42          # 200, with RateLimit fields; 429 past the quota
//! curl -i localhost:3000/login -d '{"email": "ana@example.com", "password": "x"}' \
//!      -H 'content-type: application/json' # 401; the 6th failure in 15 minutes is a 429
//! ```

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an example: it stops with its message"
)]

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use tower::Layer;
use weir::{Config, WeirLayer};

#[tokio::main]
async fn main() {
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("examples/axum-app.yaml"), PathBuf::from);
    let config = Config::load(&path).unwrap_or_else(|error| panic!("{error}"));
    // The store the configuration names (memory here; Redis works the same), and the
    // engine on it.
    let service = weir::instance(&config).await.expect("the store opens");

    let app = Router::new()
        .route("/books/{id}", get(|| async { "a book\n" }))
        .route(
            "/login",
            post(|body: String| async move {
                if body.contains("\"password\": \"right\"") {
                    (StatusCode::OK, "welcome\n")
                } else {
                    (StatusCode::UNAUTHORIZED, "wrong password\n")
                }
            }),
        );
    // Around the whole router, so that weir decides before routing.
    let app = WeirLayer::new(&config, service.engine.clone()).layer(app);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000")
        .await
        .unwrap();
    println!("listening on http://{}", listener.local_addr().unwrap());
    // The client's address comes from the connection.
    let app = axum::ServiceExt::into_make_service_with_connect_info::<SocketAddr>(app);
    axum::serve(listener, app).await.unwrap();
}
