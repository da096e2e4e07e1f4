//! A single-producer, single-consumer ring of records in shared memory.
//!
//! Positions are free-running `u64` byte counters; the index into the data
//! area is the position modulo the (power-of-two) capacity. Each record is an
//! 8-byte header word (a mark and the payload length) followed by the
//! payload, padded so that the next record starts on a cache line. The
//! producer copies the payload, zeroes the
//! header word where the *next* record will start, and only then publishes
//! the record by storing its header (release). So the consumer learns that
//! data has arrived by polling the header word in front of it, which shares
//! a cache line with a small record's payload (records start on a line): a
//! small call crosses between CPUs as one cache line, as a raw ping-pong
//! does, with no separate head counter to fetch. The consumer gives space
//! back by storing `tail`, not after every record but when a quarter of the
//! ring is waiting to be given back or before it waits for data, so the
//! store and its fence stay off a call's critical path; the producer reads
//! `tail` only when its cached copy says the ring is too full (and it can
//! only wait for space when the ring is full, which makes the consumer give
//! space back before it runs dry).
//!
//! A sleeping side announces itself in a `*_waiting` word and sleeps on a
//! futex sequence word, so the other side issues a wake-up system call only
//! when someone sleeps. The producer wakes the consumer only on
//! [`Producer::flush`] (or when it must wait for space, or when a large frame
//! is streaming), which is what lets asynchronous calls pile up in the ring
//! until a synchronisation point.
//!
//! The peer is untrusted: it can write any value anywhere in the ring at any
//! time. Record headers and the peer's `tail` are validated on every use,
//! and payload bytes are only ever copied out, never interpreted in place.
//!
//! The pieces, one file each: the shared region's layout and the raw
//! access to it (`layout`), how a side waits for the other and wakes it
//! (`handoff`), the writing end (`producer`), the reading end
//! (`consumer`), and a consumer over a forged image for the fuzzer
//! (`harness`).

mod consumer;
mod handoff;
pub mod harness;
mod layout;
mod producer;
#[cfg(test)]
mod tests;

pub use consumer::Consumer;
pub use handoff::{Handoff, Liveness};
pub use layout::{record_header, RingHeader, DATA_SEQ_OFFSET, HEADER_BYTES};
pub use producer::{HeldRecord, Producer};
