//! What one live process costs in memory, allocation by allocation: the composition behind the
//! process bench's `burst_spawn` memory row (`docs/bench-process.md`).
//!
//! ```text
//! cargo run --release -p procsched-benches --example memprobe -- [PROCESSES]
//! ```
//!
//! Spawns PROCESSES (default 100 000) processes from this thread; each yields one command to an
//! async handler that waits on a closed semaphore, in the shape of `burst_spawn`'s memory run
//! (a `Payload` reply and output, the wait in a nested `async fn`: the sizes of the handler
//! future and of the process task match the bench's). Once every handler has started, it
//! prints, per live process:
//!
//! - the live heap growth (bytes requested, through a counting global allocator);
//! - the peak RSS growth (`VmHWM`, what the bench reports; it includes malloc's headers and
//!   rounding, and whatever the allocator's arenas keep);
//! - the allocations still live, by requested size (those made at least once per process on
//!   average), which names the parts: the process's cell, its task, the handler's task (on
//!   the scheduler's executor since the bridge keeps waiting handlers there) and its boxed
//!   future;
//! - on glibc, the free space malloc keeps in its arenas (`mallinfo2`): memory that is resident
//!   but holds no allocation, such as the alignment holes `memalign` left around tokio's
//!   128-byte-aligned tasks when waiting handlers were tokio tasks.
//!
//! Then it opens the semaphore and checks every process finishes with the handler's reply.

use procsched::prelude::*;
use procsched::{
    error::CommandError,
    state_machine::{Event, Events, Process, StepOutput},
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Requested sizes are counted per 8-byte class up to this many classes (the last one holds
/// everything larger).
const CLASSES: usize = 128;

/// Counts live bytes, and live allocations per size class while `TRACKING`.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static TRACKING: AtomicBool = AtomicBool::new(false);
static LIVE_BY_CLASS: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];

fn class(size: usize) -> usize {
    (size / 8).min(CLASSES - 1)
}

// SAFETY: forwards every call to the system allocator unchanged; the counters are plain atomics
// and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Relaxed);
        if TRACKING.load(Relaxed) {
            LIVE_BY_CLASS[class(layout.size())].fetch_add(1, Relaxed);
        }
        // SAFETY: the caller's contract for `alloc`, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Relaxed);
        if TRACKING.load(Relaxed) {
            // May wrap for blocks allocated before tracking began: read as signed below.
            LIVE_BY_CLASS[class(layout.size())].fetch_sub(1, Relaxed);
        }
        // SAFETY: the caller's contract for `dealloc`, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The command each process yields: waits at the gate, counting its arrival.
struct Gate {
    open: Arc<tokio::sync::Semaphore>,
    arrived: Arc<AtomicUsize>,
}
procsched::command!(Gate => Payload);

impl Gate {
    /// Arrives and waits until the gate opens (closing the semaphore opens it).
    async fn pass(&self) {
        self.arrived.fetch_add(1, Relaxed);
        let _ = self.open.acquire().await;
    }
}

/// Yields one `Gate`, then finishes with its reply.
struct Waiter {
    gate: Option<Gate>,
}

impl Process for Waiter {
    type Output = Payload;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let Some(gate) = self.gate.take() {
            out.yield_command(1, gate);
            out.wait();
            return Ok(());
        }
        match events.pop() {
            Some(Event::YieldComplete { result, .. }) => out.done(result?),
            _ => out.wait(),
        }
        Ok(())
    }
}

/// Bytes glibc's malloc holds free in its arenas (`mallinfo2().fordblks`); `None` elsewhere.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_free_bytes() -> Option<usize> {
    /// glibc's `struct mallinfo2` (glibc 2.33 and later): the layout must be whole, though only
    /// `fordblks` is read.
    #[repr(C)]
    #[allow(dead_code)]
    struct MallInfo2 {
        arena: usize,
        ordblks: usize,
        smblks: usize,
        hblks: usize,
        hblkhd: usize,
        usmblks: usize,
        fsmblks: usize,
        uordblks: usize,
        fordblks: usize,
        keepcost: usize,
    }
    extern "C" {
        fn mallinfo2() -> MallInfo2;
    }
    // SAFETY: `mallinfo2` takes no arguments and returns the struct by value; it only reads
    // malloc's own statistics (under its arena locks).
    let info = unsafe { mallinfo2() };
    Some(info.fordblks)
}

/// Bytes glibc's malloc holds free in its arenas (`mallinfo2().fordblks`); `None` elsewhere.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn malloc_free_bytes() -> Option<usize> {
    None
}

/// This process's peak RSS, in bytes.
fn vm_hwm() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kib| {
            kib.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let processes: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 100_000,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .async_handler(|gate: Gate| async move {
            gate.pass().await;
            Ok::<Payload, CommandError>(Payload::new(1u64))
        })
        .build()?;
    let open = Arc::new(tokio::sync::Semaphore::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(processes);

    let (bytes_before, hwm_before) = (LIVE_BYTES.load(Relaxed), vm_hwm());
    let free_before = malloc_free_bytes();
    TRACKING.store(true, Relaxed);
    for _ in 0..processes {
        let gate = Gate {
            open: open.clone(),
            arrived: arrived.clone(),
        };
        handles.push(sched.spawn(Waiter { gate: Some(gate) }, "run", Payload::empty())?);
    }
    // Every handler has started (and is about to wait) once it has counted itself.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while arrived.load(Relaxed) < processes {
        if std::time::Instant::now() > deadline {
            return Err("not every process reached the gate within 60 s".into());
        }
        std::thread::yield_now();
    }
    TRACKING.store(false, Relaxed);
    let (bytes_after, hwm_after) = (LIVE_BYTES.load(Relaxed), vm_hwm());

    let per = |bytes: usize| bytes as f64 / processes as f64;
    println!("{processes} live processes, each waiting on an async handler:");
    println!(
        "  live heap growth: {:.0} B per process",
        per(bytes_after.saturating_sub(bytes_before))
    );
    println!(
        "  peak RSS growth:  {:.0} B per process",
        per(hwm_after.saturating_sub(hwm_before))
    );
    if let (Some(before), Some(after)) = (free_before, malloc_free_bytes()) {
        println!(
            "  malloc's free space growth: {:.0} B per process (resident, holding no allocation)",
            per(after.saturating_sub(before))
        );
    }
    println!(
        "  (the spawning thread's handle vector: {} B per process)",
        std::mem::size_of::<ProcessHandle<Payload>>()
    );
    println!("  live allocations made during the burst, by requested size:");
    for (index, count) in LIVE_BY_CLASS.iter().enumerate() {
        let live = count.load(Relaxed) as isize;
        if live >= processes as isize {
            let size = if index == CLASSES - 1 {
                format!(">= {} B", index * 8)
            } else {
                format!("{}-{} B", index * 8, index * 8 + 7)
            };
            println!(
                "    {size:>12}: {:.2} per process",
                live as f64 / processes as f64
            );
        }
    }

    open.close();
    for handle in handles {
        let reply = sched.block_on(handle)?;
        assert_eq!(
            reply.take::<u64>().ok(),
            Some(1),
            "every process finishes with the handler's reply"
        );
    }
    sched.shutdown(std::time::Duration::from_secs(10));
    Ok(())
}
