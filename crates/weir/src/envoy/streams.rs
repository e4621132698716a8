//! An executor for hyper's HTTP/2 server that runs a connection's streams (its gRPC
//! calls) inside the connection's own task.
//!
//! hyper hands every stream to its executor; with tokio's, each call becomes a task of
//! its own: spawned, scheduled, and woken once more to hand its answer to the
//! connection's task, which writes it. Here the connection's task polls its streams
//! itself, right after the connection: nothing is spawned, and the answers of one
//! round are written together when the connection is next polled. A connection's
//! calls then share its task (and so one thread), as the requests of an HTTP/1.1
//! connection do; other connections' calls run beside them.
//!
//! The streams are owned by [`ConnectionStreams::drive`], not by the executor: a
//! stream holds a clone of the executor (hyper keeps one in it), so streams kept in
//! the executor would keep themselves alive after their connection ended. New streams
//! wait in a queue the executor shares only until the drive takes them, and the queue
//! is emptied when the drive ends or is dropped.

use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Poll, Waker};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use parking_lot::Mutex;

type Stream = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Streams handed over and not yet taken by the drive.
#[derive(Default)]
struct Queue {
    new: Vec<Stream>,
    /// Whether the drive is in its poll (it takes what is pushed before it returns).
    driving: bool,
    /// The drive's task, woken by a stream pushed while it is not in its poll.
    waker: Option<Waker>,
}

/// One connection's executor (cheap to clone: hyper keeps clones).
#[derive(Clone, Default)]
pub(super) struct ConnectionStreams {
    /// Locked briefly to push or take streams, never while a stream runs: a stream
    /// that hands hyper another (an upgrade's task) pushes it without deadlock.
    queue: Arc<Mutex<Queue>>,
}

