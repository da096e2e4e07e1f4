//! Byte-level number parsing for trace fields.
//!
//! The trace writes integers in plain decimal and floats in `%g`-like form (`0.07446`,
//! `9.537e-06`). Going through `str::parse` would cost a UTF-8 check and a generic
//! parser per field; these functions read the bytes directly. Floats take Clinger's
//! fast path (exact when the decimal mantissa fits in 2^53 and the power of ten is at
//! most 22, which covers every value in the trace) and fall back to the standard library
//! otherwise, so results are always correctly rounded.

/// Why a field did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    /// A byte that cannot appear in a number of this kind.
    InvalidDigit,
    /// The value does not fit the target type.
    Overflow,
    /// The field is empty where a value is required.
    Empty,
}

/// Parses an unsigned decimal integer (no sign, no spaces).
#[inline]
pub fn parse_u64(field: &[u8]) -> Result<u64, NumError> {
    whole(field, parse_u64_prefix)
}

/// Reads all of `field` with a prefix parser: empty is [`NumError::Empty`], anything left
/// over is [`NumError::InvalidDigit`].
#[inline(always)]
fn whole<T>(
    field: &[u8],
    prefix: impl FnOnce(&[u8]) -> Result<(T, usize), NumError>,
) -> Result<T, NumError> {
    if field.is_empty() {
        return Err(NumError::Empty);
    }
    match prefix(field)? {
        (v, n) if n == field.len() => Ok(v),
        _ => Err(NumError::InvalidDigit),
    }
}

/// Parses the decimal digits at the start of `s`; returns the value and how many bytes
/// it used (0 digits = `(0, 0)`).
#[inline]
pub fn parse_u64_prefix(s: &[u8]) -> Result<(u64, usize), NumError> {
    let mut v: u64 = 0;
    let mut i = 0;
    // 19 digits cannot overflow a u64.
    let fast = s.len().min(19);
    while i < fast {
        let d = s[i].wrapping_sub(b'0');
        if d > 9 {
            return Ok((v, i));
        }
        v = v * 10 + u64::from(d);
        i += 1;
    }
    while i < s.len() {
        let d = s[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(NumError::Overflow)?;
        i += 1;
    }
    Ok((v, i))
}

/// Powers of ten exactly representable in an `f64`.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Parses a decimal float such as `0.125`, `-3`, `9.537e-06` or `1E5`.
#[inline]
pub fn parse_f64(field: &[u8]) -> Result<f64, NumError> {
    whole(field, parse_f64_prefix)
}

/// A decimal read by [`scan_decimal`], before conversion.
struct Decimal {
    neg: bool,
    /// The digits as an integer (wrapped when there are more than 19).
    mant: u64,
    /// Integer plus fraction digits.
    digits: usize,
    exp10: i32,
    /// Bytes of the number after the sign.
    body_len: usize,
    /// Bytes of the number including the sign.
    len: usize,
}

#[inline(always)]
fn scan_decimal(field: &[u8]) -> Result<Decimal, NumError> {
    let (neg, sign) = match field.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let body = &field[sign..];
    // Up to 19 digits cannot overflow; longer mantissas take the slow path below, so the
    // wrapping here never changes a result that is used.
    let (mut mant, mut i) = digits(body, 0, 0);
    let int_digits = i;
    let mut frac_digits = 0;
    if body.get(i) == Some(&b'.') {
        let start = i + 1;
        (mant, i) = digits(body, start, mant);
        frac_digits = i - start;
    }
    if int_digits + frac_digits == 0 {
        return Err(NumError::InvalidDigit);
    }
    let mut exp10: i32 = -(frac_digits.min(100_000) as i32);
    if matches!(body.get(i), Some(b'e' | b'E')) {
        i += 1;
        let mut eneg = false;
        if let Some(&c @ (b'-' | b'+')) = body.get(i) {
            eneg = c == b'-';
            i += 1;
        }
        let start = i;
        let (e, end) = fold_digits(body, start, 0i32, |e, d| {
            e.saturating_mul(10).saturating_add(i32::from(d))
        });
        if end == start {
            return Err(NumError::InvalidDigit);
        }
        i = end;
        exp10 = exp10.saturating_add(if eneg { -e } else { e });
    }
    Ok(Decimal {
        neg,
        mant,
        digits: int_digits + frac_digits,
        exp10,
        body_len: i,
        len: sign + i,
    })
}

/// Appends the decimal digits of `body` from `i` on to `mant` (wrapping); returns it and
/// the index of the first byte that is not a digit.
#[inline(always)]
fn digits(body: &[u8], i: usize, mant: u64) -> (u64, usize) {
    fold_digits(body, i, mant, |m, d| {
        m.wrapping_mul(10).wrapping_add(u64::from(d))
    })
}

/// Folds each decimal digit of `body` from `i` on into `acc` with `push`; returns the
/// result and the index of the first byte that is not a digit.
#[inline(always)]
fn fold_digits<T>(body: &[u8], mut i: usize, mut acc: T, push: impl Fn(T, u8) -> T) -> (T, usize) {
    while let Some(&c) = body.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        acc = push(acc, d);
        i += 1;
    }
    (acc, i)
}

