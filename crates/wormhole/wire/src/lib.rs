//! Wormhole's wire format.
//!
//! A forwarded call is one *frame*: a fixed [`RequestHeader`] followed by the
//! call's arguments, encoded in the order the API description lists them.
//! The reply is a [`ReplyHeader`] followed by the outputs. Every integer is
//! little-endian and fixed-width (`size_t` travels as `u64`) so that a 32-bit
//! client could talk to a 64-bit server.
//!
//! The [`Decoder`] is the first thing that touches bytes from a tenant: every
//! read is bounds-checked and every length is checked against what is left
//! before anything is allocated, so a forged frame yields a [`WireError`],
//! never a panic or a large allocation.

use thiserror::Error;

/// Errors from decoding untrusted bytes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WireError {
    #[error("frame truncated: needed {needed} bytes at offset {offset}, {available} left")]
    Truncated {
        offset: usize,
        needed: usize,
        available: usize,
    },
    #[error("length {len} at offset {offset} exceeds the remaining {available} bytes")]
    BadLength {
        offset: usize,
        len: u64,
        available: usize,
    },
    #[error("invalid tag {tag} at offset {offset}")]
    BadTag { offset: usize, tag: u8 },
    #[error("string at offset {offset} is not valid: {why}")]
    BadString { offset: usize, why: &'static str },
    #[error("{0} trailing bytes after the last argument")]
    Trailing(usize),
    #[error("bad frame header: {0}")]
    BadHeader(&'static str),
}

/// Set in [`RequestHeader::flags`] when the client does not wait for a reply.
pub const FLAG_ASYNC: u32 = 1;

/// Size of [`RequestHeader`] on the wire.
pub const REQUEST_HEADER_LEN: usize = 8;
/// Size of [`ReplyHeader`] on the wire.
pub const REPLY_HEADER_LEN: usize = 8;

/// Precedes every request's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Index of the function in the API description.
    pub func: u32,
    /// [`FLAG_ASYNC`] and future flags.
    pub flags: u32,
}

/// `encode` and `decode` for a header of fixed-width fields, written once so
/// that the two cannot disagree on the fields' order or widths.
macro_rules! fixed_header {
    ($ty:ident { $($field:ident: $wire:ident),* $(,)? }) => {
        impl $ty {
            #[inline]
            pub fn encode(&self, enc: &mut Encoder) {
                $(enc.$wire(self.$field);)*
            }

            #[inline]
            pub fn decode(dec: &mut Decoder<'_>) -> Result<Self, WireError> {
                Ok(Self {
                    $($field: dec.$wire()?,)*
                })
            }
        }
    };
}

fixed_header!(RequestHeader {
    func: u32,
    flags: u32
});

/// Precedes every reply's outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The API's status code for the call (e.g. `CL_SUCCESS`).
    pub status: i32,
    /// Status of the first deferred (asynchronous) call that failed since the
    /// last reply, or 0. Deferred calls have no reply of their own.
    pub deferred_status: i32,
}

fixed_header!(ReplyHeader {
    status: i32,
    deferred_status: i32,
});

/// `Encoder::T` and `Decoder::T` for each fixed-width integer type `T`: its
/// little-endian bytes, written and read by one definition.
macro_rules! le_integers {
    ($($t:ident),*) => {
        impl Encoder {
            $(
                #[inline]
                pub fn $t(&mut self, v: $t) {
                    self.buf.extend_from_slice(&v.to_le_bytes());
                }
            )*
        }

        impl Decoder<'_> {
            $(
                #[inline]
                pub fn $t(&mut self) -> Result<$t, WireError> {
                    Ok($t::from_le_bytes(self.array()?))
                }
            )*
        }
    };
}

le_integers!(u32, i32, u64, i64);

