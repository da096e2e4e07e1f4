//! Fast path of the line parsers: find every comma first, then parse the fields.
//!
//! Parsing field after field makes each field's start wait for the previous field's
//! digits to be scanned: a chain of dependent loads and bit tricks about 40 cycles long
//! per field. With the commas found up front (16 bytes per SSE2 compare), the fields are
//! independent and the CPU parses several at once. This path takes the trace's usual
//! forms only (unsigned numbers, at most 15 integer digits, floats with at most 7
//! integer and 7 fraction digits and an optional exponent) and answers `None` for
//! anything else, so the checked parser in `record.rs` runs instead and reports errors
//! exactly as before. Where it answers, it gives exactly the checked parser's row (same
//! mantissa and power of ten through the same exact operations; tested below).

use crate::num::{digit_run, digits_value, load8, ONES, POW10, POW10_U64};
use crate::record::{EventType, TaskEvent, TaskUsage};

/// Longest line the fast path looks at; longer ones take the checked parser.
const MAX_FAST_LINE: usize = 1024;

/// Room for the comma positions of the widest table.
const ENDS: usize = 32;

/// Bit `i` set where `block[i]` is a comma, for up to 64 bytes.
#[inline(always)]
fn comma_mask(block: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        let mut mask = 0u64;
        let mut at = 0;
        while at + 16 <= block.len() {
            // SAFETY: SSE2, which these intrinsics need, is part of baseline x86-64;
            // `at + 16 <= block.len()`, so the 16 bytes loaded lie inside `block`, and
            // the unaligned load has no alignment requirement.
            let m = unsafe {
                let v = _mm_loadu_si128(block.as_ptr().add(at).cast());
                _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8)))
            };
            mask |= u64::from(m as u16) << at;
            at += 16;
        }
        for (i, &b) in block.iter().enumerate().skip(at) {
            mask |= u64::from(b == b',') << i;
        }
        mask
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block
            .iter()
            .enumerate()
            .fold(0, |m, (i, &b)| m | u64::from(b == b',') << i)
    }
}

/// Field bounds of a line with exactly `N - 1` commas: `ends[i]` is the end of field
/// `i` for `i < N`; field `i` starts at `ends[i - 1] + 1` (0 for the first).
#[inline]
fn split<const N: usize>(line: &[u8]) -> Option<[u32; ENDS]> {
    if line.len() > MAX_FAST_LINE || N > ENDS {
        return None;
    }
    let mut ends = [0u32; ENDS];
    let mut k = 0;
    for (b, block) in line.chunks(64).enumerate() {
        let mut commas = comma_mask(block);
        while commas != 0 {
            if k == N - 1 {
                return None;
            }
            ends[k] = (b * 64 + commas.trailing_zeros() as usize) as u32;
            k += 1;
            commas &= commas - 1;
        }
    }
    if k != N - 1 {
        return None;
    }
    ends[N - 1] = line.len() as u32;
    Some(ends)
}

/// Field `i` of `line` given the bounds from [`split`], as the rest of the line from the
/// field's start and the field's length: words are loaded from the line, so a short
/// field reads on into the next ones (masked by its length) instead of being copied.
#[inline(always)]
fn field<'a>(line: &'a [u8], ends: &[u32; ENDS], i: usize) -> Field<'a> {
    let start = if i == 0 { 0 } else { ends[i - 1] as usize + 1 };
    Field {
        rest: &line[start..],
        len: ends[i] as usize - start,
    }
}

/// A field: `rest[..len]`.
#[derive(Clone, Copy)]
struct Field<'a> {
    rest: &'a [u8],
    len: usize,
}

impl Field<'_> {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn get(&self, i: usize) -> Option<&u8> {
        if i < self.len {
            self.rest.get(i)
        } else {
            None
        }
    }
}

/// An optional unsigned integer of at most 15 digits (`Some(None)` when empty).
#[inline(always)]
fn opt_u64(f: Field<'_>) -> Option<Option<u64>> {
    if f.is_empty() {
        return Some(None);
    }
    let w = load8(f.rest, 0);
    let n = digit_run(w);
    if n < 8 {
        // Plain branches: a `then` closure here was left uninlined.
        return if n == f.len {
            Some(Some(digits_value(w, n)))
        } else {
            None
        };
    }
    let w2 = load8(f.rest, 8);
    let n2 = digit_run(w2);
    if n2 < 8 && 8 + n2 == f.len {
        Some(Some(
            digits_value(w, 8) * POW10_U64[n2] + digits_value(w2, n2),
        ))
    } else {
        None
    }
}

#[inline(always)]
fn u64_(f: Field<'_>) -> Option<u64> {
    opt_u64(f)?
}

#[inline(always)]
fn small(f: Field<'_>, max: u64) -> Option<u8> {
    u64_(f).filter(|&v| v <= max).map(|v| v as u8)
}

