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

/// How many of the word's bytes, from the first (lowest), are ASCII digits (0..=8).
#[inline(always)]
fn digit_run(w: u64) -> usize {
    // After `^ 0x30` a digit byte holds 0..=9. Adding 0x76 sets the high bit of a byte
    // holding 10..=0x89, `| x` of one holding 0x80 and above: flagged = not a digit. A
    // byte >= 0x8A carries into the next byte, which follows a non-digit and so does not
    // count.
    let x = w ^ (0x30 * ONES);
    let nz = (x.wrapping_add(0x76 * ONES) | x) & (0x80 * ONES);
    (nz.trailing_zeros() / 8) as usize
}

/// Value of the first `k` (0..=7) bytes of `w`, which are digits.
#[inline(always)]
fn digits_value(w: u64, k: usize) -> u64 {
    // Move the k digits to the top of the word (the bytes below become leading zeros),
    // then add pairs, fours and the eight (each step: high part x 10^n + low part).
    eight_digits_value(w << 8 << (8 * (7 - k) as u32))
}

/// Value of the eight digits of `w` (first digit in the lowest byte).
#[inline(always)]
fn eight_digits_value(w: u64) -> u64 {
    let v = w & (0x0F * ONES);
    let v = (v.wrapping_mul(10 * 256 + 1) >> 8) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100 * 65536 + 1) >> 16) & 0x0000_FFFF_0000_FFFF;
    v.wrapping_mul(10_000 * (1 << 32) + 1) >> 32
}

const POW10_U64: [u64; 8] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];

const POW10_F32_8: [f32; 8] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];
const POW10_F64_8: [f64; 8] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];

/// `mant / 10^n` rounded to `f32` for `mant < 10^8`, `n < 8`: what
/// `exact_to_f32(mant, n + 1, -n)` gives (its `f32` branch below 2^24, else its `f64`
/// one; dividing by 10^0 = multiplying by it), with the bounds known.
#[inline(always)]
fn short_to_f32(mant: u64, n: usize) -> f32 {
    let n = n & 7;
    if mant < (1 << 24) {
        mant as f32 / POW10_F32_8[n]
    } else {
        (mant as f64 / POW10_F64_8[n]) as f32
    }
}

/// A cursor over one line.
///
/// `NL = false`: `s` is the line alone (its end ends the last field). `NL = true`: `s`
/// starts with the line and goes on (the rest of a reader's buffer); the line ends at its
/// first `\n`, which the last field must be followed by, and nothing reads past it as
/// part of a field (a field holding a `\n` makes the cursor give up), so a row read this
/// way is the row of the line alone, and [`Quick::pos`] then gives the line's length + 1.
pub(crate) struct Quick<'a, const NL: bool> {
    s: &'a [u8],
    p: usize,
}

impl<'a, const NL: bool> Quick<'a, NL> {
    #[inline(always)]
    pub(crate) fn new(line: &'a [u8]) -> Self {
        Self { s: line, p: 0 }
    }

    /// Bytes consumed so far (after the last field with `NL`: the line and its `\n`).
    #[inline(always)]
    pub(crate) fn pos(&self) -> usize {
        self.p
    }