impl<F> hyper::rt::Executor<F> for ConnectionStreams
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, stream: F) {
        // A call that panics ends alone, as it would in a task of its own, not with
        // the connection and the other calls on it.
        let stream = AssertUnwindSafe(stream).catch_unwind().map(|ended| {
            if ended.is_err() {
                tracing::error!("a stream (a gRPC call) panicked; it is reset");
            }
        });
        let waker = {
            let mut queue = self.queue.lock();
            queue.new.push(Box::pin(stream));
            if queue.driving {
                None
            } else {
                queue.waker.take()
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl ConnectionStreams {
    /// Drives `connection` (served with this executor) and its streams until the
    /// connection ends; the streams still running then are dropped with the drive
    /// (their peer is gone), as they are when the drive itself is dropped.
    pub(super) async fn drive<C: Future>(self, connection: C) -> C::Output {
        let _empty_at_end = EmptyOnDrop(Arc::clone(&self.queue));
        let mut connection = pin!(connection);
        let mut running: FuturesUnordered<Stream> = FuturesUnordered::new();
        poll_fn(move |cx| {
            self.queue.lock().driving = true;
            // The connection first: it reads new calls (pushed to the queue) and
            // writes the answers of the last round.
            if let Poll::Ready(done) = connection.as_mut().poll(cx) {
                return Poll::Ready(done);
            }
            loop {
                running.extend(self.queue.lock().new.drain(..));
                // Every call that can go on. An answer wakes this task again, for the
                // connection to write it. `FuturesUnordered` returns `Pending` (having
                // woken the task) after a while of ready streams, so one busy
                // connection cannot hold the thread.
                while let Poll::Ready(Some(())) = running.poll_next_unpin(cx) {}
                let mut queue = self.queue.lock();
                if queue.new.is_empty() {
                    queue.driving = false;
                    if !queue
                        .waker
                        .as_ref()
                        .is_some_and(|w| w.will_wake(cx.waker()))
                    {
                        queue.waker = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        })
        .await
    }
}

/// Empties the queue (and forgets the drive's waker) when the drive ends or is
/// dropped, so that nothing there outlives the connection.
struct EmptyOnDrop(Arc<Mutex<Queue>>);

impl Drop for EmptyOnDrop {
    fn drop(&mut self) {
        let (left, waker) = {
            let mut queue = self.0.lock();
            (std::mem::take(&mut queue.new), queue.waker.take())
        };
        // Dropped outside the lock: a stream's drop may hand hyper nothing, but must
        // not be able to deadlock on the queue either.
        drop((left, waker));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use hyper::rt::Executor;
    use tokio::sync::oneshot;

    use super::*;

    /// Counts its drops.
    struct Dropped(Arc<AtomicUsize>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

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

    /// A stream that hands the executor another while it runs (hyper does so for an
    /// upgrade) does not deadlock, and the new one runs; so does one pushed from
    /// outside the drive's poll, which wakes it. The drive runs on a thread of its own,
    /// so that a deadlock fails this test by its timeouts (the thread left stuck)
    /// rather than hanging it.
    #[test]
    fn a_stream_may_push_another_and_a_late_push_wakes_the_drive() {
        let streams = ConnectionStreams::default();
        let (ran_tx, ran) = std::sync::mpsc::channel::<&str>();
        let (end_tx, end_rx) = oneshot::channel::<()>();
        let (spawner, inner_ran) = (streams.clone(), ran_tx.clone());
        let connection = async move {
            let inner = spawner.clone();
            spawner.execute(async move {
                inner.execute(async move {
                    let _ = inner_ran.send("pushed by a stream");
                });
            });
            let _ = end_rx.await;
        };
        let drive = streams.clone().drive(connection);
        let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            runtime.block_on(drive);
            let _ = ended_tx.send(());
        });
        let within = Duration::from_secs(10);
        assert_eq!(ran.recv_timeout(within), Ok("pushed by a stream"));
        streams.execute(async move {
            let _ = ran_tx.send("pushed from outside");
        });
        assert_eq!(ran.recv_timeout(within), Ok("pushed from outside"));
        end_tx.send(()).unwrap();
        assert_eq!(ended.recv_timeout(within), Ok(()), "the drive ended");
    }

    /// How a connection ends, for the test below.
    #[derive(Clone, Copy, Debug)]
    enum End {
        /// Later: its streams are running.
        Later,
        /// In the poll that pushed its streams: they are still in the queue.
        AtOnce,
        /// Its task is aborted.
        Aborted,
    }

    /// Streams left when the connection ends are dropped, though each holds the
    /// executor (as hyper's do): those running with the drive, those still queued by
    /// `EmptyOnDrop`, and those of a drive that is itself dropped (its task aborted).
    #[tokio::test]
    async fn streams_left_when_the_connection_ends_are_dropped() {
        for end in [End::Later, End::AtOnce, End::Aborted] {
            let dropped = Arc::new(AtomicUsize::new(0));
            let streams = ConnectionStreams::default();
            let (spawner, dropped_now) = (streams.clone(), Arc::clone(&dropped));
            let (end_tx, end_rx) = oneshot::channel::<()>();
            let connection = async move {
                for _ in 0..3 {
                    let (guard, executor) = (Dropped(Arc::clone(&dropped_now)), spawner.clone());
                    spawner.execute(async move {
                        let _held = (guard, executor);
                        std::future::pending::<()>().await;
                    });
                }
                if !matches!(end, End::AtOnce) {
                    let _ = end_rx.await;
                }
            };
            let driven = tokio::spawn(streams.drive(connection));
            tokio::task::yield_now().await;
            match end {
                End::Aborted => {
                    driven.abort();
                    assert!(driven.await.unwrap_err().is_cancelled());
                }
                End::Later | End::AtOnce => {
                    let _ = end_tx.send(());
                    driven.await.unwrap();
                }
            }
            assert_eq!(
                dropped.load(Ordering::SeqCst),
                3,
                "{end:?}: every stream dropped"
            );
        }
    }

    /// A call that panics ends alone: the connection and its other calls go on.
    #[tokio::test]
    async fn a_panicking_stream_ends_alone() {
        let streams = ConnectionStreams::default();
        let (spawner, (later_tx, later_rx)) = (streams.clone(), oneshot::channel::<()>());
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let connection = async move {
            spawner.execute(async {
                panic!("a call's bug");
            });
            spawner.execute(async move {
                let _ = later_rx.await;
                let _ = done_tx.send(());
            });
            std::future::pending::<()>().await;
        };
        let driven = tokio::spawn(streams.drive(connection));
        tokio::task::yield_now().await;
        later_tx.send(()).unwrap();
        done_rx.await.expect("the other call finished");
        assert!(!driven.is_finished(), "the connection goes on");
        driven.abort();
    }
}