#[inline(always)]
fn opt_small(f: Field<'_>, max: u64) -> Option<Option<u8>> {
    match opt_u64(f)? {
        Some(v) if v > max => None,
        v => Some(v.map(|v| v as u8)),
    }
}

/// A float of at most 8 bytes without exponent (`0.02499`, `2.445`, `0`) from a single
/// word: drop the dot by shifting the bytes after it down one, check that what is left
/// is all digits, convert them at once. `None` for any other form.
#[inline(always)]
fn short_decimal(f: Field<'_>) -> Option<f32> {
    let len = f.len;
    if len == 0 || len > 8 {
        return None;
    }
    let w = load8(f.rest, 0) & (u64::MAX >> (64 - 8 * len));
    // Dot bytes become zero; mark them (only within the field: bytes past it are 0,
    // which XOR makes non-zero).
    let x = w ^ (u64::from(b'.') * ONES);
    let x = x | !(u64::MAX >> (64 - 8 * len));
    let nz = (((x & (0x7F * ONES)) + 0x7F * ONES) | x) & (0x80 * ONES);
    let dots = !nz & (0x80 * ONES);
    let (digits, frac) = if dots == 0 {
        (w, 0)
    } else {
        if dots & (dots - 1) != 0 {
            return None;
        }
        let d = (dots.trailing_zeros() / 8) as usize;
        let low = w & ((1u64 << (8 * d)) - 1);
        let high = ((w >> (8 * d)) >> 8) << (8 * d);
        (low | high, len - 1 - d)
    };
    let n = len - usize::from(dots != 0);
    if n == 0 || digit_run(digits) != n {
        return None;
    }
    // At most 8 digits: exact in an f64; the same division as the checked parser.
    let m = digits_value(digits, n) as i64 as f64;
    Some((if frac == 0 { m } else { m / POW10[frac] }) as f32)
}

/// An optional float in the trace's usual forms (`0.02499`, `3.815e-05`, `1`).
#[inline(always)]
fn opt_f32(f: Field<'_>) -> Option<Option<f32>> {
    if f.is_empty() {
        return Some(None);
    }
    if let Some(v) = short_decimal(f) {
        return Some(Some(v));
    }
    let w = load8(f.rest, 0);
    let ni = digit_run(w);
    if ni == 8 {
        return None;
    }
    let mut mant = digits_value(w, ni);
    let mut p = ni;
    let mut fd = 0;
    if f.get(p) == Some(&b'.') {
        let w2 = load8(f.rest, p + 1);
        fd = digit_run(w2);
        if fd == 8 {
            return None;
        }
        mant = mant * POW10_U64[fd] + digits_value(w2, fd);
        p += 1 + fd;
    }
    if ni + fd == 0 {
        return None;
    }
    let mut exp10 = -(fd as i32);
    if p < f.len {
        if !matches!(f.rest[p], b'e' | b'E') {
            return None;
        }
        p += 1;
        let neg = match f.get(p) {
            Some(b'-') => {
                p += 1;
                true
            }
            Some(b'+') => {
                p += 1;
                false
            }
            _ => false,
        };
        let digits = &f.rest[p.min(f.len)..f.len];
        if digits.is_empty() || digits.len() > 3 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let e = digits
            .iter()
            .fold(0i32, |e, &d| e * 10 + i32::from(d - b'0'));
        exp10 += if neg { -e } else { e };
    }
    if exp10.unsigned_abs() > 22 {
        return None;
    }
    // At most 14 digits, so below 2^53: exact, as in the checked parser's fast path.
    let m = mant as i64 as f64;
    let v = if exp10 >= 0 {
        m * POW10[exp10 as usize]
    } else {
        m / POW10[exp10.unsigned_abs() as usize]
    };
    Some(Some(v as f32))
}

/// A task_events line in the usual forms, or `None` to use the checked parser.
#[inline]
pub(crate) fn task_event(line: &[u8]) -> Option<TaskEvent> {
    let e = split::<13>(line)?;
    let f = |i| field(line, &e, i);
    let task_index = u32::try_from(u64_(f(3))?).ok()?;
    let event_type = EventType::from_code(u64_(f(5))?)?;
    // Field 6, the hashed user name, is not read (the checked parser skips it too).
    Some(TaskEvent {
        time: u64_(f(0))?,
        missing_info: opt_small(f(1), 255)?,
        job_id: u64_(f(2))?,
        task_index,
        machine_id: opt_u64(f(4))?,
        event_type,
        scheduling_class: small(f(7), 255)?,
        priority: small(f(8), 255)?,
        cpu_request: opt_f32(f(9))?,
        memory_request: opt_f32(f(10))?,
        disk_request: opt_f32(f(11))?,
        different_machines: opt_small(f(12), 1)?.map(|v| v == 1),
    })
}

