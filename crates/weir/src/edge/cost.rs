//! Settling with the cost the answer states (`cost_from`): from a header at once; from
//! a trailer or a JSON body when the body ends, as it streams to the client (the body
//! is copied, up to [`MAX_COST_BODY`] bytes, only for a JSON field, and at most
//! [`MAX_COST_BODIES`] bytes across every answer copied at once: many large answers at
//! a time cannot take the process's memory).
//!
//! The body's end is seen as the server sees it: its last data frame (hyper stops
//! polling a body of known length there), its trailers, or its end. A client that
//! hangs up before then does not escape the cost: the rest of the answer is read in
//! the background (for at most [`DRAIN_FOR`]) and settles as if sent. A cost that is
//! missing or not a number, a JSON body over the bound or not labelled JSON, and an
//! answer not ended within that time, keep the estimate.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::engine::{CostFrom, Settlement};

/// The largest JSON body read for a cost: a larger one keeps the estimate.
const MAX_COST_BODY: usize = 4 * 1024 * 1024;

/// The most bytes of answers copied at once, across every answer: past it, an answer
/// is not copied (its estimate stays).
const MAX_COST_BODIES: usize = 64 * 1024 * 1024;

/// Bytes of answers being copied now.
static COPYING: AtomicUsize = AtomicUsize::new(0);

/// Takes room for `n` more bytes of copies, or none.
fn take_room(n: usize) -> bool {
    COPYING
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            (used + n <= MAX_COST_BODIES).then_some(used + n)
        })
        .is_ok()
}

/// Settles `settlement` with the answer's status and the costs it states: now when
/// they are all in its headers, else when its body ends (the response returned then
/// carries a body that settles at its end).
///
/// A gRPC answer is settled by its `grpc-status`, not by its HTTP 200 (which every
/// call has, failed or not): from its headers when it has no body, else from its
/// trailers at the body's end. One that never states it keeps its reservations.
pub(crate) async fn settle(settlement: Settlement, response: Response) -> Response {
    let grpc = super::is_grpc(response.headers());
    let stated_status = if grpc {
        super::grpc::outcome_status(response.headers())
    } else {
        Some(response.status().as_u16())
    };
    let (mut json, mut trailer) = (false, false);
    for from in settlement.costs_from() {
        match from {
            CostFrom::ResponseHeader(_) => {}
            CostFrom::Trailer(_) => trailer = true,
            CostFrom::Json(_) => json = true,
        }
    }
    let json = json && is_json(response.headers());
    // A gRPC status not in the headers comes in the trailers.
    let trailer = trailer || grpc && stated_status.is_none();
    if !json && !trailer || response.body().is_end_stream() {
        let headers = response.headers();
        match stated_status {
            Some(status) => {
                settlement
                    .settle_costs(status, |from| stated(from, headers, None, None))
                    .await;
            }
            // No outcome stated: kept, as an attempt with no answer.
            None => drop(settlement),
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    let metered = Metered {
        inner: body,
        pending: Some(Pending {
            settlement,
            status: stated_status,
            grpc,
            headers: parts.headers.clone(),
        }),
        copy: json.then(Vec::new),
        trailers: None,
        draining: false,
    };
    Response::from_parts(parts, Body::new(metered))
}

/// Whether the answer says its body is JSON (`application/json`, `text/json`,
/// `application/*+json`): only such a body is copied for a cost.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(kind) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = kind
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence == "text/json"
        || essence.starts_with("application/") && essence.ends_with("+json")
}

/// The cost `from` states, in the answer's headers, trailers or JSON body.
fn stated(
    from: &CostFrom,
    headers: &HeaderMap,
    trailers: Option<&HeaderMap>,
    json: Option<&serde_json::Value>,
) -> Option<u64> {
    match from {
        CostFrom::ResponseHeader(name) => CostFrom::read_text(headers.get(name)?.as_bytes()),
        CostFrom::Trailer(name) => CostFrom::read_text(trailers?.get(name)?.as_bytes()),
        CostFrom::Json(pointer) => CostFrom::read_json(json?, pointer),
    }
}

/// A settlement waiting for the end of its answer's body.
struct Pending {
    settlement: Settlement,
    /// The answer's status, or, for a gRPC answer that did not state its outcome in
    /// its headers, none yet (its trailers will).
    status: Option<u16>,
    /// Whether the answer is gRPC's.
    grpc: bool,
    headers: HeaderMap,
}

/// How long the rest of an answer whose client hung up is read for its cost.
const DRAIN_FOR: Duration = Duration::from_secs(60);

/// The upstream's body on its way to the client, settling when it ends.
struct Metered {
    inner: Body,
    /// Read in the background after the client left: dropped then, nothing more.
    draining: bool,
    /// Taken when the body ends.
    pending: Option<Pending>,
    /// The body so far, when a JSON field states a cost (`None` past the bound).
    copy: Option<Vec<u8>>,
    trailers: Option<HeaderMap>,
}

impl Metered {
    /// Drops the copy of the body, giving its room back.
    fn drop_copy(&mut self) {
        if let Some(copy) = self.copy.take() {
            COPYING.fetch_sub(copy.len(), Ordering::AcqRel);
        }
    }

    /// The body has ended: settle with what it stated.
    fn finish(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        let json = self
            .copy
            .as_deref()
            .and_then(|copy| serde_json::from_slice::<serde_json::Value>(copy).ok());
        self.drop_copy();
        let trailers = self.trailers.take();
        let Pending {
            settlement,
            status,
            grpc,
            headers,
        } = pending;
        let status = match status {
            Some(status) => status,
            None if grpc => {
                match trailers.as_ref().and_then(super::grpc::outcome_status) {
                    Some(status) => status,
                    // No grpc-status at all: kept, as an attempt with no answer.
                    None => {
                        drop(settlement);
                        return;
                    }
                }
            }
            None => {
                drop(settlement);
                return;
            }
        };
        tokio::spawn(async move {
            settlement
                .settle_costs(status, |from| {
                    stated(from, &headers, trailers.as_ref(), json.as_ref())
                })
                .await;
        });
    }
}

impl Drop for Metered {
    /// A client that left before the answer ended: the rest is read in the background
    /// for its cost, as the upstream sends it (the model did the work either way).
    fn drop(&mut self) {
        if self.pending.is_some()
            && !self.draining
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let mut rest = Metered {
                inner: std::mem::take(&mut self.inner),
                draining: true,
                pending: self.pending.take(),
                copy: self.copy.take(),
                trailers: self.trailers.take(),
            };
            runtime.spawn(async move {
                let read = async {
                    while rest.pending.is_some() {
                        match rest.frame().await {
                            Some(Ok(_)) => {}
                            _ => break,
                        }
                    }
                };
                // Not ended in time: dropped, the estimate stays.
                let _ = tokio::time::timeout(DRAIN_FOR, read).await;
            });
        }
        self.drop_copy();
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Some(copy) = &mut this.copy {
                        if copy.len() + data.len() > MAX_COST_BODY || !take_room(data.len()) {
                            this.drop_copy();
                        } else {
                            copy.extend_from_slice(data);
                        }
                    }
                    // A body of known length ends with its last byte: the server may
                    // not poll again.
                    if this.inner.is_end_stream() {
                        this.finish();
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    this.trailers = Some(trailers.clone());
                    this.finish();
                }
            }
            Poll::Ready(None) => this.finish(),
            // A body that breaks is no answer: the estimate stays (the settlement's
            // drop).
            Poll::Ready(Some(Err(_))) => this.pending = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
