//! The hand-written requests (the description's `manual` functions): one
//! encoding shared by client and server, with its checks in one place.

use wormhole_wire::{Decoder, Encoder, WireError};

use crate::Direction;

/// A copy between host and device (cudaMemcpy, cudaMemcpyAsync). Host data
/// of a host-to-device copy follows as bytes; a device-to-host reply
/// carries the bytes. `stream` is 0 for the legacy default stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memcpy {
    pub dir: Direction,
    pub dst: u64,
    pub src: u64,
    pub count: u64,
    pub stream: u64,
}

/// Most bytes one copy request carries: larger copies are split, so a
/// request always fits the transport's frames.
pub const MEMCPY_CHUNK: u64 = 1 << 20;

impl Memcpy {
    pub fn encode(&self, e: &mut Encoder) {
        e.u32(match self.dir {
            Direction::HostToHost => 0,
            Direction::HostToDevice => 1,
            Direction::DeviceToHost => 2,
            Direction::DeviceToDevice => 3,
        });
        e.u64(self.dst);
        e.u64(self.src);
        e.u64(self.count);
        e.u64(self.stream);
    }

    /// Decodes a request; host-to-host copies never reach the server.
    pub fn decode(d: &mut Decoder<'_>) -> Result<Self, WireError> {
        let dir = match d.u32()? {
            1 => Direction::HostToDevice,
            2 => Direction::DeviceToHost,
            3 => Direction::DeviceToDevice,
            _ => return Err(WireError::BadHeader("memcpy")),
        };
        let m = Memcpy {
            dir,
            dst: d.u64()?,
            src: d.u64()?,
            count: d.u64()?,
            stream: d.u64()?,
        };
        if m.dir != Direction::DeviceToDevice && m.count > MEMCPY_CHUNK {
            return Err(WireError::BadHeader("memcpy"));
        }
        Ok(m)
    }
}

/// A copy to or from a device variable (`to`: cudaMemcpyToSymbol). The
/// other side is host bytes (following the request, or in the reply) when
/// `device` is 0, else that device address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolCopy {
    pub to: bool,
    /// The client's id of the variable: its host shadow's address.
    pub symbol: u64,
    pub offset: u64,
    pub count: u64,
    pub device: u64,
}

impl SymbolCopy {
    pub fn encode(&self, e: &mut Encoder) {
        e.bool(self.to);
        e.u64(self.symbol);
        e.u64(self.offset);
        e.u64(self.count);
        e.u64(self.device);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<Self, WireError> {
        let c = SymbolCopy {
            to: d.bool()?,
            symbol: d.u64()?,
            offset: d.u64()?,
            count: d.u64()?,
            device: d.u64()?,
        };
        if c.device == 0 && c.count > MEMCPY_CHUNK {
            return Err(WireError::BadHeader("symbol copy"));
        }
        Ok(c)
    }
}

/// A kernel launch: the kernel (the client's id for it: the host stub's
/// address), the configuration and the packed argument block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub func: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u64,
    pub stream: u64,
    pub args: Vec<u8>,
}

impl Launch {
    pub fn encode(&self, e: &mut Encoder) {
        e.u64(self.func);
        for v in self.grid.iter().chain(self.block.iter()) {
            e.u32(*v);
        }
        e.u64(self.shared_mem);
        e.u64(self.stream);
        e.bytes(&self.args);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<Self, WireError> {
        let func = d.u64()?;
        let mut dims = [0u32; 6];
        for v in dims.iter_mut() {
            *v = d.u32()?;
        }
        Ok(Launch {
            func,
            grid: [dims[0], dims[1], dims[2]],
            block: [dims[3], dims[4], dims[5]],
            shared_mem: d.u64()?,
            stream: d.u64()?,
            args: d.bytes()?.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `decode` makes of the bytes `encode` writes.
    fn decoded<T>(
        encode: impl FnOnce(&mut Encoder),
        decode: impl FnOnce(&mut Decoder<'_>) -> T,
    ) -> T {
        let mut e = Encoder::new();
        encode(&mut e);
        decode(&mut Decoder::new(e.as_slice()))
    }

    #[test]
    fn requests_round_trip_and_bad_ones_are_refused() {
        let m = Memcpy {
            dir: Direction::DeviceToHost,
            dst: 0,
            src: 0x7f00_0000_0000,
            count: 4096,
            stream: 3,
        };
        assert_eq!(decoded(|e| m.encode(e), Memcpy::decode), Ok(m));
        let big = Memcpy {
            count: MEMCPY_CHUNK + 1,
            ..m
        };
        assert!(decoded(|e| big.encode(e), Memcpy::decode).is_err());
        let hh = Memcpy {
            dir: Direction::HostToHost,
            ..m
        };
        assert!(decoded(|e| hh.encode(e), Memcpy::decode).is_err());

        let l = Launch {
            func: 0x401000,
            grid: [4, 1, 1],
            block: [256, 1, 1],
            shared_mem: 0,
            stream: 0,
            args: vec![1, 2, 3, 4],
        };
        assert_eq!(decoded(|e| l.encode(e), Launch::decode), Ok(l.clone()));
        let mut e = Encoder::new();
        l.encode(&mut e);
        assert!(Launch::decode(&mut Decoder::new(&e.as_slice()[..20])).is_err());

        let c = SymbolCopy {
            to: true,
            symbol: 0x601000,
            offset: 16,
            count: 64,
            device: 0,
        };
        assert_eq!(decoded(|e| c.encode(e), SymbolCopy::decode), Ok(c));
        let big = SymbolCopy {
            count: MEMCPY_CHUNK + 1,
            ..c
        };
        assert!(decoded(|e| big.encode(e), SymbolCopy::decode).is_err());
    }
}
