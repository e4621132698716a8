//! Reading a request's body, for the doors that read one only when a rule keys on a
//! body field (the gateway, the tower layer): bounded per request (`max_body_bytes`,
//! refused at once when the announced length is larger), in time (`body_timeout`), and
//! across requests (`max_buffered_bytes` held at once, else a busy 503), so that slow
//! or large bodies cannot hold the memory of the process.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::Semaphore;

use super::Problem;

/// The unit in which buffered body bytes are counted.
const BUFFER_UNIT: usize = 1024;

/// Reads bodies within the bounds it was made with.
#[derive(Debug)]
pub(crate) struct BodyReader {
    max_body_bytes: usize,
    body_timeout: Duration,
    /// Body bytes being read now, in units of [`BUFFER_UNIT`].
    buffers: Semaphore,
}

impl BodyReader {
    /// A reader of bodies up to `max_body_bytes` each, arriving within `body_timeout`,
    /// holding at most `max_buffered_bytes` across the requests read at once.
    pub(crate) fn new(
        max_body_bytes: usize,
        body_timeout: Duration,
        max_buffered_bytes: usize,
    ) -> Self {
        Self {
            max_body_bytes,
            body_timeout,
            buffers: Semaphore::new(max_buffered_bytes.div_ceil(BUFFER_UNIT)),
        }
    }

    /// The whole body, or the answer to send instead: 413 when it is (or says it is)
    /// larger than the limit, 408 when it is too slow, 400 when it cannot be read (a
    /// malformed chunk, a client that hung up), 503 when the process holds its
    /// `max_buffered_bytes` of bodies already.
    pub(crate) async fn read(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, Response> {
        let limit = self.max_body_bytes;
        let announced = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if announced.is_some_and(|length| length > limit as u64) {
            return Err(Problem::body_too_large(limit).into_response());
        }
        // Room for what it says it holds, or for the most it may hold.
        let room = announced.map_or(limit, |length| length as usize).max(1);
        let units = u32::try_from(room.div_ceil(BUFFER_UNIT)).unwrap_or(u32::MAX);
        let Ok(_room) = self.buffers.try_acquire_many(units) else {
            return Err(
                Problem::busy("too many request bodies are being read; try again").into_response(),
            );
        };
        match to_bytes_within(body, limit, self.body_timeout).await {
            Some(Ok(bytes)) => Ok(bytes),
            Some(Err(error)) => {
                let too_large = std::error::Error::source(&error)
                    .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
                Err(if too_large {
                    Problem::body_too_large(limit).into_response()
                } else {
                    Problem::invalid_request("the request body could not be read").into_response()
                })
            }
            None => Err(Problem::body_timeout(self.body_timeout).into_response()),
        }
    }
}

/// `body` read whole, at most `limit` bytes, given `timeout` to arrive: `None` when it
/// did not. A body already in (a small one usually comes with its head) is read
/// without starting a timer, which would cost every such request one.
pub(crate) async fn to_bytes_within(
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Option<Result<Bytes, axum::Error>> {
    let mut read = pin!(axum::body::to_bytes(body, limit));
    match std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
        Poll::Ready(read) => Some(read),
        Poll::Pending => tokio::time::timeout(timeout, read).await.ok(),
    }
}
