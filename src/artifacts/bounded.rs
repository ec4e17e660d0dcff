//! Copies between protected storage and client paths, bounded in time.
//!
//! A read or write on a client path can block forever (a hung network or FUSE file system)
//! and a blocked system call cannot be interrupted. So each such copy runs on a thread of its
//! own (never on tokio's blocking pool, whose threads the runtime waits for when the Broker
//! exits), reports its progress, and the async caller gives up when no byte moved for the
//! stall bound or the whole copy took longer than the total bound: that one call fails with
//! `Stalled`, the Connection and the Broker carry on. A copy that was given up never becomes
//! visible: the worker asks [`Progress::begin_finish`] before its final step and undoes its
//! work when the answer is no. Owns no file policy; `service.rs` decides what is copied.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::error::ArtifactError;

/// When a copy of a client file counts as stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// No byte moved for this long: a healthy disk moves a 256 KiB chunk in milliseconds and
    /// even a slow network file system within a second or two, so 15 s means a hung one.
    pub stall: Duration,
    /// The whole copy: 256 MiB (the largest Artifact) at a slow 2.5 MB/s takes under 2
    /// minutes. Catches a source that trickles a few bytes just often enough to beat `stall`.
    pub total: Duration,
}

/// The bounds of `artifacts/import` and `artifacts/export`.
pub const CLIENT_COPY_BOUNDS: Bounds = Bounds {
    stall: Duration::from_secs(15),
    total: Duration::from_secs(120),
};

/// Given-up copies whose threads are still blocked in the kernel. Each holds a thread and a
/// file descriptor; beyond this many, new copies fail at once instead of piling up more.
pub const MAX_STUCK_COPIES: usize = 8;

/// How often the waiting side looks at the progress counter.
const PROGRESS_POLL: Duration = Duration::from_millis(200);

const RUNNING: u8 = 0;
const FINISHING: u8 = 1;
const ABANDONED: u8 = 2;
const DONE: u8 = 3;

/// The worker's side: report bytes moved, ask before the final step.
pub struct Progress {
    bytes: AtomicU64,
    state: AtomicU8,
    /// In a step that moves no bytes it could report (an fsync of a large file to a slow
    /// disk): only the total bound applies until the next `advance`.
    opaque_step: AtomicBool,
}

impl Progress {
    /// Records that `total` bytes have moved so far.
    pub fn advance(&self, total: u64) {
        self.opaque_step.store(false, Ordering::Relaxed);
        self.bytes.store(total, Ordering::Relaxed);
    }

    /// Starts a step without byte progress to report (syncing the written file): the stall
    /// bound is suspended, the total bound still applies.
    pub fn begin_opaque_step(&self) {
        self.opaque_step.store(true, Ordering::Relaxed);
    }