/// The correctly rounded `f64` of a scanned decimal (`field` is what was scanned).
#[inline(always)]
fn decimal_to_f64(d: &Decimal, field: &[u8]) -> Result<f64, NumError> {
    let v = if d.digits <= 19 && d.mant < (1u64 << 53) && d.exp10.unsigned_abs() <= 22 {
        // Clinger's fast path: both operands are exact, so one rounding.
        let m = d.mant as f64;
        if d.exp10 >= 0 {
            m * POW10[d.exp10 as usize]
        } else {
            m / POW10[d.exp10.unsigned_abs() as usize]
        }
    } else {
        let sign = d.len - d.body_len;
        slow_f64(&field[sign..d.len])?
    };
    Ok(if d.neg { -v } else { v })
}

/// Parses the float at the start of `s`; returns it and the bytes used.
#[inline]
pub fn parse_f64_prefix(field: &[u8]) -> Result<(f64, usize), NumError> {
    let d = scan_decimal(field)?;
    Ok((decimal_to_f64(&d, field)?, d.len))
}

/// Powers of ten exactly representable in an `f32`.
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Parses the float at the start of `s` as [`parse_f64_prefix`] does and rounds it to
/// `f32`: exactly `parse_f64_prefix(s)` then `as f32`, except that a value whose `f64` is
/// not finite is an [`NumError::Overflow`].
///
/// Short decimals (mantissa below 2^24, |exponent| <= 10, so both operands are exact
/// `f32`s) are divided or multiplied in `f32` directly: one correctly rounded `f32`
/// operation gives the same result as the correctly rounded `f64` operation rounded to
/// `f32`, because `f64` has more than 2 x 24 + 2 bits (the double rounding is innocuous
/// for the basic operations, Figueroa 1995). Single-precision division is the cheaper one.
#[inline(always)]
pub fn parse_f32_prefix(field: &[u8]) -> Result<(f32, usize), NumError> {
    let d = scan_decimal(field)?;
    let v = match exact_to_f32(d.mant, d.digits, d.exp10) {
        Some(v) => {
            if d.neg {
                -v
            } else {
                v
            }
        }
        None => {
            let v = decimal_to_f64(&d, field)?;
            if !v.is_finite() {
                return Err(NumError::Overflow);
            }
            v as f32
        }
    };
    Ok((v, d.len))
}

/// `mant x 10^exp10` (of `digits` decimal digits) rounded to `f32` the way
/// [`parse_f64_prefix`] then `as f32` rounds it, when one or two exact operations do it:
/// in `f32` for mantissas below 2^24 and |exp10| <= 10 (see [`parse_f32_prefix`]), else
/// Clinger's `f64` path (mantissa below 2^53, |exp10| <= 22). `None` otherwise.
#[inline(always)]
pub(crate) fn exact_to_f32(mant: u64, digits: usize, exp10: i32) -> Option<f32> {
    if digits > 19 {
        return None;
    }
    let e = exp10.unsigned_abs() as usize;
    if mant < (1u64 << 24) && e <= 10 {
        let m = mant as f32;
        Some(if exp10 >= 0 {
            m * POW10_F32[e]
        } else {
            m / POW10_F32[e]
        })
    } else if mant < (1u64 << 53) && e <= 22 {
        let m = mant as f64;
        Some(
            (if exp10 >= 0 {
                m * POW10[e]
            } else {
                m / POW10[e]
            }) as f32,
        )
    } else {
        None
    }
}

