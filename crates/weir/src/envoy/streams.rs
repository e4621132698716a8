//! An executor for hyper's HTTP/2 server that runs a connection's streams (its gRPC
//! calls) inside the connection's own task.
//!
//! hyper hands every stream to its executor; with tokio's, each call becomes a task of
//! its own: spawned, scheduled, and woken once more to hand its answer to the
//! connection's task, which writes it. Here the connection's task polls its streams
//! itself, right after the connection: nothing is spawned, and the answers finished in
//! one round go out in one write. A connection's calls then share its task, as the
//! requests of an HTTP/1.1 connection do; other connections' calls run beside them.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use parking_lot::Mutex;

type Stream = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One connection's streams; hyper's executor for it (cheap to clone: hyper keeps one).
#[derive(Clone, Default)]
pub(super) struct ConnectionStreams {
    /// Locked only by the connection's own task, never across an `await`: one lock at a
    /// time, uncontended.
    streams: Arc<Mutex<FuturesUnordered<Stream>>>,
}

impl<F> hyper::rt::Executor<F> for ConnectionStreams
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, stream: F) {
        self.streams.lock().push(Box::pin(stream));
    }
}

impl ConnectionStreams {
    /// Drives `connection` (served with this executor) and its streams until the
    /// connection ends; streams still running then are dropped (their peer is gone).
    pub(super) async fn drive<C: Future>(self, connection: C) -> C::Output {
        let mut connection = pin!(connection);
        poll_fn(move |cx| {
            // The connection first: it reads new calls (pushed here) and writes the
            // answers of the last round.
            if let Poll::Ready(done) = connection.as_mut().poll(cx) {
                return Poll::Ready(done);
            }
            // Then every call that can go on. An answer wakes this task again, for the
            // connection to write it. `FuturesUnordered` returns `Pending` (having
            // woken the task) after a while of ready streams, so one busy connection
            // cannot hold the thread.
            let mut streams = self.streams.lock();
            while let Poll::Ready(Some(())) = streams.poll_next_unpin(cx) {}
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hyper::rt::Executor;
    use tokio::sync::oneshot;

    use super::*;

    /// A stream pushed while the connection is polled runs in that same round, and
    /// one woken later (an answer from the store) runs when it is woken; the
    /// connection ends the drive.
    #[tokio::test]
    async fn streams_pushed_by_the_connection_run_until_it_ends() {
        let streams = ConnectionStreams::default();
        let finished = Arc::new(AtomicUsize::new(0));
        let (store_tx, store_rx) = oneshot::channel::<()>();
        let (end_tx, end_rx) = oneshot::channel::<()>();
        let spawner = streams.clone();
        let counter = Arc::clone(&finished);
        let connection = async move {
            let count = Arc::clone(&counter);
            spawner.execute(async move {
                count.fetch_add(1, Ordering::SeqCst);
            });
            let count = Arc::clone(&counter);
            spawner.execute(async move {
                let _ = store_rx.await;
                count.fetch_add(1, Ordering::SeqCst);
            });
            let _ = end_rx.await;
            counter.load(Ordering::SeqCst)
        };
        let driven = tokio::spawn(streams.drive(connection));
        tokio::task::yield_now().await;
        assert_eq!(finished.load(Ordering::SeqCst), 1, "the ready stream ran");
        store_tx.send(()).unwrap();
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert_eq!(finished.load(Ordering::SeqCst), 2, "the woken stream ran");
        end_tx.send(()).unwrap();
        assert_eq!(driven.await.unwrap(), 2);
    }
}
