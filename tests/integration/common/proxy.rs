//! A loopback TCP proxy that can silently black-hole its traffic: bytes stop
//! flowing in both directions while every socket stays open, as when a
//! network path drops packets. It runs on a thread and runtime of its own,
//! so a test blocking its runtime cannot stall it, and closes everything on
//! drop.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Forwarding state: whether traffic is held, and the oldest connection
/// generation still forwarded once it flows again.
#[derive(Debug, Clone, Copy)]
struct State {
    blocked: bool,
    generation: u64,
    oldest_live: u64,
}

/// The proxy; dropping it closes the listener and every connection.
pub(crate) struct Proxy {
    addr: SocketAddr,
    state: Arc<watch::Sender<State>>,
    accepted: Arc<AtomicU64>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `127.0.0.1:target`.
    pub(crate) fn start(target: u16) -> Proxy {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        std_listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = std_listener.local_addr().expect("proxy address");
        let (state, _) = watch::channel(State {
            blocked: false,
            generation: 0,
            oldest_live: 0,
        });
        let state = Arc::new(state);
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let thread_state = Arc::clone(&state);
        let accepted = Arc::new(AtomicU64::new(0));
        let thread_accepted = Arc::clone(&accepted);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("proxy runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("tokio listener");
                let accept = async {
                    loop {
                        let Ok((client, _)) = listener.accept().await else {
                            continue;
                        };
                        thread_accepted.fetch_add(1, Ordering::Relaxed);
                        let generation = thread_state.borrow().generation;
                        let rx = thread_state.subscribe();
                        tokio::spawn(async move {
                            let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                                return;
                            };
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            let (cr, cw) = client.into_split();
                            let (sr, sw) = server.into_split();
                            tokio::join!(
                                pump(cr, sw, rx.clone(), generation),
                                pump(sr, cw, rx, generation)
                            );
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stop => {}
                }
            });
            // Dropping the runtime closes every socket.
            rt.shutdown_timeout(Duration::from_secs(1));
        });
        Proxy {
            addr,
            state,
            accepted,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The port clients connect to.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub(crate) fn connections(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Stops forwarding in both directions without closing anything; new
    /// connections are accepted and held too.
    pub(crate) fn black_hole(&self) {
        self.state.send_modify(|s| {
            s.blocked = true;
            s.generation += 1;
        });
    }

    /// Forwards again. With `lose_old`, connections opened before the
    /// black hole stay silent for good (as after a lost NAT or firewall
    /// state: their packets keep vanishing); the ones opened during it flow.
    pub(crate) fn restore(&self, lose_old: bool) {
        self.state.send_modify(|s| {
            s.blocked = false;
            if lose_old {
                s.oldest_live = s.generation;
            }
        });
    }

    /// Forwards again for new connections only: every connection opened
    /// before now stays silent for good, including those the black hole
    /// accepted (as a middlebox that accepts and then stalls).
    pub(crate) fn restore_new_only(&self) {
        self.state.send_modify(|s| {
            s.blocked = false;
            s.generation += 1;
            s.oldest_live = s.generation;
        });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies `from` to `to`, holding the bytes while the state says so.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut state: watch::Receiver<State>,
    generation: u64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Wait for the path before reading, so held bytes stay in the
        // kernel buffers like packets that never arrived.
        loop {
            let s = *state.borrow_and_update();
            if !s.blocked && generation >= s.oldest_live {
                break;
            }
            if state.changed().await.is_err() {
                return;
            }
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // The path may have gone while we waited for data: hold it.
        loop {
            let s = *state.borrow_and_update();
            if !s.blocked && generation >= s.oldest_live {
                break;
            }
            if state.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
