//! The directory's log lines for membership and request events.

use dirsvc::server::Event;

/// Log each event of a pass.
pub(super) fn log_events(events: &[Event]) {
    for e in events {
        match e {
            Event::Joined { node, epoch } => {
                log::info!("node {node} joined cluster epoch {epoch}")
            }
            Event::Failed { node, silent_ms } => {
                log::warn!("node {node} failed: heartbeat silent for {silent_ms} ms")
            }
            Event::Left { node } => log::info!("node {node} left"),
            Event::Corrupt { node, error } => {
                log::warn!("node {node} failed: corrupt ring ({error:?})")
            }
            Event::FenceAsked { node, epoch } => log::warn!(
                "node {node}: fence asked for session {epoch}; its frames and the frames it mapped stay out of use until the fencer confirms or it rejoins"
            ),
            Event::Fenced {
                node,
                after_ms,
                by_rejoin,
            } => log::info!(
                "node {node} fenced after {after_ms} ms ({}); its frames may be reused",
                if *by_rejoin {
                    "it rejoined, having dropped its mappings"
                } else {
                    "confirmed by the host's fencer"
                }
            ),
            Event::FenceOverdue { node, waited_ms } => log::error!(
                "node {node}: no fencer confirmed its fence in {waited_ms} ms (is the ivshmem server with --fence-run-dir running?); its frames and the frames it mapped stay out of use until one does or it rejoins"
            ),
            Event::BadRequest { node, error } => {
                log::warn!("node {node}: malformed request ({error}), answered 'invalid'")
            }
        }
    }
}
