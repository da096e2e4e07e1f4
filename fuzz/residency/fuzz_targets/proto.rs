//! What a subverted tenant may send its device's ledger: arbitrary
//! datagrams (u8 length, then bytes), decoded as the listener decodes
//! them, and the well-formed ones run by a ledger that also serves an
//! honest tenant. Nothing may panic; a decoded message re-encodes to the
//! same bytes; the ledger keeps within its budget and its counts add up;
//! the honest tenant's requests are all answered and its share stays its
//! own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wormhole_residency::ledger::{Ledger, LedgerConfig, Outbox};
use wormhole_residency::proto::{FromTenant, ToTenant, MAX_MESSAGE};
use wormhole_residency::Policy;

const HOSTILE: u32 = 1;
const HONEST: u32 = 2;

/// The honest tenant: at most one request open; every byte it holds is in
/// use, so it answers every `Evict` with `Busy`.
struct Honest {
    seq: u32,
    open: bool,
    held: u64,
}

impl Honest {
    /// Runs the ledger's messages (and what answering them leads to).
    fn drain(&mut self, l: &mut Ledger, out: &mut Outbox, now: u64) {
        for _ in 0..10_000 {
            let Some((t, m)) = (!out.is_empty()).then(|| out.remove(0)) else {
                return;
            };
            assert_eq!(ToTenant::decode(&m.encode()), Ok(m));
            if t != HONEST {
                continue;
            }
            match m {
                ToTenant::Grant { seq } if seq == self.seq => {
                    self.open = false;
                    self.held = l.resident(HONEST).unwrap_or(0);
                }
                ToTenant::Refuse { seq } if seq == self.seq => self.open = false,
                ToTenant::Evict { seq, .. } => l.handle(HONEST, FromTenant::Busy { seq }, now, out),
                _ => {}
            }
        }
        panic!("the ledger kept talking");
    }
}

fuzz_target!(|data: &[u8]| {
    let eager = data.first().is_some_and(|b| b & 1 == 1);
    let mut l = Ledger::new(LedgerConfig {
        budget: 1 << 20,
        oversubscribe: true,
        policy: if eager { Policy::Eager } else { Policy::Delay },
        ..LedgerConfig::default()
    });
    l.join(HOSTILE);
    l.join(HONEST);
    let mut now = 0u64;
    let mut out = Outbox::new();
    let mut h = Honest {
        seq: 0,
        open: false,
        held: 0,
    };
    let mut rest = data.get(1..).unwrap_or(&[]);
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (msg, tail) = tail.split_at(len);
        rest = tail;
        if let Ok(m) = FromTenant::decode(msg) {
            assert!(msg.len() <= MAX_MESSAGE);
            assert_eq!(m.encode(), msg, "decoding is canonical");
            l.handle(HOSTILE, m, now, &mut out);
        } else if msg.first().is_some_and(|b| b % 4 == 0) && !h.open {
            // The honest tenant asks for some room now and then.
            h.seq += 1;
            h.open = true;
            let bytes = (msg.len() as u64) << 12;
            let need = FromTenant::Need {
                seq: h.seq,
                bytes,
                restore: false,
                retry: false,
            };
            l.handle(HONEST, need, now, &mut out);
        } else {
            now += u64::from(msg.first().copied().unwrap_or(1)) * 10_000_000;
            l.tick(now, &mut out);
        }
        h.drain(&mut l, &mut out, now);
        assert!(l.used() <= l.budget(), "within the budget");
        let sum: u64 = l.shares().map(|(_, r, _)| r).sum();
        assert_eq!(sum, l.used(), "the counts add up");
        assert_eq!(
            l.resident(HONEST),
            Some(h.held),
            "nobody but the honest tenant changes its share"
        );
    }
    // Time passes: the honest tenant's request is answered.
    for _ in 0..64 {
        if !h.open {
            break;
        }
        now += 1_000_000_000;
        l.tick(now, &mut out);
        h.drain(&mut l, &mut out, now);
    }
    assert!(!h.open, "the honest tenant's request was answered");
    l.leave(HOSTILE, now, &mut out);
    h.drain(&mut l, &mut out, now);
    assert_eq!(l.used(), h.held, "a dead tenant's share comes back");
});
