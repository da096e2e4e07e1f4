//! Output buffers for calls that write into memory of the server's (an info
//! query's value, a copy's destination), kept from one call to the next so
//! that a small call allocates nothing.

/// Buffers larger than this go back to the allocator: keeping them would
/// hold a large copy's memory for the tenant's life.
const KEEP_MAX: usize = 64 << 10;
/// A call has at most a few output buffers.
const KEEP_COUNT: usize = 4;

/// Makes `v` hold `size` zero bytes, failing cleanly (not aborting) if
/// `size` exceeds `max` or memory is short.
pub fn fill_zeroed(v: &mut Vec<u8>, size: u64, max: u64) -> Result<(), TooLarge> {
    if size > max {
        return Err(TooLarge);
    }
    let n = usize::try_from(size).map_err(|_| TooLarge)?;
    v.clear();
    v.try_reserve_exact(n).map_err(|_| TooLarge)?;
    v.resize(n, 0);
    Ok(())
}

/// A tenant's spare output buffers.
#[derive(Debug, Default)]
pub struct OutBufs {
    spare: Vec<Vec<u8>>,
}

/// An output buffer could not be had within the tenant's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

impl OutBufs {
    /// A zeroed buffer of `size` bytes (zeroed so that what a call leaves
    /// unwritten reads as zeros, never as an earlier call's data), or
    /// `TooLarge` if `size` exceeds `max` or memory is short.
    pub fn take(&mut self, size: u64, max: u64) -> Result<Vec<u8>, TooLarge> {
        let mut v = match self.spare.pop() {
            // A refused size must not cost the pool its spare.
            Some(v) if size <= KEEP_MAX as u64 && size <= max => v,
            _ => Vec::new(),
        };
        fill_zeroed(&mut v, size, max)?;
        Ok(v)
    }

    /// Keeps a buffer a call has finished with, if it is small.
    pub fn give_back(&mut self, v: Option<Vec<u8>>) {
        if let Some(v) = v {
            if v.capacity() <= KEEP_MAX && self.spare.len() < KEEP_COUNT {
                self.spare.push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zeroed_reused_and_bounded() {
        let mut p = OutBufs::default();
        let mut v = p.take(16, 1024).expect("small");
        v.fill(0xAB);
        let cap = v.capacity();
        p.give_back(Some(v));
        let v = p.take(8, 1024).expect("reused");
        assert_eq!(v, vec![0u8; 8], "a reused buffer holds no earlier data");
        assert_eq!(v.capacity(), cap, "the spare buffer was reused");
        assert_eq!(p.take(2048, 1024), Err(TooLarge));
        assert_eq!(p.take(u64::MAX, u64::MAX), Err(TooLarge));
        p.give_back(Some(Vec::with_capacity(KEEP_MAX + 1)));
        assert!(p.spare.is_empty(), "large buffers are not kept");
        for _ in 0..KEEP_COUNT + 2 {
            p.give_back(Some(Vec::with_capacity(4)));
        }
        assert_eq!(p.spare.len(), KEEP_COUNT);
    }
}
