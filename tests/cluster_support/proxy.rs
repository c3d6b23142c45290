//! A TCP proxy in front of a NATS server that a test can cut and restore: a node connected
//! through it loses its connection on [`Proxy::cut`] (every open connection is shut down, and
//! new ones are accepted and closed at once, so the client's reconnects fail fast) while the
//! server and the nodes connected to it directly go on; [`Proxy::restore`] lets the client's
//! next reconnect through. Plain threads: it runs whatever runtime the test uses.

use std::io;
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;

/// The proxy; it stops accepting when dropped.
pub(crate) struct Proxy {
    port: u16,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    cut: AtomicBool,
    stopped: AtomicBool,
    /// Both ends of every connection passed through, to shut down on a cut.
    open: Mutex<Vec<TcpStream>>,
}

impl Proxy {
    /// A proxy on a free loopback port to the server on 127.0.0.1:`upstream`.
    pub(crate) fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        let state = Arc::new(State::default());
        let accepting = state.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopped.load(SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                if accepting.cut.load(SeqCst) {
                    drop(client);
                    continue;
                }
                if let Err(error) = pass(&accepting, client, upstream) {
                    eprintln!("proxy: a connection failed: {error}");
                }
            }
        });
        Proxy { port, state }
    }

    /// The URL a node connects through.
    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Cuts every connection through the proxy and refuses new ones until [`restore`](Self::restore).
    pub(crate) fn cut(&self) {
        self.state.cut.store(true, SeqCst);
        for stream in self.state.open.lock().expect("proxy lock").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub(crate) fn restore(&self) {
        self.state.cut.store(false, SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stopped.store(true, SeqCst);
        self.cut();
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
    }
}

/// Connects `client` to the upstream server and copies both ways, each on its own thread,
/// until either side closes or a cut shuts both down.
fn pass(state: &State, client: TcpStream, upstream: u16) -> io::Result<()> {
    let server = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream))?;
    {
        let mut open = state.open.lock().expect("proxy lock");
        // A cut between the accept and here: the connection is not let through.
        if state.cut.load(SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        open.push(client.try_clone()?);
        open.push(server.try_clone()?);
    }
    for (mut from, mut to) in [(client.try_clone()?, server.try_clone()?), (server, client)] {
        thread::spawn(move || {
            let _ = io::copy(&mut from, &mut to);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        });
    }
    Ok(())
}
