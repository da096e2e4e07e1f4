//! The fast path of the line parsers: well-formed lines only.
//!
//! [`Quick`] reads a line whose fields have the usual shapes (unsigned integers of at
//! most 19 digits, unsigned decimals with an optional exponent) with no error bookkeeping:
//! no column count, no error values, one `Option` per line. Anything else (a sign, a
//! missing or extra column, a bad byte, a number it cannot convert exactly) makes it give
//! up, and the checked parser in [`crate::record`] reads the line again: it alone decides
//! errors, and gives the same row whenever this one gives a row (unit tests and the
//! `trace_lines` fuzz target check that).

use crate::num::exact_to_f32;

const ONES: u64 = 0x0101_0101_0101_0101;

/// A cursor over one line.
pub(crate) struct Quick<'a> {
    s: &'a [u8],
    p: usize,
}

impl<'a> Quick<'a> {
    #[inline(always)]
    pub(crate) fn new(line: &'a [u8]) -> Self {
        Self { s: line, p: 0 }
    }

    /// Consumes the comma after a field (`LAST`: checks for the end of the line instead).
    #[inline(always)]
    fn sep<const LAST: bool>(&mut self) -> Option<()> {
        if LAST {
            (self.p == self.s.len()).then_some(())
        } else if self.s.get(self.p) == Some(&b',') {
            self.p += 1;
            Some(())
        } else {
            None
        }
    }

    /// True (and nothing consumed) when the field is empty.
    #[inline(always)]
    fn empty<const LAST: bool>(&self) -> bool {
        match self.s.get(self.p) {
            None => LAST,
            Some(&c) => c == b',' && !LAST,
        }
    }

    /// Digits at the cursor: value, count. At most 19 are read (no overflow).
    #[inline(always)]
    fn digits(&mut self) -> (u64, usize) {
        let start = self.p;
        let mut v = 0u64;
        while let Some(&c) = self.s.get(self.p) {
            let d = c.wrapping_sub(b'0');
            if d > 9 || self.p - start == 19 {
                break;
            }
            v = v * 10 + u64::from(d);
            self.p += 1;
        }
        (v, self.p - start)
    }

    /// A required unsigned integer field.
    #[inline(always)]
    pub(crate) fn u64<const LAST: bool>(&mut self) -> Option<u64> {
        let (v, n) = self.digits();
        if n == 0 {
            return None;
        }
        self.sep::<LAST>()?;
        Some(v)
    }

    /// An optional unsigned integer field.
    #[inline(always)]
    pub(crate) fn opt_u64<const LAST: bool>(&mut self) -> Option<Option<u64>> {
        if self.empty::<LAST>() {
            self.sep::<LAST>()?;
            return Some(None);
        }
        self.u64::<LAST>().map(Some)
    }

    /// A required integer field of at most `max`.
    #[inline(always)]
    pub(crate) fn small<const LAST: bool>(&mut self, max: u8) -> Option<u8> {
        // The usual shape, one digit and a comma, in one step.
        if !LAST {
            if let Some(&[d, b',']) = self.s.get(self.p..self.p + 2) {
                let v = d.wrapping_sub(b'0');
                if v <= 9 && v <= max {
                    self.p += 2;
                    return Some(v);
                }
            }
        }
        let v = self.u64::<LAST>()?;
        (v <= u64::from(max)).then_some(v as u8)
    }

    /// An optional integer field of at most `max`.
    #[inline(always)]
    pub(crate) fn opt_small<const LAST: bool>(&mut self, max: u8) -> Option<Option<u8>> {
        if self.empty::<LAST>() {
            self.sep::<LAST>()?;
            return Some(None);
        }
        self.small::<LAST>(max).map(Some)
    }

    /// An optional decimal field (`0.07446`, `2`, `9.537e-06`), rounded to `f32` exactly as
    /// the checked parser rounds it.
    #[inline(always)]
    pub(crate) fn opt_f32<const LAST: bool>(&mut self) -> Option<Option<f32>> {
        if self.empty::<LAST>() {
            self.sep::<LAST>()?;
            return Some(None);
        }
        let (int, n_int) = self.digits();
        let (mut mant, mut digits, mut exp10) = (int, n_int, 0i32);
        if self.s.get(self.p) == Some(&b'.') {
            self.p += 1;
            let start = self.p;
            while let Some(&c) = self.s.get(self.p) {
                let d = c.wrapping_sub(b'0');
                if d > 9 || digits == 19 {
                    break;
                }
                mant = mant * 10 + u64::from(d);
                digits += 1;
                self.p += 1;
            }
            exp10 = -((self.p - start) as i32);
        }
        if digits == 0 {
            return None;
        }
        if let Some(b'e' | b'E') = self.s.get(self.p) {
            self.p += 1;
            let neg = match self.s.get(self.p) {
                Some(b'-') => {
                    self.p += 1;
                    true
                }
                Some(b'+') => {
                    self.p += 1;
                    false
                }
                _ => false,
            };
            let (e, n) = self.digits();
            if n == 0 || n > 4 {
                return None;
            }
            let e = e as i32;
            exp10 += if neg { -e } else { e };
        }
        // A 20th digit stops the loops above: the separator check then fails.
        let v = exact_to_f32(mant, digits, exp10)?;
        self.sep::<LAST>()?;
        Some(Some(v))
    }

    /// Skips a field whatever it holds, finding its comma eight bytes at a time.
    #[inline(always)]
    pub(crate) fn skip(&mut self) -> Option<()> {
        let rest = self.s.get(self.p..)?;
        let mut chunks = rest.chunks_exact(8);
        let mut at = 0;
        for c in chunks.by_ref() {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            // Bytes equal to ',' become 0; the lowest flagged byte is the first zero byte
            // (the borrow in this test only flags bytes above a real zero byte).
            let x = u64::from_le_bytes(b) ^ (u64::from(b',') * ONES);
            let z = x.wrapping_sub(ONES) & !x & (0x80 * ONES);
            if z != 0 {
                self.p += at + (z.trailing_zeros() / 8) as usize + 1;
                return Some(());
            }
            at += 8;
        }
        let k = chunks.remainder().iter().position(|&c| c == b',')?;
        self.p += at + k + 1;
        Some(())
    }
}