/// A task_usage line in the usual forms, or `None` to use the checked parser.
#[inline]
pub(crate) fn task_usage(line: &[u8]) -> Option<TaskUsage> {
    let e = split::<20>(line)?;
    let f = |i| field(line, &e, i);
    Some(TaskUsage {
        start_time: u64_(f(0))?,
        end_time: u64_(f(1))?,
        job_id: u64_(f(2))?,
        task_index: u32::try_from(u64_(f(3))?).ok()?,
        machine_id: opt_u64(f(4))?,
        cpu_rate: opt_f32(f(5))?,
        canonical_memory: opt_f32(f(6))?,
        assigned_memory: opt_f32(f(7))?,
        unmapped_page_cache: opt_f32(f(8))?,
        total_page_cache: opt_f32(f(9))?,
        max_memory: opt_f32(f(10))?,
        disk_io_time: opt_f32(f(11))?,
        local_disk: opt_f32(f(12))?,
        max_cpu_rate: opt_f32(f(13))?,
        max_disk_io_time: opt_f32(f(14))?,
        cpi: opt_f32(f(15))?,
        mai: opt_f32(f(16))?,
        sample_portion: opt_f32(f(17))?,
        aggregation_type: opt_small(f(18), 1)?,
        sampled_cpu: opt_f32(f(19))?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::record::{checked_event, checked_usage};
    use crate::synth::SplitMix64;

    const EVENTS: [&[u8]; 4] = [
        b"0,2,3418309,0,4155527081,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,,,,",
        b"5611824441,,6251812952,1761,1306108,4,fJYe=,0,2,0.02499,0.07959,0.0003862,1",
        b"10623199551,,6126024662,0,,0,pU=,3,9,0.125,0.0159,9.537e-06,0",
        b"5659037326,,6238340468,2363,317497361,2,1wRY=,1,0,0.0625,0.03961,3.815e-05,0",
    ];
    const USAGE: &[u8] = b"600000000,900000000,3418309,0,4155527081,0.001562,0.06787,0.07568,0.001156,0.001503,0.06787,2.861e-06,0.0001869,0.03967,0.0003567,2.445,0.007243,0,1,0";

    #[test]
    fn takes_the_usual_forms() {
        for l in EVENTS {
            assert_eq!(task_event(l), Some(checked_event(l).unwrap()));
        }
        assert_eq!(task_usage(USAGE), Some(checked_usage(USAGE).unwrap()));
    }

    /// Short decimals: wherever the one-word path answers, the checked float parser
    /// reads the whole field to the same value.
    #[test]
    fn short_decimals_agree() {
        let mut rng = SplitMix64::new(5);
        let alphabet = b"0123456789.e-+";
        let mut answered = 0;
        for _ in 0..300_000 {
            let len = 1 + rng.below(9) as usize;
            let mut l: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.below(3) == 0 {
                        alphabet[rng.below(alphabet.len() as u64) as usize]
                    } else {
                        b'0' + rng.below(10) as u8
                    }
                })
                .collect();
            let f = Field { rest: &l, len };
            if let Some(v) = short_decimal(f) {
                let (g, n) = crate::num::parse_f64_prefix(&l).unwrap();
                assert_eq!((v.to_bits(), n), ((g as f32).to_bits(), len), "{l:?}");
                answered += 1;
            }
            // Bytes after the field change nothing.
            l.extend_from_slice(b",0.5");
            let longer = short_decimal(Field { rest: &l, len }).map(f32::to_bits);
            let alone = short_decimal(Field {
                rest: &l[..len],
                len,
            });
            assert_eq!(longer, alone.map(f32::to_bits), "{l:?}");
        }
        assert!(answered > 50_000, "{answered}");
    }

    /// Mutated real lines: wherever the fast path answers, the checked parser gives the
    /// same row (and never an error).
    #[test]
    fn agrees_with_the_checked_parser() {
        let mut rng = SplitMix64::new(11);
        let alphabet = b"0123456789.,eE-+ x\xff";
        let mut answered = 0;
        for round in 0..200_000 {
            let mut l = if round % 2 == 0 {
                EVENTS[rng.below(4) as usize].to_vec()
            } else {
                USAGE.to_vec()
            };
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(l.len() as u64 + 1) as usize;
                let b = alphabet[rng.below(alphabet.len() as u64) as usize];
                match rng.below(3) {
                    0 if at < l.len() => l[at] = b,
                    1 if at < l.len() => {
                        l.remove(at);
                    }
                    _ => l.insert(at, b),
                }
            }
            if let Some(r) = task_event(&l) {
                assert_eq!(Ok(r), checked_event(&l), "{}", String::from_utf8_lossy(&l));
                answered += 1;
            }
            if let Some(r) = task_usage(&l) {
                assert_eq!(Ok(r), checked_usage(&l), "{}", String::from_utf8_lossy(&l));
                answered += 1;
            }
        }
        assert!(answered > 20_000, "{answered}");
    }
}