    /// Called right before the step that makes the copy visible (rename, metadata row).
    /// `false`: the caller gave up; undo and return.
    pub fn begin_finish(&self) -> bool {
        self.state
            .compare_exchange(RUNNING, FINISHING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// Runs bounded copies; one per Broker (inside the Artifact service), cheap to clone.
#[derive(Clone, Default)]
pub struct Copies {
    stuck: Arc<AtomicUsize>,
}

impl Copies {
    /// Given-up copies whose threads have not returned yet.
    pub fn stuck(&self) -> usize {
        self.stuck.load(Ordering::Acquire)
    }

    /// Runs `work` on its own thread and waits for it within `bounds`. `op` names the copy in
    /// the `Stalled` error ("import", "export").
    pub async fn run<T, F>(
        &self,
        op: &'static str,
        bounds: Bounds,
        work: F,
    ) -> Result<T, ArtifactError>
    where
        T: Send + 'static,
        F: FnOnce(&Progress) -> Result<T, ArtifactError> + Send + 'static,
    {
        let stalled = ArtifactError::Stalled {
            op,
            seconds: bounds.stall.as_secs(),
        };
        if self.stuck() >= MAX_STUCK_COPIES {
            return Err(stalled);
        }
        let progress = Arc::new(Progress {
            bytes: AtomicU64::new(0),
            state: AtomicU8::new(RUNNING),
            opaque_step: AtomicBool::new(false),
        });
        let (result_tx, mut result_rx) = oneshot::channel();
        let (worker_progress, stuck) = (progress.clone(), self.stuck.clone());
        std::thread::Builder::new()
            .name(format!("artifact-{op}"))
            .spawn(move || {
                let result = work(&worker_progress);
                if worker_progress.state.swap(DONE, Ordering::AcqRel) == ABANDONED {
                    stuck.fetch_sub(1, Ordering::AcqRel);
                }
                let _ = result_tx.send(result);
            })
            .map_err(|source| ArtifactError::Storage {
                op: "start a copy thread",
                source,
            })?;
        let started = Instant::now();
        let (mut last_bytes, mut last_moved) = (0, started);
        loop {
            match tokio::time::timeout(PROGRESS_POLL, &mut result_rx).await {
                Ok(Ok(result)) => return result,
                Ok(Err(_)) => return Err(worker_lost()),
                Err(_) => {}
            }
            let now = Instant::now();
            let bytes = progress.bytes.load(Ordering::Relaxed);
            if bytes != last_bytes || progress.opaque_step.load(Ordering::Relaxed) {
                (last_bytes, last_moved) = (bytes, now);
            }
            if now - last_moved < bounds.stall && now - started < bounds.total {
                continue;
            }
            // Counted before the state flips, so the worker's decrement never comes first.
            self.stuck.fetch_add(1, Ordering::AcqRel);
            match progress.state.compare_exchange(
                RUNNING,
                ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Err(stalled),
                Err(_) => {
                    // Already finishing (no client I/O left) or done: take its result.
                    self.stuck.fetch_sub(1, Ordering::AcqRel);
                    return result_rx.await.unwrap_or_else(|_| Err(worker_lost()));
                }
            }
        }
    }
}

fn worker_lost() -> ArtifactError {
    ArtifactError::Storage {
        op: "finish a copy",
        source: std::io::Error::other("the copy thread ended without a result"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn run<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    const SHORT: Bounds = Bounds {
        stall: Duration::from_millis(300),
        total: Duration::from_secs(60),
    };

    #[test]
    fn a_finished_copy_returns_its_result() {
        let copies = Copies::default();
        let got = run(copies.run("import", SHORT, |progress| {
            progress.advance(3);
            assert!(progress.begin_finish());
            Ok(7)
        }));
        assert_eq!(got.unwrap(), 7);
        assert_eq!(copies.stuck(), 0);
    }

    #[test]
    fn a_stuck_copy_fails_the_call_and_never_finishes() {
        let copies = Copies::default();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (finished_tx, finished_rx) = mpsc::channel::<bool>();
        let got = run(copies.run("import", SHORT, move |progress| {
            // Blocks like a read on a hung file system, until the test lets it go.
            let _ = release_rx.recv();
            let _ = finished_tx.send(progress.begin_finish());
            Ok(())
        }));
        assert!(
            matches!(got, Err(ArtifactError::Stalled { op: "import", .. })),
            "{got:?}"
        );
        assert_eq!(copies.stuck(), 1);
        release_tx.send(()).unwrap();
        assert!(
            !finished_rx.recv().unwrap(),
            "a given-up copy is told not to finish"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while copies.stuck() != 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            copies.stuck(),
            0,
            "the returned thread is no longer counted"
        );
    }

    #[test]
    fn progress_keeps_a_slow_copy_alive_and_stuck_copies_are_capped() {
        let copies = Copies::default();
        let patient = Bounds {
            stall: Duration::from_millis(1500),
            total: Duration::from_secs(60),
        };
        // Longer in total than the stall bound, but never silent for that long.
        let got = run(copies.run("import", patient, |progress| {
            for step in 1..=6u64 {
                std::thread::sleep(Duration::from_millis(400));
                progress.advance(step);
            }
            Ok(progress.begin_finish())
        }));
        assert!(got.unwrap(), "steady progress is never given up");
        let got = run(copies.run("export", SHORT, |progress| {
            progress.begin_opaque_step();
            std::thread::sleep(SHORT.stall * 3);
            Ok(progress.begin_finish())
        }));
        assert!(got.unwrap(), "a long sync is bounded only by the total");

        let mut releases = Vec::new();
        for _ in 0..MAX_STUCK_COPIES {
            let (tx, rx) = mpsc::channel::<()>();
            releases.push(tx);
            let got = run(copies.run("export", SHORT, move |_| {
                let _ = rx.recv();
                Ok(())
            }));
            assert!(matches!(got, Err(ArtifactError::Stalled { .. })));
        }
        let refused = run(copies.run("export", SHORT, |_| Ok(())));
        assert!(matches!(
            refused,
            Err(ArtifactError::Stalled { op: "export", .. })
        ));
        drop(releases);
    }
}
