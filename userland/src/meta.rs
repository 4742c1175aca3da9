//! Metadata calls in two halves, so a task can yield while the directory
//! answers (the types live in `osapi::meta`, shared with the node's data
//! path that answers them). `Os::meta_start` sends a call and returns a
//! ticket (or the result, for an OS or a call that answers at once),
//! `Os::meta_poll` asks whether a ticket is done, and `Os::meta_wait`
//! waits a little for answers when nothing else can run. The task
//! executor ([`crate::task::Tasks`]) is the one caller; outside tasks the
//! shell calls the synchronous `Os` methods.

pub use osapi::meta::*;
