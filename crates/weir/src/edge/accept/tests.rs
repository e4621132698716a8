//! The loop's wiring, on loopback connections: a protocol's deadline applied, the slot
//! given back when a connection ends, the protocol stopped at the stop.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::preface::PREFACE_TIMEOUT;
use super::*;

/// An HTTP/2 protocol that reads each connection until it fails or ends and reports
/// how (the error kind, if any) and when; it notes its stop.
struct Reads {
    accepted: mpsc::UnboundedSender<()>,
    ended: mpsc::UnboundedSender<(Option<io::ErrorKind>, tokio::time::Instant)>,
    stopped: Arc<AtomicBool>,
}

struct Read(mpsc::UnboundedSender<(Option<io::ErrorKind>, tokio::time::Instant)>);

impl Protocol for Reads {
    type Version = Http2;
    type Connection = Read;

    fn version(&self) -> Http2 {
        Http2
    }

    fn connection(&self, _peer: SocketAddr) -> Read {
        self.accepted.send(()).unwrap();
        Read(self.ended.clone())
    }

    async fn stop(self) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

impl Connection<Http2> for Read {
    async fn serve<I: Io>(self, connection: <Http2 as Version>::Opened<I>, _graceful: Watcher) {
        let mut connection = connection.into_inner();
        let mut buf = [0u8; 64];
        let ended = loop {
            match connection.read(&mut buf).await {
                Ok(0) => break None,
                Ok(_) => {}
                Err(error) => break Some(error.kind()),
            }
        };
        self.0.send((ended, tokio::time::Instant::now())).unwrap();
    }
}

#[tokio::test]
async fn a_silent_http2_connection_is_closed_at_the_preface_deadline_and_frees_its_slot() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let slots = ConnectionSlots::new("test", 1);
    let (accepted, mut was_accepted) = mpsc::unbounded_channel();
    let (ended, mut has_ended) = mpsc::unbounded_channel();
    let stopped = Arc::new(AtomicBool::new(false));
    let protocol = Reads {
        accepted,
        ended,
        stopped: Arc::clone(&stopped),
    };
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(Accept::new(slots.clone(), SEND_TIMEOUT).serve(
        listener,
        protocol,
        async move {
            let _ = stopping.await;
        },
    ));
    let _client = TcpStream::connect(address).await.unwrap();
    was_accepted.recv().await.unwrap();
    // Accepted and silent: on a paused clock, the next thing to happen is a deadline.
    tokio::time::pause();
    let start = tokio::time::Instant::now();
    let (how, when) = tokio::time::timeout(2 * PREFACE_TIMEOUT, has_ended.recv())
        .await
        .expect("the connection was not closed")
        .unwrap();
    assert_eq!(how, Some(io::ErrorKind::TimedOut));
    let after = when - start;
    assert!(
        // (The deadline started as the connection did, a little before the clock
        // was paused; timers round up to the millisecond.)
        after > PREFACE_TIMEOUT - Duration::from_secs(1)
            && after < PREFACE_TIMEOUT + Duration::from_millis(50),
        "closed after {after:?}"
    );
    tokio::time::resume();
    tokio::time::timeout(Duration::from_secs(5), async {
        while slots.open() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the slot is given back");
    assert!(!stopped.load(Ordering::SeqCst));
    stop.send(()).unwrap();
    served.await.unwrap().unwrap();
    assert!(
        stopped.load(Ordering::SeqCst),
        "the protocol was not stopped"
    );
}