    /// Consumes the comma after a field (`LAST`: checks for the end of the line instead,
    /// and with `NL` consumes the `\n`).
    #[inline(always)]
    fn sep<const LAST: bool>(&mut self) -> Option<()> {
        if LAST && NL {
            if self.s.get(self.p) == Some(&b'\n') {
                self.p += 1;
                Some(())
            } else {
                None
            }
        } else if LAST {
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
            None => LAST && !NL,
            Some(&c) if LAST => NL && c == b'\n',
            Some(&c) => c == b',',
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

    /// Up to 15 digits, eight bytes at a time (both words load at fixed offsets, so the
    /// next field's start waits for no loop); `None` near the end of the line or for 16
    /// digits and more.
    #[inline(always)]
    fn digits_wide(&mut self) -> Option<(u64, usize)> {
        let b: &[u8; 16] = self.s.get(self.p..)?.first_chunk()?;
        let (lo, hi) = b.split_at(8);
        let mut w0 = [0u8; 8];
        w0.copy_from_slice(lo);
        let mut w1 = [0u8; 8];
        w1.copy_from_slice(hi);
        let (w0, w1) = (u64::from_le_bytes(w0), u64::from_le_bytes(w1));
        let n0 = digit_run(w0);
        if n0 < 8 {
            self.p += n0;
            return Some((digits_value(w0, n0), n0));
        }
        let n1 = digit_run(w1);
        if n1 == 8 {
            return None;
        }
        self.p += 8 + n1;
        Some((
            eight_digits_value(w0) * POW10_U64[n1] + digits_value(w1, n1),
            8 + n1,
        ))
    }

    /// A required unsigned integer field.
    #[inline(always)]
    pub(crate) fn u64<const LAST: bool>(&mut self) -> Option<u64> {
        let (v, n) = match self.digits_wide() {
            Some(r) => r,
            None => self.digits(),
        };
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
        let (mut mant, mut digits, mut exp10);
        if let Some((m, n, next)) = self.short_fraction() {
            (mant, digits, exp10) = (m, n + 1, -(n as i32));
            // The usual case, the separator right after the digits (already loaded with
            // them): finish here, without reading the next byte again for an exponent.
            // With `LAST` and no `NL` the line's end is not a byte: the general way.
            let sep = if LAST { b'\n' } else { b',' };
            if next == sep && (NL || !LAST) {
                self.p += 1;
                return Some(Some(short_to_f32(m, n)));
            }
        } else {
            let (int, n_int) = self.digits();
            (mant, digits, exp10) = (int, n_int, 0i32);
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

    /// The trace's usual decimal shape, one integer digit, a point and under eight fraction
    /// digits (`0.07446`), converted eight bytes at a time: the fraction's word loads at a
    /// fixed offset, so the next field's start waits for one word, not for a loop per digit.
    /// Returns the digits as an integer, the count of fraction digits and the byte after
    /// them.
    #[inline(always)]
    fn short_fraction(&mut self) -> Option<(u64, usize, u8)> {
        let b: &[u8; 10] = self.s.get(self.p..)?.first_chunk()?;
        let int = b[0].wrapping_sub(b'0');
        if int > 9 || b[1] != b'.' {
            return None;
        }
        let [_, _, rest @ ..] = *b;
        let w = u64::from_le_bytes(rest);
        let n = digit_run(w);
        if n == 8 {
            return None;
        }
        self.p += 2 + n;
        // n < 8: the byte after the digits is in w.
        let next = (w >> (8 * n as u32)) as u8;
        // The integer digit followed by the fraction's digits, n + 1 <= 8 of them, read
        // as one number.
        let whole = (w << 8) | u64::from(b[0]);
        Some((eight_digits_value(whole << (8 * (7 - n) as u32)), n, next))
    }

    /// Skips a field (not the last) whatever it holds, finding its comma eight bytes at a
    /// time; with `NL`, gives up at a `\n` before the comma (the line ended).
    #[inline(always)]
    pub(crate) fn skip(&mut self) -> Option<()> {
        let rest = self.s.get(self.p..)?;
        let mut chunks = rest.chunks_exact(8);
        let mut at = 0;
        for c in chunks.by_ref() {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            let w = u64::from_le_bytes(b);
            // Bytes equal to ',' become 0; the lowest flagged byte is the first zero byte
            // (the borrow in this test only flags bytes above a real zero byte).
            let x = w ^ (u64::from(b',') * ONES);
            let mut z = x.wrapping_sub(ONES) & !x & (0x80 * ONES);
            if NL {
                // The same for '\n': the lowest byte flagged in either is the first of both.
                let y = w ^ (u64::from(b'\n') * ONES);
                z |= y.wrapping_sub(ONES) & !y & (0x80 * ONES);
            }
            if z != 0 {
                let k = (z.trailing_zeros() / 8) as usize;
                if NL && b[k] != b',' {
                    return None;
                }
                self.p += at + k + 1;
                return Some(());
            }
            at += 8;
        }
        let k = chunks
            .remainder()
            .iter()
            .position(|&c| c == b',' || (NL && c == b'\n'))?;
        if NL && chunks.remainder()[k] != b',' {
            return None;
        }
        self.p += at + k + 1;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leading digit bytes counted one by one.
    fn naive(w: u64) -> usize {
        w.to_le_bytes()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    }

    #[test]
    fn short_to_f32_is_exact_to_f32() {
        let mut rng = crate::synth::SplitMix64::new(5);
        for n in 0..8usize {
            let top = 10u64.pow(n as u32 + 1);
            let edges = [0, 1, 9, (1 << 24) - 1, 1 << 24, (1 << 24) + 1, top - 1];
            let random = (0..200_000).map(|_| rng.below(top));
            for m in edges.into_iter().filter(|&m| m < top).chain(random) {
                let want = crate::num::exact_to_f32(m, n + 1, -(n as i32));
                assert_eq!(
                    Some(short_to_f32(m, n).to_bits()),
                    want.map(f32::to_bits),
                    "{m} {n}"
                );
            }
        }
    }

    #[test]
    fn digit_run_counts_leading_digits() {
        let mut rng = crate::synth::SplitMix64::new(11);
        // Every byte value at every position after a run of digits, with random bytes
        // (digits or anything) after it.
        for pos in 0..8 {
            for b in 0..=255u8 {
                for _ in 0..8 {
                    let mut bytes = [0u8; 8];
                    for (i, v) in bytes.iter_mut().enumerate() {
                        let r = rng.next_u64();
                        *v = if i < pos {
                            b'0' + (r % 10) as u8
                        } else if r & 1 == 0 {
                            b'0' + ((r >> 8) % 10) as u8
                        } else {
                            (r >> 16) as u8
                        };
                    }
                    bytes[pos] = b;
                    let w = u64::from_le_bytes(bytes);
                    assert_eq!(digit_run(w), naive(w), "{bytes:?}");
                }
            }
        }
        for _ in 0..1_000_000 {
            let w = rng.next_u64();
            assert_eq!(digit_run(w), naive(w));
        }
        assert_eq!(digit_run(u64::from_le_bytes(*b"12345678")), 8);
    }
}
