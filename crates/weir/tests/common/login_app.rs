//! A login app for in-process tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use tokio::sync::watch;

/// A login app that holds every answer until told to go: so that a test can have many
/// attempts in flight at once, as against an app hashing passwords slowly. The
/// password `right` logs in (200); `status-N` answers N; anything else is a 401.
pub(crate) struct App {
    pub addr: SocketAddr,
    arrived: Arc<AtomicUsize>,
    go: watch::Sender<bool>,
}

impl App {
    pub(crate) async fn start() -> Self {
        let arrived = Arc::new(AtomicUsize::new(0));
        let (go, gate) = watch::channel(true);
        let count = Arc::clone(&arrived);
        let app = Router::new().route(
            "/login",
            post(move |body: String| {
                let (count, mut gate) = (Arc::clone(&count), gate.clone());
                async move {
                    count.fetch_add(1, Ordering::SeqCst);
                    let _ = gate.wait_for(|open| *open).await;
                    let password = body.split("\"password\":\"").nth(1).unwrap_or("");
                    let password = password.split('"').next().unwrap_or("");
                    match password.strip_prefix("status-") {
                        Some(code) => StatusCode::from_u16(code.parse().unwrap()).unwrap(),
                        None if password == "right" => StatusCode::OK,
                        None => StatusCode::UNAUTHORIZED,
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, arrived, go }
    }

    pub(crate) fn hold(&self) {
        self.go.send_replace(false);
    }

    pub(crate) fn release(&self) {
        self.go.send_replace(true);
    }

    pub(crate) fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }
}
