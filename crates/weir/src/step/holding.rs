//! An answer's body that holds a request's slots (`algorithm: concurrency`) until it
//! has been sent: released at its end, or when it is dropped unsent (the client hung
//! up, the connection failed).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::engine::HeldSlots;

/// `response`, its body holding `slots` until sent.
pub(crate) fn until_sent(response: Response, slots: HeldSlots) -> Response {
    response.map(|body| {
        Body::new(Holding {
            body,
            slots: Some(slots),
        })
    })
}

struct Holding {
    body: Body,
    slots: Option<HeldSlots>,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = polled {
            // The end: released now, not when the connection gets round to dropping
            // the body.
            self.slots = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
