//! A TCP proxy in front of a NATS server that a test can cut and restore: a node connected
//! through it loses its connection on [`Proxy::cut`] (every open connection is shut down, and
//! new ones are accepted and closed at once, so the client's reconnects fail fast) while the
//! server and the nodes connected to it directly go on; [`Proxy::restore`] lets the client's
//! next reconnect through. [`Proxy::pause`] stalls it instead: connections stay open and
//! nothing passes (what is sent waits in the sockets' buffers, as on a link that went silent)
//! until [`Proxy::resume`]. Plain threads: it runs whatever runtime the test uses.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
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
    /// Nothing passes while set ([`Proxy::pause`]); the copying threads wait on `resumed`.
    paused: Mutex<bool>,
    resumed: Condvar,
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

    /// Stalls every connection, open ones kept open: nothing passes either way until
    /// [`resume`](Self::resume) (at most one read's worth, taken before the pause, waits in the
    /// proxy; the rest waits in the sockets' buffers and then in the senders').
    #[allow(dead_code)]
    pub(crate) fn pause(&self) {
        *self.state.paused.lock().expect("proxy lock") = true;
    }

    /// Ends a [`pause`](Self::pause): what waited passes, in order.
    #[allow(dead_code)]
    pub(crate) fn resume(&self) {
        *self.state.paused.lock().expect("proxy lock") = false;
        self.state.resumed.notify_all();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.resume();
        self.state.stopped.store(true, SeqCst);
        self.cut();
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
    }
}

/// Connects `client` to the upstream server and copies both ways, each on its own thread,
/// until either side closes or a cut shuts both down.
fn pass(state: &Arc<State>, client: TcpStream, upstream: u16) -> io::Result<()> {
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
        let state = state.clone();
        thread::spawn(move || {
            let _ = copy(&state, &mut from, &mut to);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        });
    }
    Ok(())
}

/// `io::copy` that holds what it read while the proxy is paused.
fn copy(state: &State, from: &mut TcpStream, to: &mut TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = from.read(&mut buf)?;
        if read == 0 {
            return Ok(());
        }
        let mut paused = state.paused.lock().expect("proxy lock");
        while *paused {
            paused = state.resumed.wait(paused).expect("proxy lock");
        }
        drop(paused);
        to.write_all(&buf[..read])?;
    }
}
