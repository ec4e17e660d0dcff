//! What one Connection owes its peer: the response queue, its bounds, and the task that writes
//! responses and notifications to the socket (whatever is queued at once goes out in one write).
//!
//! A call is *owed* from the moment it is admitted until the writer takes its response off the
//! queue. Owed calls are bounded per lane exactly like a bridge bounds its pending calls (256
//! ordinary, 16 out-of-band), so a peer that floods the Broker without reading gets each call
//! beyond the bound answered at once with the contract's retryable `result_too_large`, without
//! dispatch. Those refusals are queued too; a peer that lets more than `MAX_QUEUED_REFUSALS`
//! pile up is not reading at all, and its Connection is closed. Counting until the writer takes
//! a response (not until it is written) means a bridge, which sends its next call only after it
//! read a response, can never be refused by the Broker for a call its own bound admitted.
//!
//! This file knows no method or tool: lanes and lines only.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::sync::mpsc;

use crate::framing;
use crate::ipc::IpcWriter;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::methods::{Lane, MAX_PENDING_ORDINARY, MAX_PENDING_OUT_OF_BAND};

/// Refusals (and other unadmitted answers) queued for a peer that does not read, before its
/// Connection is closed: four times the admitted bound, far more than a peer that reads ever
/// has queued.
pub const MAX_QUEUED_REFUSALS: usize = 4 * (MAX_PENDING_ORDINARY + MAX_PENDING_OUT_OF_BAND);

/// A line on its way to the peer, with the lane whose owed count it settles (`None` for an
/// unadmitted answer).
struct Outgoing {
    lane: Option<Lane>,
    line: String,
}

#[derive(Default)]
struct Owed {
    ordinary: AtomicUsize,
    out_of_band: AtomicUsize,
    refusals: AtomicUsize,
}

impl Owed {
    fn lane(&self, lane: Lane) -> &AtomicUsize {
        match lane {
            Lane::Ordinary => &self.ordinary,
            Lane::OutOfBand => &self.out_of_band,
        }
    }

    /// The writer took `outgoing` off the queue: what it owed is settled.
    fn settle(&self, outgoing: Outgoing) -> String {
        match outgoing.lane {
            Some(lane) => self.lane(lane).fetch_sub(1, Ordering::SeqCst),
            None => self.refusals.fetch_sub(1, Ordering::SeqCst),
        };
        outgoing.line
    }
}

/// Whether a call was admitted, and if not, whether the Connection should close.
pub enum Admission {
    Admitted,
    /// Refused with `result_too_large`; the refusal is queued.
    Refused,
    /// The peer is not reading: close the Connection.
    Overrun,
}

/// The sending side of the response queue. Cheap to clone.
#[derive(Clone)]
pub struct Responses {
    tx: mpsc::UnboundedSender<Outgoing>,
    owed: Arc<Owed>,
}

impl Responses {
    /// Admits a call on `lane`, or queues its refusal.
    pub fn admit(&self, lane: Lane, id: &serde_json::Value) -> Admission {
        let limit = match lane {
            Lane::Ordinary => MAX_PENDING_ORDINARY,
            Lane::OutOfBand => MAX_PENDING_OUT_OF_BAND,
        };
        let counter = self.owed.lane(lane);
        if counter.fetch_add(1, Ordering::SeqCst) < limit {
            return Admission::Admitted;
        }
        counter.fetch_sub(1, Ordering::SeqCst);
        let refusal = RpcError::new(
            ErrorCode::ResultTooLarge,
            "too many calls pending on this Connection; retry after responses arrive",
        )
        .with_context("pendingLimit", json!(limit));
        match self.unadmitted(refusal.response(id)) {
            true => Admission::Refused,
            false => Admission::Overrun,
        }
    }

    /// Queues the response of an admitted call on `lane`.
    pub fn answer(&self, lane: Lane, line: String) {
        let _ = self.tx.send(Outgoing {
            lane: Some(lane),
            line,
        });
    }

