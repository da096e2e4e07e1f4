//! Which memory objects a request's command uses, read from the request
//! itself before it runs (the generated decoders are not touched): its
//! queue, then the objects (transfers, fills, copies, maps, migrations),
//! or the kernel, whose memory arguments residency recorded as they were
//! set. A request that does not decode names nothing here; it fails on its
//! own when it runs.

#![allow(non_upper_case_globals)] // the function ids keep the API's names

use wormhole_opencl_api::{func, Kind, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION};
use wormhole_residency::Access;
use wormhole_wire::{Decoder, RequestHeader};

use crate::opencl::tenant::Tenant;

/// What a command uses.
#[derive(Debug, Clone)]
pub(super) enum Uses {
    /// Not a command on memory.
    None,
    /// Up to two objects (library handles) and how.
    Mems {
        queue: usize,
        mems: [(usize, Access); 2],
        n: usize,
    },
    /// A kernel: its recorded memory arguments.
    Kernel { queue: usize, kernel: usize },
    /// A migration's list.
    List { queue: usize, mems: Vec<usize> },
}

impl Uses {
    pub(super) fn queue(&self) -> usize {
        match *self {
            Uses::None => 0,
            Uses::Mems { queue, .. } | Uses::Kernel { queue, .. } | Uses::List { queue, .. } => {
                queue
            }
        }
    }
}

fn handle(t: &Tenant, d: &mut Decoder<'_>, kind: Kind) -> Option<usize> {
    let id = d.u64().ok()?;
    let raw = t.lookup(id, kind).ok()?;
    (!raw.is_null()).then_some(raw as usize)
}

/// The header's function and the decoder past it.
pub(super) fn header(req: &[u8]) -> Option<(u32, Decoder<'_>)> {
    let mut d = Decoder::new(req);
    let h = RequestHeader::decode(&mut d).ok()?;
    Some((h.func, d))
}

fn one(t: &Tenant, mut d: Decoder<'_>, a: Access) -> Option<Uses> {
    let queue = handle(t, &mut d, Kind::Queue)?;
    let m = handle(t, &mut d, Kind::Mem)?;
    Some(Uses::Mems {
        queue,
        mems: [(m, a), (0, a)],
        n: 1,
    })
}

fn copy(t: &Tenant, mut d: Decoder<'_>) -> Option<Uses> {
    let queue = handle(t, &mut d, Kind::Queue)?;
    let src = handle(t, &mut d, Kind::Mem)?;
    let dst = handle(t, &mut d, Kind::Mem)?;
    Some(Uses::Mems {
        queue,
        mems: [(src, Access::Read), (dst, Access::Write)],
        n: 2,
    })
}

fn map(t: &Tenant, mut d: Decoder<'_>) -> Option<Uses> {
    let queue = handle(t, &mut d, Kind::Queue)?;
    let m = handle(t, &mut d, Kind::Mem)?;
    let flags = d.u64().ok()?;
    let a = if flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0 {
        Access::Write
    } else {
        Access::Read
    };
    Some(Uses::Mems {
        queue,
        mems: [(m, a), (0, a)],
        n: 1,
    })
}

/// The request's command's uses.
pub(super) fn of(t: &Tenant, func: u32, req: &[u8]) -> Uses {
    use func::*;
    let Some((_, mut d)) = header(req) else {
        return Uses::None;
    };
    let u = match func {
        clEnqueueReadBuffer | clEnqueueReadBufferRect | clEnqueueReadImage => {
            one(t, d, Access::Read)
        }
        clEnqueueWriteBuffer
        | clEnqueueWriteBufferRect
        | clEnqueueWriteImage
        | clEnqueueFillBuffer
        | clEnqueueFillImage => one(t, d, Access::Write),
        clEnqueueCopyBuffer
        | clEnqueueCopyBufferRect
        | clEnqueueCopyImage
        | clEnqueueCopyImageToBuffer
        | clEnqueueCopyBufferToImage => copy(t, d),
        clEnqueueMapBuffer | clEnqueueMapImage => map(t, d),
        clEnqueueUnmapMemObject => (|| {
            let _map_id = d.u64().ok()?;
            let data = d.bool().ok()?;
            let _len = d.u64().ok()?;
            let a = if data { Access::Write } else { Access::Read };
            one(t, d, a)
        })(),
        whEnqueueWriteBufferBulk | whEnqueueReadBufferBulk => (|| {
            let _size = d.u64().ok()?;
            let a = if func == whEnqueueWriteBufferBulk {
                Access::Write
            } else {
                Access::Read
            };
            one(t, d, a)
        })(),
        clEnqueueNDRangeKernel | clEnqueueTask => (|| {
            let queue = handle(t, &mut d, Kind::Queue)?;
            let kernel = handle(t, &mut d, Kind::Kernel)?;
            Some(Uses::Kernel { queue, kernel })
        })(),
        clEnqueueMigrateMemObjects => (|| {
            let queue = handle(t, &mut d, Kind::Queue)?;
            let _n = d.u32().ok()?;
            if !d.bool().ok()? {
                return None;
            }
            let ids = d.u64s().ok()?;
            let mems = ids
                .into_iter()
                .take(4096)
                .filter_map(|id| t.lookup(id, Kind::Mem).ok())
                .filter(|m| !m.is_null())
                .map(|m| m as usize)
                .collect();
            Some(Uses::List { queue, mems })
        })(),
        _ => None,
    };
    u.unwrap_or(Uses::None)
}