#[cold]
fn slow_f64(body: &[u8]) -> Result<f64, NumError> {
    std::str::from_utf8(body)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or(NumError::InvalidDigit)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64(b"0"), Ok(0));
        assert_eq!(parse_u64(b"6251812952"), Ok(6_251_812_952));
        assert_eq!(parse_u64(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), Err(NumError::Overflow));
        assert_eq!(parse_u64(b"12a"), Err(NumError::InvalidDigit));
        assert_eq!(parse_u64(b"-1"), Err(NumError::InvalidDigit));
        assert_eq!(parse_u64(b""), Err(NumError::Empty));
    }

    #[test]
    fn floats_match_std() {
        for s in [
            "0.125",
            "0.07446",
            "9.537e-06",
            "0.0004244",
            "1",
            "1.0",
            "-2.5",
            "2.445",
            "1E5",
            "1e+3",
            ".5",
            "5.",
            "0",
            "0.000000000000000000000123456789",
            "123456789012345678901234",
            "3.0e-310",
            "1e400",
        ] {
            let want: f64 = s.parse().unwrap_or(f64::NAN);
            let got = parse_f64(s.as_bytes()).unwrap_or(f64::NAN);
            assert!(
                want == got || (want.is_nan() && got.is_nan()),
                "{s}: {want} vs {got}"
            );
        }
    }

    /// The shape of random decimals: each part present one time in N, and
    /// digit counts and exponents below the given bounds.
    #[derive(Clone, Copy)]
    struct DecimalShape {
        minus_one_in: u64,
        int_digits: u64,
        no_point_one_in: u64,
        frac_digits: u64,
        exp_one_in: u64,
        exp_below: u64,
    }

    impl DecimalShape {
        /// Numbers of any length, exponents across f64's whole range.
        const ANY: DecimalShape = DecimalShape {
            minus_one_in: 4,
            int_digits: 12,
            no_point_one_in: 2,
            frac_digits: 24,
            exp_one_in: 3,
            exp_below: 330,
        };
        /// Long numbers with exponents in f32's range, mostly with a point.
        const LONG: DecimalShape = DecimalShape {
            minus_one_in: 8,
            no_point_one_in: 4,
            exp_one_in: 4,
            exp_below: 60,
            ..DecimalShape::ANY
        };
        /// Numbers short enough that every digit matters to an f32.
        const SHORT: DecimalShape = DecimalShape {
            int_digits: 3,
            frac_digits: 9,
            exp_below: 12,
            ..DecimalShape::LONG
        };

        /// Replaces `s` with a random decimal of this shape.
        fn write(&self, rng: &mut crate::synth::SplitMix64, s: &mut String) {
            let digits = |rng: &mut crate::synth::SplitMix64, s: &mut String, max: u64| {
                for _ in 0..rng.below(max) {
                    s.push(char::from(b'0' + rng.below(10) as u8));
                }
            };
            s.clear();
            if rng.below(self.minus_one_in) == 0 {
                s.push('-');
            }
            digits(rng, s, self.int_digits);
            if rng.below(self.no_point_one_in) != 0 {
                s.push('.');
                digits(rng, s, self.frac_digits);
            }
            if rng.below(self.exp_one_in) == 0 {
                s.push('e');
                if rng.below(2) == 0 {
                    s.push('-');
                }
                s.push_str(&rng.below(self.exp_below).to_string());
            }
        }
    }

    #[test]
    fn random_decimals_match_std() {
        let mut rng = crate::synth::SplitMix64::new(42);
        let mut s = String::new();
        for _ in 0..200_000 {
            DecimalShape::ANY.write(&mut rng, &mut s);
            let want = s.parse::<f64>().ok();
            let got = parse_f64(s.as_bytes()).ok();
            match (want, got) {
                (Some(w), Some(g)) => {
                    assert!(w == g || (w.is_nan() && g.is_nan()), "{s}: {w} vs {g}")
                }
                (None, None) => {}
                // std rejects nothing we accept; we reject forms std takes only if both agree above.
                _ => panic!("{s}: std {want:?} vs ours {got:?}"),
            }
        }
    }

    #[test]
    fn float_rejects_garbage() {
        for s in [
            "", "-", ".", "e5", "1e", "1.2.3", "abc", "1,0", "nan", "0x10", "1e-",
        ] {
            assert!(parse_f64(s.as_bytes()).is_err(), "{s}");
        }
    }

    #[test]
    fn f32_path_matches_f64_then_cast() {
        let mut rng = crate::synth::SplitMix64::new(11);
        let mut s = String::new();
        // Short numbers (every digit significant to f32) and long ones, in turn.
        for round in 0..400_000 {
            let shape = if round % 2 == 0 {
                DecimalShape::SHORT
            } else {
                DecimalShape::LONG
            };
            shape.write(&mut rng, &mut s);
            let want = parse_f64_prefix(s.as_bytes()).and_then(|(v, n)| {
                if v.is_finite() {
                    Ok(((v as f32).to_bits(), n))
                } else {
                    Err(NumError::Overflow)
                }
            });
            let got = parse_f32_prefix(s.as_bytes()).map(|(v, n)| (v.to_bits(), n));
            assert_eq!(got, want, "{s}");
        }
        // Values where rounding to f32 sits near a tie.
        for s in [
            "0.001562",
            "9.537e-06",
            "16777215",
            "16777217",
            "0.3333333",
            "1e10",
            "1e-10",
            "8388609.5",
            "1e400",
            "-0",
            "3.4028236e38",
        ] {
            let want = parse_f64_prefix(s.as_bytes()).map(|(v, n)| ((v as f32).to_bits(), n));
            let got = parse_f32_prefix(s.as_bytes()).map(|(v, n)| (v.to_bits(), n));
            if s == "1e400" {
                assert_eq!(got, Err(NumError::Overflow));
            } else {
                assert_eq!(got, want, "{s}");
            }
        }
    }
}
