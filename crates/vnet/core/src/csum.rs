//! Internet checksum (RFC 1071) helpers.

/// Adds the big-endian 16-bit words of `data` to `acc` (unfolded, 64-bit accumulator).
/// `data` is taken to start at an even offset of the checksummed region.
///
/// The bulk is summed as native little-endian 32-bit words into a 64-bit accumulator, a
/// loop the compiler vectorises; the one's-complement sum is byte-order independent
/// (RFC 1071 section 2(B)), so folding that sum and swapping its bytes gives the
/// big-endian sum.
pub fn add(acc: u64, data: &[u8]) -> u64 {
    let bulk = data.len() & !3;
    let (words, rest) = data.split_at(bulk);
    let le: u64 = words
        .chunks_exact(4)
        .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .sum();
    let mut acc = acc + u64::from(fold(le).swap_bytes());
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds an accumulator to 16 bits (not complemented).
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The final checksum of `data` plus `acc`: folded and complemented.
pub fn finish(acc: u64, data: &[u8]) -> u16 {
    !fold(add(acc, data))
}

/// Pseudo-header sum for TCP/UDP over IPv4 or IPv6 (addresses given as raw bytes).
pub fn pseudo(src: &[u8], dst: &[u8], proto: u8, l4_len: u32) -> u64 {
    let mut acc = add(0, src);
    acc = add(acc, dst);
    acc + u64::from(proto) + u64::from(l4_len)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add(0, &d)), 0xddf2);
    }

    #[test]
    fn wide_sum_equals_narrow_sum() {
        let d: Vec<u8> = (0..1001u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut narrow = 0u64;
        for p in d.chunks(2) {
            narrow += u64::from(u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)]));
        }
        assert_eq!(fold(add(0, &d)), fold(narrow));
    }
}