/// How many bytes the client streams right after this request (a bulk
/// write's, an unmap's written back), if any.
pub(super) fn incoming(f: u32, req: &[u8]) -> Option<u64> {
    let (_, mut d) = header(req)?;
    match f {
        func::whEnqueueWriteBufferBulk => d.u64().ok(),
        func::clEnqueueUnmapMemObject => {
            let _id = d.u64().ok()?;
            let data = d.bool().ok()?;
            let len = d.u64().ok()?;
            data.then_some(len)
        }
        _ => None,
    }
}

/// What the post-call hook cares about in a request.
#[derive(Debug, Clone, Copy)]
pub(super) enum Changed {
    None,
    /// A kernel argument was set: the kernel, its index and the memory
    /// object it now names (0: none).
    KernelArg {
        kernel: usize,
        index: u32,
        mem: usize,
    },
    /// A kernel was cloned, arguments and all (library handles).
    Cloned {
        from: usize,
        to: usize,
    },
    /// A memory object was mapped or unmapped: its pins are its live
    /// mappings.
    Mapping {
        mem: usize,
    },
}

/// Reads what a request changed that residency tracks.
pub(super) fn changed(t: &Tenant, f: u32, mut d: Decoder<'_>) -> Changed {
    use func::*;
    let c = match f {
        clSetKernelArg => (|| {
            let kernel = handle(t, &mut d, Kind::Kernel)?;
            let index = d.u32().ok()?;
            // An argument declared as no memory object (a scalar, local
            // memory, a sampler) never names one: nothing to note. The
            // declaration was asked for by the call that just ran.
            use crate::opencl::args::ArgDecl;
            if let Some(ArgDecl::Local | ArgDecl::Sampler | ArgDecl::Plain) =
                t.arg_decls.get(kernel as *mut std::ffi::c_void, index)
            {
                return None;
            }
            let _size = d.usize().ok()?;
            let mem = match d.u8().ok()? {
                2 if d.u8().ok()? == 0 => handle(t, &mut d, Kind::Mem).unwrap_or(0),
                _ => 0,
            };
            Some(Changed::KernelArg { kernel, index, mem })
        })(),
        clCloneKernel => (|| {
            let from = handle(t, &mut d, Kind::Kernel)?;
            let to = handle(t, &mut d, Kind::Kernel)?;
            Some(Changed::Cloned { from, to })
        })(),
        clEnqueueMapBuffer | clEnqueueMapImage => (|| {
            let _q = d.u64().ok()?;
            let mem = handle(t, &mut d, Kind::Mem)?;
            Some(Changed::Mapping { mem })
        })(),
        clEnqueueUnmapMemObject => (|| {
            let _id = d.u64().ok()?;
            let _data = d.bool().ok()?;
            let _len = d.u64().ok()?;
            let _q = d.u64().ok()?;
            let mem = handle(t, &mut d, Kind::Mem)?;
            Some(Changed::Mapping { mem })
        })(),
        _ => None,
    };
    c.unwrap_or(Changed::None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_wire::Encoder;

    fn frame(f: u32, body: impl FnOnce(&mut Encoder)) -> Vec<u8> {
        let mut e = Encoder::new();
        RequestHeader { func: f, flags: 0 }.encode(&mut e);
        body(&mut e);
        e.into_vec()
    }

    /// A request refused for want of room still has its streamed data
    /// drained: how much follows each kind of request.
    #[test]
    fn the_bytes_that_follow_a_request_are_known_before_it_runs() {
        let bulk = frame(func::whEnqueueWriteBufferBulk, |e| e.u64(1 << 20));
        assert_eq!(
            incoming(func::whEnqueueWriteBufferBulk, &bulk),
            Some(1 << 20)
        );
        let unmap = |data: bool| {
            frame(func::clEnqueueUnmapMemObject, |e| {
                e.u64(7);
                e.bool(data);
                e.u64(4096);
            })
        };
        assert_eq!(
            incoming(func::clEnqueueUnmapMemObject, &unmap(true)),
            Some(4096)
        );
        assert_eq!(incoming(func::clEnqueueUnmapMemObject, &unmap(false)), None);
        let read = frame(func::whEnqueueReadBufferBulk, |e| e.u64(1 << 20));
        assert_eq!(
            incoming(func::whEnqueueReadBufferBulk, &read),
            None,
            "data goes out"
        );
        assert_eq!(incoming(func::whEnqueueWriteBufferBulk, &[1, 2]), None);
    }
}