    /// Queues an answer to something that was never admitted (a framing error, a refusal).
    /// False when the peer already has `MAX_QUEUED_REFUSALS` of them unread.
    pub fn unadmitted(&self, line: String) -> bool {
        if self.owed.refusals.fetch_add(1, Ordering::SeqCst) >= MAX_QUEUED_REFUSALS {
            self.owed.refusals.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let _ = self.tx.send(Outgoing { lane: None, line });
        true
    }
}

/// The response queue of a new Connection and the task that drains it (and the notification
/// queue) into the socket. Responses go first; notifications fill the gaps.
pub fn start_writer(
    writer: IpcWriter,
    notifications: mpsc::Receiver<String>,
) -> (Responses, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let owed = Arc::new(Owed::default());
    let task = tokio::spawn(write_peer(writer, rx, notifications, owed.clone()));
    (Responses { tx, owed }, task)
}

/// Lines taken off the queues for one batched write at most, so a flood of notifications
/// still lets the writer flush and take the next response.
const MAX_LINES_PER_WRITE: usize = 256;

async fn write_peer(
    writer: IpcWriter,
    mut responses: mpsc::UnboundedReceiver<Outgoing>,
    mut notifications: mpsc::Receiver<String>,
    owed: Arc<Owed>,
) {
    let mut writer = framing::LineWriter::new(writer);
    let mut notifications_open = true;
    loop {
        let line = tokio::select! {
            biased;
            response = responses.recv() => match response {
                Some(outgoing) => owed.settle(outgoing),
                None => return,
            },
            notification = notifications.recv(), if notifications_open => match notification {
                Some(line) => line,
                None => {
                    notifications_open = false;
                    continue;
                }
            },
        };
        if writer.queue(line.as_bytes()).await.is_err() {
            return;
        }
        drop(line);
        // Whatever else is queued already goes out in the same write: responses first, then
        // notifications, as the select above prefers them.
        let mut taken = 1;
        while taken < MAX_LINES_PER_WRITE {
            let line = match responses.try_recv() {
                Ok(outgoing) => owed.settle(outgoing),
                Err(_) => match notifications_open.then(|| notifications.try_recv()) {
                    Some(Ok(line)) => line,
                    _ => break,
                },
            };
            if writer.queue(line.as_bytes()).await.is_err() {
                return;
            }
            taken += 1;
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn responses() -> (Responses, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let owed = Arc::new(Owed::default());
        (Responses { tx, owed }, rx)
    }

    fn admitted(admission: Admission) -> &'static str {
        match admission {
            Admission::Admitted => "admitted",
            Admission::Refused => "refused",
            Admission::Overrun => "overrun",
        }
    }

    #[test]
    fn calls_are_owed_per_lane_until_the_writer_takes_their_response() {
        let (responses, mut queue) = responses();
        let id = json!(1);
        for _ in 0..MAX_PENDING_ORDINARY {
            assert_eq!(admitted(responses.admit(Lane::Ordinary, &id)), "admitted");
        }
        assert_eq!(admitted(responses.admit(Lane::Ordinary, &id)), "refused");
        // The other lane has its own bound.
        assert_eq!(admitted(responses.admit(Lane::OutOfBand, &id)), "admitted");
        // The refusal is a queued line that says why.
        let refusal = queue.try_recv().unwrap();
        assert!(refusal.lane.is_none());
        assert!(
            refusal.line.contains("result_too_large"),
            "{}",
            refusal.line
        );
        responses.owed.settle(refusal);
        // An answer queued but not yet taken still counts; taken, it frees its slot.
        responses.answer(Lane::Ordinary, "{}".to_owned());
        assert_eq!(admitted(responses.admit(Lane::Ordinary, &id)), "refused");
        let answer = queue.try_recv().unwrap();
        assert_eq!(answer.lane, Some(Lane::Ordinary));
        responses.owed.settle(answer);
        let refusal = queue.try_recv().unwrap();
        assert!(refusal.lane.is_none());
        responses.owed.settle(refusal);
        assert_eq!(admitted(responses.admit(Lane::Ordinary, &id)), "admitted");
        assert_eq!(admitted(responses.admit(Lane::Ordinary, &id)), "refused");
    }

    #[test]
    fn a_peer_that_never_reads_is_overrun() {
        let (responses, _queue) = responses();
        let id = json!(1);
        for _ in 0..MAX_PENDING_OUT_OF_BAND {
            responses.admit(Lane::OutOfBand, &id);
        }
        for _ in 0..MAX_QUEUED_REFUSALS {
            assert_eq!(admitted(responses.admit(Lane::OutOfBand, &id)), "refused");
        }
        assert_eq!(admitted(responses.admit(Lane::OutOfBand, &id)), "overrun");
        assert!(!responses.unadmitted("{}".to_owned()));
    }
}