/// Appends values to a growable buffer.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reuses `buf`'s allocation; its contents are cleared.
    #[inline]
    pub fn with_buffer(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Self { buf }
    }

    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    #[inline]
    pub fn usize(&mut self, v: usize) {
        self.u64(v as u64);
    }
    #[inline]
    pub fn bool(&mut self, v: bool) {
        self.u8(v as u8);
    }

    /// Length-prefixed bytes.
    #[inline]
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Bytes with no length prefix: the tail of a value whose length was
    /// written before it.
    #[inline]
    pub fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }

    /// A length prefix followed by `len` bytes that the caller fills in
    /// place, which saves a copy for large payloads.
    #[inline]
    pub fn bytes_uninit(&mut self, len: usize) -> &mut [u8] {
        self.u64(len as u64);
        let start = self.buf.len();
        self.buf.resize(start + len, 0);
        &mut self.buf[start..]
    }

    /// `None` and `Some` are told apart by a tag byte.
    #[inline]
    pub fn opt_bytes(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.u8(0),
            Some(b) => {
                self.u8(1);
                self.bytes(b);
            }
        }
    }

    #[inline]
    pub fn u64s(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        for x in v {
            self.u64(*x);
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Drops everything after the first `len` bytes.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// Overwrites an `i32` written earlier at `offset` (a header field whose
    /// value is known only at the end). Does nothing past the end.
    #[inline]
    pub fn patch_i32(&mut self, offset: usize, v: i32) {
        if let Some(dst) = self.buf.get_mut(offset..offset + 4) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
    /// Overwrites bytes written earlier from `offset` on (a reply's data
    /// that arrived after it was encoded). Does nothing past the end.
    #[inline]
    pub fn patch_bytes(&mut self, offset: usize, v: &[u8]) {
        if let Some(dst) = self.buf.get_mut(offset..offset.saturating_add(v.len())) {
            dst.copy_from_slice(v);
        }
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }
    #[inline]
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads values from untrusted bytes; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated {
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    /// A `u64` that must fit this machine's `usize`.
    #[inline]
    pub fn usize(&mut self) -> Result<usize, WireError> {
        let offset = self.pos;
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| WireError::BadLength {
            offset,
            len: v,
            available: 0,
        })
    }

    #[inline]
    pub fn bool(&mut self) -> Result<bool, WireError> {
        let offset = self.pos;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            tag => Err(WireError::BadTag { offset, tag }),
        }
    }

    /// A length prefix, checked against the bytes left before use, so a
    /// forged length can never cause an allocation.
    #[inline]
    fn len_prefix(&mut self, elem: usize) -> Result<usize, WireError> {
        let offset = self.pos;
        let len = self.u64()?;
        let available = self.remaining();
        match usize::try_from(len).ok().and_then(|l| l.checked_mul(elem)) {
            Some(bytes) if bytes <= available => Ok(len as usize),
            _ => Err(WireError::BadLength {
                offset,
                len,
                available,
            }),
        }
    }

    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.len_prefix(1)?;
        self.take(len)
    }

    #[inline]
    pub fn opt_bytes(&mut self) -> Result<Option<&'a [u8]>, WireError> {
        if self.bool()? {
            Ok(Some(self.bytes()?))
        } else {
            Ok(None)
        }
    }

    #[inline]
    pub fn u64s(&mut self) -> Result<Vec<u64>, WireError> {
        let len = self.len_prefix(8)?;
        (0..len).map(|_| self.u64()).collect()
    }

    /// Fails unless every byte was consumed: a frame with extra bytes is as
    /// suspect as a short one.
    #[inline]
    pub fn finish(&self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(WireError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut e = Encoder::new();
        RequestHeader {
            func: 7,
            flags: FLAG_ASYNC,
        }
        .encode(&mut e);
        e.u32(0xdead_beef);
        e.i32(-5);
        e.u64(u64::MAX);
        e.bytes(b"hello");
        e.opt_bytes(None);
        e.opt_bytes(Some(b""));
        e.u64s(&[1, 2, 3]);
        e.bool(true);
        let v = e.into_vec();
        let mut d = Decoder::new(&v);
        assert_eq!(
            RequestHeader::decode(&mut d),
            Ok(RequestHeader {
                func: 7,
                flags: FLAG_ASYNC
            })
        );
        assert_eq!(d.u32(), Ok(0xdead_beef));
        assert_eq!(d.i32(), Ok(-5));
        assert_eq!(d.u64(), Ok(u64::MAX));
        assert_eq!(d.bytes(), Ok(&b"hello"[..]));
        assert_eq!(d.opt_bytes(), Ok(None));
        assert_eq!(d.opt_bytes(), Ok(Some(&b""[..])));
        assert_eq!(d.u64s(), Ok(vec![1, 2, 3]));
        assert_eq!(d.bool(), Ok(true));
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn forged_length_is_rejected_without_allocating() {
        let mut e = Encoder::new();
        e.u64(u64::MAX / 2);
        let v = e.into_vec();
        assert!(matches!(
            Decoder::new(&v).bytes(),
            Err(WireError::BadLength { .. })
        ));
        assert!(matches!(
            Decoder::new(&v).u64s(),
            Err(WireError::BadLength { .. })
        ));
    }

    #[test]
    fn truncated_and_trailing() {
        assert!(matches!(
            Decoder::new(&[1, 2]).u32(),
            Err(WireError::Truncated { .. })
        ));
        let d = Decoder::new(&[0]);
        assert_eq!(d.finish(), Err(WireError::Trailing(1)));
        assert!(matches!(
            Decoder::new(&[2]).bool(),
            Err(WireError::BadTag { tag: 2, .. })
        ));
    }
}
