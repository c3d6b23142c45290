//! [`Cluster`]: how a node joins — the NATS servers, its name, the timings, and what it accepts
//! from other nodes.

use super::registry::Registry;
use crate::process::{BoxError, Process};
use crate::scheduler::{ChildOptions, ProcessCx};
use serde::de::DeserializeOwned;
use std::future::Future;
use std::time::Duration;

/// How often a node publishes its heartbeat, by default.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_millis(500);
/// How long without a heartbeat before a node is declared down, by default. A sweep every half
/// heartbeat looks, so with the defaults a silent node is declared down within 2.25 s of its
/// last heartbeat (at once if a frame meets no responder at it): under 3 s with a heartbeat's
/// margin.
pub const DEFAULT_DOWN_AFTER: Duration = Duration::from_secs(2);

// The defaults keep the promise above: down within 3 s of the last heartbeat, with a whole
// heartbeat to spare for a sweep that runs late.
const _: () = assert!(
    DEFAULT_DOWN_AFTER.as_millis()
        + DEFAULT_HEARTBEAT.as_millis() / 2
        + DEFAULT_HEARTBEAT.as_millis()
        <= 3_000
);
/// How long a remote ask, acked send or spawn waits, by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Node::start`](super::Node::start) keeps trying to join while JetStream cannot
/// answer yet (see [`Cluster::join_timeout`]).
pub const DEFAULT_JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest frame a node sends or accepts, by default (NATS's own default payload limit is
/// 1 MiB).
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;
/// How deep a value a node decodes may nest, by default (see [`Cluster::max_nesting`]): serde's
/// JSON decoder stops at the same depth.
pub const DEFAULT_MAX_NESTING: usize = 128;
/// The most a node holds unsent for one other node before it refuses a fire-and-forget
/// message, by default (see [`Cluster::max_backlog`]): 256 MiB.
pub const DEFAULT_MAX_BACKLOG: usize = 256 << 20;

/// How a node joins its cluster: give it to [`Node::start`](super::Node::start).
///
/// Every node registers the message types it receives from other nodes
/// ([`message`](Self::message)) and the bodies others may spawn on it
/// ([`spawnable`](Self::spawnable)) under names shared by the cluster: a frame of any other type
/// is rejected, counted and traced, and a node spawns only what it registered.
///
/// # Examples
///
/// ```
/// use procsched::cluster::Cluster;
/// use procsched::prelude::*;
/// use std::time::Duration;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Ping(u32);
///
/// let cluster = Cluster::nats("nats://127.0.0.1:4222")
///     .name("orders-1")
///     .heartbeat(Duration::from_millis(250))
///     .message::<Ping>("ping")
///     .spawnable("pinger", |cx: ProcessCx<Ping>, start: u32| async move {
///         let Ping(n) = cx.recv().await?;
///         Ok::<_, BoxError>(n + start)
///     });
/// # let _ = cluster;
/// ```
#[must_use = "a cluster configuration does nothing until `Node::start` takes it"]
pub struct Cluster {
    pub(crate) servers: Vec<String>,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) bucket: String,
    pub(crate) heartbeat: Duration,
    pub(crate) down_after: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) join_timeout: Duration,
    pub(crate) max_frame: usize,
    pub(crate) max_nesting: usize,
    pub(crate) max_backlog: usize,
    pub(crate) replicas: usize,
    pub(crate) options: Option<async_nats::ConnectOptions>,
    pub(crate) registry: Registry,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("servers", &self.servers)
            .field("name", &self.name)
            .field("prefix", &self.prefix)
            .field("heartbeat", &self.heartbeat)
            .field("down_after", &self.down_after)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A node that joins through the NATS server(s) at `servers` (a URL, or several separated
    /// by commas, as `async-nats` takes them).
    ///
    /// # Examples
    ///
    /// See [`Cluster`].
    pub fn nats(servers: impl Into<String>) -> Cluster {
        Cluster {
            servers: servers
                .into()
                .split(',')
                .map(|server| server.trim().to_owned())
                .filter(|server| !server.is_empty())
                .collect(),
            name: String::new(),
            prefix: "procsched".to_owned(),
            bucket: "procsched_nodes".to_owned(),
            heartbeat: DEFAULT_HEARTBEAT,
            down_after: DEFAULT_DOWN_AFTER,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            join_timeout: DEFAULT_JOIN_TIMEOUT,
            max_frame: DEFAULT_MAX_FRAME,
            max_nesting: DEFAULT_MAX_NESTING,
            max_backlog: DEFAULT_MAX_BACKLOG,
            replicas: 1,
            options: None,
            registry: Registry::default(),
        }
    }

    /// The node's name, unique in the cluster while it lives (`[A-Za-z0-9_-]`, 1 to 64 bytes):
    /// required.
    ///
    /// # Examples
    ///
    /// See [`Cluster`].
    pub fn name(mut self, name: impl Into<String>) -> Cluster {
        self.name = name.into();
        self
    }

    /// The first token of every subject this cluster uses (default `procsched`): clusters that
    /// share a NATS server keep apart by prefix and [`bucket`](Self::bucket).
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222")
    ///     .prefix("staging").bucket("staging_nodes");
    /// # let _ = cluster;
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Cluster {
        self.prefix = prefix.into();
        self
    }

    /// The JetStream key-value bucket of the membership (default `procsched_nodes`).
    ///
    /// # Examples
    ///
    /// See [`prefix`](Self::prefix).
    pub fn bucket(mut self, bucket: impl Into<String>) -> Cluster {
        self.bucket = bucket.into();
        self
    }

    /// How often the node publishes its heartbeat (default [`DEFAULT_HEARTBEAT`]). The bucket's
    /// entries expire after three heartbeats: its max age is set by the node that creates it
    /// and kept (file storage) after every node has gone, so every node sharing a bucket uses
    /// the same heartbeat — a node whose heartbeat differs is refused at its start
    /// ([`ClusterError::Config`](super::ClusterError::Config)); another heartbeat takes another
    /// [`bucket`](Self::bucket). At least 34 ms: NATS keeps a key-value entry at least 100 ms
    /// (a shorter heartbeat is refused at start, `ClusterError::Config`).
    ///
    /// # Examples
    ///
    /// See [`Cluster`].
    pub fn heartbeat(mut self, every: Duration) -> Cluster {
        self.heartbeat = every;
        self
    }

    /// How long without a heartbeat before another node is declared down (default
    /// [`DEFAULT_DOWN_AFTER`]): its monitors then get `Down(NoConnection)` and pending asks,
    /// acked sends and spawns to it fail with `NoConnection`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222")
    ///     .down_after(Duration::from_secs(1));
    /// # let _ = cluster;
    /// ```
    pub fn down_after(mut self, after: Duration) -> Cluster {
        self.down_after = after;
        self
    }

    /// How long a remote ask, acked send or spawn waits at most (default
    /// [`DEFAULT_REQUEST_TIMEOUT`]) — an `ask_within` waits its own timeout instead, longer or
    /// shorter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222")
    ///     .request_timeout(Duration::from_secs(1));
    /// # let _ = cluster;
    /// ```
    pub fn request_timeout(mut self, timeout: Duration) -> Cluster {
        self.request_timeout = timeout;
        self
    }

    /// How long [`Node::start`](super::Node::start) keeps trying to open the membership bucket
    /// and claim the node's name while JetStream cannot answer (default
    /// [`DEFAULT_JOIN_TIMEOUT`]): on a NATS cluster, a bucket just created, or one whose
    /// server just died, has no stream leader for a few seconds. A name held by a live node
    /// fails sooner (after five heartbeats).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222")
    ///     .join_timeout(Duration::from_secs(60));
    /// # let _ = cluster;
    /// ```
    pub fn join_timeout(mut self, timeout: Duration) -> Cluster {
        self.join_timeout = timeout;
        self
    }

    /// The largest frame this node sends or accepts (default [`DEFAULT_MAX_FRAME`]); a message
    /// whose frame would be larger (its encoding, plus the frame's head and the item's envelope:
    /// the sender's node name and the message's registered name, about 150 bytes with short
    /// names) fails to send with `TooLarge`, a larger incoming frame is rejected and counted.
    /// Give every node the same limit: a frame is checked against the receiver's. It may not
    /// exceed the NATS server's `max_payload` (1 MiB unless the server sets another):
    /// [`Node::start`](super::Node::start) refuses such a configuration (`ClusterError::Config`).
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222").max_frame(64 << 10);
    /// # let _ = cluster;
    /// ```
    pub fn max_frame(mut self, bytes: usize) -> Cluster {
        self.max_frame = bytes;
        self
    }

    /// How deep a value this node decodes may nest (default [`DEFAULT_MAX_NESTING`], 128):
    /// arrays, maps and enum variants inside one another, in a message, a spawn's argument, an
    /// ask's answer or a remote process's output. A deeper one is refused as undecodable
    /// (`Decode`, counted and traced) before serde reads it: serde decodes by recursion, and a
    /// value thousands of levels deep — one message of a recursive type, from a peer or forged
    /// by any client of the server — would overflow the decoding thread's stack, which aborts
    /// the whole program. Raise it only for types that nest that deep, and keep the decoding
    /// threads' stacks in proportion (a few hundred bytes a level in a release build, a few KiB
    /// in a debug one). Zero is refused at start (`ClusterError::Config`).
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222").max_nesting(256);
    /// # let _ = cluster;
    /// ```
    pub fn max_nesting(mut self, levels: usize) -> Cluster {
        self.max_nesting = levels;
        self
    }

    /// How many servers of a NATS cluster keep the membership bucket (default 1; at most 5).
    /// Use 3 on a three-server cluster, so membership survives one server's loss. Only the node
    /// that creates the bucket decides.
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = procsched::cluster::Cluster::nats("nats://a:4222,nats://b:4222,nats://c:4222")
    ///     .replicas(3);
    /// # let _ = cluster;
    /// ```
    pub fn replicas(mut self, replicas: usize) -> Cluster {
        self.replicas = replicas;
        self
    }

    /// `async-nats` connection options (credentials, TLS, reconnect policy…), passed through.
    /// The node adds its own name and event callback.
    ///
    /// # Examples
    ///
    /// ```
    /// let options = async_nats::ConnectOptions::new().user_and_password("u".into(), "p".into());
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222").connect_options(options);
    /// # let _ = cluster;
    /// ```
    pub fn connect_options(mut self, options: async_nats::ConnectOptions) -> Cluster {
        self.options = Some(options);
        self
    }

    /// Registers message type `M` under `name`: other nodes' messages of that name are decoded
    /// as `M` and delivered, and this node's `M`s can be sent to other nodes (which must
    /// register the same name for the same shape). A name is one type's, and a type has one
    /// name: [`Node::start`](super::Node::start) refuses (`ClusterError::Config`, naming the
    /// name and both types) a name registered for two types, or a type under two names;
    /// registering the same type under the same name again changes nothing.
    ///
    /// # Examples
    ///
    /// See [`Cluster`].
    pub fn message<M>(mut self, name: &str) -> Cluster
    where
        M: serde::Serialize + DeserializeOwned + Send + 'static,
    {
        self.registry.message::<M>(name);
        self
    }

    /// Registers `body` as spawnable by other nodes under `name` (see
    /// [`Node::spawn_on`](super::Node::spawn_on)); its argument `A` is decoded from the
    /// request, and its output `T` encoded for whoever awaits it
    /// ([`Node::spawn_on_with_handle`](super::Node::spawn_on_with_handle)). A name runs one
    /// body: [`Node::start`](super::Node::start) refuses (`ClusterError::Config`) a name
    /// registered for two bodies; the same function (or a closure that captures nothing)
    /// registered again under its name changes nothing. A body procsched cannot compare — a
    /// closure with state, or a `fn` pointer (two may point at different functions) —
    /// registered twice under one name is refused too.
    ///
    /// # Examples
    ///
    /// See [`Cluster`].
    pub fn spawnable<A, M, F, Fut, T, E>(self, name: &str, body: F) -> Cluster
    where
        A: DeserializeOwned + Send + 'static,
        M: Send + 'static,
        F: Fn(ProcessCx<M>, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: serde::Serialize + Send + 'static,
        E: Into<BoxError>,
    {
        self.spawnable_with(name, ChildOptions::new(), body)
    }

    /// [`spawnable`](Self::spawnable), each instance spawned with `options`: a mailbox bound
    /// of its own, whoever asks for it ([`Node::spawn_on`](super::Node::spawn_on) from any
    /// node, a [`RemoteChild`](super::RemoteChild) placed here, or this node itself). The
    /// node that runs a body decides what its instances may hold: the bound is this node's
    /// registration, not the request's. Registered twice under one name with different
    /// options is refused by [`Node::start`](super::Node::start), as two bodies are.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::cluster::Cluster;
    /// use procsched::prelude::*;
    /// use procsched::supervision::ChildOptions;
    ///
    /// // A session holds at most 64 waiting events: past that, a send is refused
    /// // `MailboxFull` (which `send_acked` reports to a sender on another node).
    /// let cluster = Cluster::nats("nats://127.0.0.1:4222")
    ///     .message::<String>("event")
    ///     .spawnable_with(
    ///         "session",
    ///         ChildOptions::new().mailbox_capacity(64),
    ///         |cx: ProcessCx<String>, user: String| async move {
    ///             let first = cx.recv().await?;
    ///             Ok::<_, BoxError>(format!("{user}: {first}"))
    ///         },
    ///     );
    /// # let _ = cluster;
    /// ```
    pub fn spawnable_with<A, M, F, Fut, T, E>(
        mut self,
        name: &str,
        options: ChildOptions,
        body: F,
    ) -> Cluster
    where
        A: DeserializeOwned + Send + 'static,
        M: Send + 'static,
        F: Fn(ProcessCx<M>, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: serde::Serialize + Send + 'static,
        E: Into<BoxError>,
    {
        self.registry.spawnable(name, options, body);
        self
    }

    /// Registers a state machine ([`Process`]) as spawnable by other nodes under `name`: a
    /// spawn's argument `A` is decoded from the request and handed to `make`, whose process is
    /// then spawned as [`SchedulerHandle::spawn`](crate::SchedulerHandle::spawn) would, its
    /// [`init`](Process::init) called with `name` as the entry method and an empty input; its
    /// output (`P::Output`) is encoded for whoever awaits it
    /// ([`Node::spawn_on_with_handle`](super::Node::spawn_on_with_handle)). Spawned from any
    /// node, placed by a [`RemoteChild`](super::RemoteChild), or spawned by this node itself,
    /// it is the same process, refused the same way: an `init` error comes back as
    /// `RemoteError::Spawn(SpawnError::Init(..))`, a panic in `make` or `init` as
    /// `SpawnError::InitPanicked`. Messages of a registered type reach it as
    /// [`Event::Message`](crate::state_machine::Event::Message)s whose payload holds the value.
    ///
    /// `make` shares the name space of [`spawnable`](Self::spawnable): a name runs one body, as
    /// there.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::cluster::Cluster;
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Event, Events, Process, StepOutput};
    ///
    /// /// Adds up `u64` messages until it has `left` of them.
    /// struct Tally { left: u32, sum: u64 }
    ///
    /// impl Process for Tally {
    ///     type Output = u64;
    ///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
    ///         for event in events.drain() {
    ///             if let Event::Message(message) = event {
    ///                 self.sum += message.payload.take::<u64>()?;
    ///                 self.left -= 1;
    ///             }
    ///         }
    ///         if self.left == 0 { out.done(self.sum) } else { out.wait() }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// // `node.spawn_on(Placement::LeastLoaded, "tally", 3u32)` on any node starts one.
    /// let cluster = Cluster::nats("nats://127.0.0.1:4222")
    ///     .message::<u64>("amount")
    ///     .spawnable_process("tally", |left: u32| Tally { left, sum: 0 });
    /// # let _ = cluster;
    /// ```
    pub fn spawnable_process<A, P, F>(self, name: &str, make: F) -> Cluster
    where
        A: DeserializeOwned + Send + 'static,
        P: Process,
        P::Output: serde::Serialize,
        F: Fn(A) -> P + Send + Sync + 'static,
    {
        self.spawnable_process_with(name, ChildOptions::new(), make)
    }

    /// [`spawnable_process`](Self::spawnable_process), each instance spawned with `options`
    /// (as [`spawnable_with`](Self::spawnable_with)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::cluster::Cluster;
    /// use procsched::prelude::*;
    /// use procsched::state_machine::{Events, Process, StepOutput};
    /// use procsched::supervision::ChildOptions;
    ///
    /// struct Idle;
    /// impl Process for Idle {
    ///     type Output = ();
    ///     fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
    ///         out.idle();
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let cluster = Cluster::nats("nats://127.0.0.1:4222")
    ///     .spawnable_process_with("idle", ChildOptions::new().mailbox_capacity(16), |(): ()| Idle);
    /// # let _ = cluster;
    /// ```
    pub fn spawnable_process_with<A, P, F>(
        mut self,
        name: &str,
        options: ChildOptions,
        make: F,
    ) -> Cluster
    where
        A: DeserializeOwned + Send + 'static,
        P: Process,
        P::Output: serde::Serialize,
        F: Fn(A) -> P + Send + Sync + 'static,
    {
        self.registry.spawnable_process(name, options, make);
        self
    }

    /// The most this node holds encoded for one other node and not yet taken by async-nats
    /// (default [`DEFAULT_MAX_BACKLOG`], 256 MiB), in bytes. Once a lane holds that much, a
    /// fire-and-forget [`send`](super::RemoteAddr::send) on it is refused with
    /// [`RemoteError::Backlogged`](super::RemoteError::Backlogged), its message handed back,
    /// and counted ([`NodeStats::backlogged`](super::NodeStats::backlogged)):
    /// without a bound, a sender faster than the network — or any sender while the NATS
    /// connection is down — grows the node's memory until it dies.
    /// [`send_wait`](super::RemoteAddr::send_wait) waits for room instead; acked sends, asks,
    /// replies and the cluster's own signals (links, monitors, exits) are never refused for it
    /// (each of the first two waits for an answer, which bounds them; the others must not be
    /// lost to a flood) — except the answers to a name with no membership entry (a client
    /// posing as a node: what it asks for is answered while its lane holds less than
    /// [`max_frame`](Self::max_frame)). The message that reaches the limit is taken: a lane
    /// passes it by at most one message (and those of senders that waited together). The
    /// bound is this node's lane only: async-nats queues up to
    /// `ConnectOptions::client_capacity` publishes of its own behind it (2 048 by default, each
    /// a frame of up to 32 KiB: up to 64 MiB more, not in
    /// [`NodeStats::backlog_bytes`](super::NodeStats::backlog_bytes)), and the receiving node
    /// holds what it has read and not yet delivered. At least [`max_frame`](Self::max_frame),
    /// else refused at start (`ClusterError::Config`).
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = procsched::cluster::Cluster::nats("nats://127.0.0.1:4222").max_backlog(16 << 20);
    /// # let _ = cluster;
    /// ```
    pub fn max_backlog(mut self, bytes: usize) -> Cluster {
        self.max_backlog = bytes;
        self
    }

    /// Checks what `Node::start` needs, before any connection.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let token = |what: &str, value: &str| {
            if is_token(value) {
                Ok(())
            } else {
                Err(format!(
                    "the {what} {value:?} must be 1 to 64 characters of [A-Za-z0-9_-]"
                ))
            }
        };
        token("node name", &self.name)?;
        token("subject prefix", &self.prefix)?;
        token("bucket", &self.bucket)?;
        if self.servers.is_empty() {
            return Err("no NATS server given".to_owned());
        }
        if self.heartbeat.is_zero() || self.down_after <= self.heartbeat {
            return Err("`down_after` must exceed a non-zero `heartbeat`".to_owned());
        }
        // The bucket keeps an entry for three heartbeats, and NATS refuses a key-value max age
        // under 100 ms: refused here, typed and named, rather than by the server at start.
        if self.heartbeat < Duration::from_millis(34) {
            return Err(format!(
                "`heartbeat` must be at least 34 ms (it is {:?}): the membership bucket keeps \
                 entries for three heartbeats, and NATS keeps a key-value entry at least 100 ms",
                self.heartbeat
            ));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err("`replicas` must be 1 to 5".to_owned());
        }
        if self.max_frame < 1024 {
            return Err("`max_frame` must be at least 1 KiB".to_owned());
        }
        if self.max_backlog < self.max_frame {
            return Err(format!(
                "`max_backlog` ({} bytes) must be at least `max_frame` ({} bytes)",
                self.max_backlog, self.max_frame
            ));
        }
        // Zero would refuse every struct, enum and collection a user sends: a setting that can
        // only be a mistake, refused at start rather than as every message's `Decode` error.
        if self.max_nesting == 0 {
            return Err("`max_nesting` must be at least 1".to_owned());
        }
        self.registry.check()
    }
}

/// A node name, subject prefix or bucket: 1 to 64 bytes of `[A-Za-z0-9_-]`.
pub(crate) fn is_token(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
