//! Streams that never end by themselves (a health `Watch`) ended when weir stops: a
//! graceful stop waits for every call in flight, so one watcher would keep weir
//! from stopping at all.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::http::{HeaderMap, HeaderValue};
use tokio::sync::watch;

/// `B`, ended with `UNAVAILABLE` ("weir is stopping") in its trailers once `stopping`
/// turns true while `B` has nothing ready. What `B` has ready goes out first (the
/// `NOT_SERVING` a watcher is sent as the stop begins).
pub(super) struct EndsAtStop<B> {
    inner: B,
    /// Completes once weir stops; `None` once the stream has been ended.
    stop: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    ended: bool,
}

impl<B> EndsAtStop<B> {
    /// `inner`, ended when `stopping` turns true.
    pub(super) fn new(inner: B, mut stopping: watch::Receiver<bool>) -> Self {
        Self {
            inner,
            stop: Some(Box::pin(async move {
                // A sender gone is a stop too.
                let _ = stopping.wait_for(|stopping| *stopping).await;
            })),
            ended: false,
        }
    }
}

impl<B> Body for EndsAtStop<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        if frame.is_ready() {
            return frame;
        }
        let Some(stop) = this.stop.as_mut() else {
            return Poll::Pending;
        };
        if stop.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        this.stop = None;
        this.ended = true;
        let mut trailers = HeaderMap::new();
        // 14: UNAVAILABLE, what gRPC clients retry elsewhere.
        trailers.insert("grpc-status", HeaderValue::from_static("14"));
        trailers.insert("grpc-message", HeaderValue::from_static("weir is stopping"));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use http_body_util::channel::Channel;

    use super::*;

    #[tokio::test]
    async fn a_stream_ends_with_unavailable_at_the_stop_after_what_it_had_ready() {
        let (mut sender, inner) = Channel::<Bytes, std::convert::Infallible>::new(4);
        let (stopping, watching) = watch::channel(false);
        let mut body = EndsAtStop::new(inner, watching);
        sender
            .send_data(Bytes::from_static(b"serving"))
            .await
            .unwrap();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "serving");
        // Nothing more until the stop: the stream waits.
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(20), body.frame()).await;
        assert!(waiting.is_err(), "the stream ended before the stop");
        sender
            .send_data(Bytes::from_static(b"not serving"))
            .await
            .unwrap();
        stopping.send(true).unwrap();
        let ready = body.frame().await.unwrap().unwrap();
        assert_eq!(ready.into_data().unwrap(), "not serving");
        let last = body.frame().await.unwrap().unwrap();
        let trailers = last.into_trailers().unwrap();
        assert_eq!(trailers.get("grpc-status").unwrap(), "14");
        assert!(body.frame().await.is_none());
        assert!(body.is_end_stream());
        // The stream has ended: what the sender still sends is not read.
        let _ = sender.send_data(Bytes::from_static(b"late")).await;
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn a_stream_that_ends_by_itself_is_passed_through() {
        let (mut sender, inner) = Channel::<Bytes, std::convert::Infallible>::new(4);
        let (_stopping, watching) = watch::channel(false);
        let body = EndsAtStop::new(inner, watching);
        sender
            .send_data(Bytes::from_static(b"answer"))
            .await
            .unwrap();
        drop(sender);
        let collected = body.collect().await.unwrap();
        assert!(collected.trailers().is_none());
        assert_eq!(collected.to_bytes(), "answer");
    }
}
