//! One tenant's CUDA state: its handle table (streams, events), its device
//! allocations, its modules and kernels, and the helpers the generated
//! decoders call. As in the OpenCL core, nothing a client sends is trusted:
//! handle ids are looked up in this tenant's table and checked for kind,
//! every device address must lie inside one of this tenant's allocations,
//! sizes are bounded before anything is allocated, and new ids must be
//! fresh. Each tenant is its own process, hence its own CUDA context: a
//! kernel cannot reach another tenant's memory either.

use std::collections::HashMap;
use std::ffi::c_void;

use wormhole_cuda_api::fatbin::{self, Kernel};
use wormhole_cuda_api::tracker::Tracker;
use wormhole_cuda_api::{cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaSuccess, Kind};
use wormhole_wire::{Decoder, WireError};

pub use crate::handles::NewSlot;
use crate::handles::{HandleKind, HandleTable};

/// `cudaStreamLegacy` and `cudaStreamPerThread`.
const SPECIAL_STREAMS: [u64; 2] = [1, 2];

/// Ids below this are never new: they stand for themselves (NULL, the
/// special streams) or are kept for more of them.
const FIRST_CLIENT_ID: u64 = 0x100;

/// Handles one tenant may hold at once.
const MAX_HANDLES: usize = 1 << 20;

/// A malformed request: reported as cudaErrorInvalidValue.
pub fn bad(_: WireError) -> i32 {
    cudaErrorInvalidValue
}

/// A registered fat binary.
pub struct Module {
    /// The runtime's handle (NULL where there is no runtime).
    pub handle: *mut *mut c_void,
    /// The fat binary and its wrapper: the runtime keeps pointers to both
    /// for the module's life, which is the tenant's.
    pub image: Box<[u8]>,
    pub _wrapper: Box<super::Wrapper>,
    /// Kernel layouts, read by the server itself from the cubins.
    pub layouts: fatbin::Layouts,
}

/// A registered kernel.
pub struct Func {
    /// The address the runtime knows the kernel by: a byte of ours that
    /// stands for the client's host stub.
    pub host: Box<u8>,
    /// Its module's id and its name, by which its layout is found.
    pub module: u64,
    pub name: Box<[u8]>,
    /// Found at its first launch, not at registration: a framework
    /// registers thousands of kernels (PyTorch, about 20,000) and launches
    /// few, and finding one may inflate compressed cubins. `Some(None)`: in
    /// no cubin that could be read.
    pub layout: Option<Option<Kernel>>,
}

impl CudaTenant {
    /// The layout of the kernel registered as `host`, found at first use.
    /// `Err`: no such kernel; `Ok(None)`: it has no readable layout.
    pub fn layout(&mut self, host: u64) -> Result<Option<&Kernel>, i32> {
        let f = self
            .funcs
            .get_mut(&host)
            .ok_or(wormhole_cuda_api::cudaErrorInvalidDeviceFunction)?;
        if f.layout.is_none() {
            // A cubin that does not inflate leaves the kernel without a
            // layout: its launches fail, as natively with a damaged image.
            let found = self
                .modules
                .get_mut(&f.module)
                .and_then(|m| m.layouts.find(&m.image, &f.name).ok().flatten().cloned());
            f.layout = Some(found);
        }
        Ok(f.layout.as_ref().and_then(Option::as_ref))
    }
}

/// A tenant's CUDA objects.
pub struct CudaTenant {
    handles: HandleTable<Kind>,
    pub allocs: Tracker,
    pub modules: HashMap<u64, Module>,
    pub funcs: HashMap<u64, Func>,
    /// Device variables by the client's id (its host shadow's address):
    /// our stand-in shadow, which the runtime knows them by.
    pub vars: HashMap<u64, Box<[u8]>>,
    pub max_alloc: u64,
    /// The memory this tenant may hold in allocations, when limited
    /// (shared with its OpenCL state).
    pub memory: Option<std::sync::Arc<crate::quota::Quota>>,
    /// Whether `memory` has seen CUDA's largest device (at the first call).
    pub device_sized: bool,
    /// Delay storing, when the ledger counts CUDA's memory: it serves
    /// `cudaMalloc` and `cudaFree` and makes allocations resident.
    pub residency: Option<std::sync::Arc<crate::residency::CudaResidency>>,
    /// What each function called so far does to device memory, for
    /// residency.
    pub effects: rustc_hash::FxHashMap<u32, crate::residency::CudaEffect>,
    /// The pointer mode (device: true) the server last set on each real
    /// cuBLAS handle, by its address; new handles start in host mode.
    pub blas_modes: HashMap<usize, bool>,
    out_bufs: crate::outbuf::OutBufs,
}

impl HandleKind for Kind {
    const BAD_REQUEST: i32 = cudaErrorInvalidValue;

    fn invalid(self) -> i32 {
        Kind::invalid(self)
    }

    /// `cudaStreamLegacy` (1) and `cudaStreamPerThread` (2).
    fn stands_for_itself(self, id: u64) -> bool {
        self == Kind::Stream && SPECIAL_STREAMS.contains(&id)
    }
}

impl CudaTenant {
    pub fn new(max_alloc: u64) -> Self {
        CudaTenant {
            handles: HandleTable::new(FIRST_CLIENT_ID..=u64::MAX, MAX_HANDLES),
            allocs: Tracker::new(),
            modules: HashMap::new(),
            funcs: HashMap::new(),
            vars: HashMap::new(),
            max_alloc,
            memory: None,
            device_sized: false,
            residency: None,
            effects: rustc_hash::FxHashMap::default(),
            blas_modes: HashMap::new(),
            out_bufs: crate::outbuf::OutBufs::default(),
        }
    }

    // Id 0 is NULL (the default stream); the special streams stand for
    // themselves (`HandleKind::stands_for_itself` above).
    crate::handles::handle_decoders!(handles, Kind);

    /// Before a destroy call: the id must be one of ours, of `kind`.
    pub fn check_release(&self, id: u64, kind: Kind) -> Result<(), i32> {
        self.handles.get(id, kind).map(|_| ()).ok_or(kind.invalid())
    }

    pub fn retained(&mut self, _id: u64, _kind: Kind) {}

    /// Forgets a destroyed handle.
    pub fn released(&mut self, id: u64, kind: Kind) {
        self.handles.remove(id);
        if kind == Kind::Stream {
            self.streams_changed();
        }
    }

    /// Tells residency which streams to ask before it evicts.
    pub fn streams_changed(&self) {
        if let Some(r) = &self.residency {
            r.set_streams(self.handles.raws_of(Kind::Stream));
        }
    }

    /// Puts a handle in the table as a creation call would: for tests and
    /// the fuzzer, which have no library to create one (see
    /// `loader::forbid_libraries`).
    pub fn insert_handle(&mut self, id: u64, kind: Kind, raw: usize) {
        self.handles.insert(id, kind, raw, ());
    }

    pub fn commit_new(&mut self, slot: &mut NewSlot, kind: Kind, status: i32) {
        if let Some((id, raw)) = slot.committed(status == cudaSuccess) {
            self.handles.insert(id, kind, raw as usize, ());
            if kind == Kind::Stream {
                self.streams_changed();
            }
        }
    }

    /// A buffer for a call to write into, bounded by the tenant's limits.
    pub fn out_buf(&mut self, present: bool, size: u64) -> Result<Option<Vec<u8>>, i32> {
        if !present {
            return Ok(None);
        }
        self.out_bufs
            .take(size, self.max_alloc)
            .map(Some)
            .map_err(|_| cudaErrorMemoryAllocation)
    }

    /// Returns a buffer from [`CudaTenant::out_buf`] once its call is encoded.
    pub fn give_back(&mut self, v: Option<Vec<u8>>) {
        self.out_bufs.give_back(v);
    }

    /// A copy into the allocation `p` points into: residency saves it when
    /// it is evicted next.
    pub fn wrote(&self, p: u64) {
        if let Some(r) = &self.residency {
            r.wrote(p);
        }
    }

    /// A device address the client sent: it must lie in one of this
    /// tenant's allocations (with `[p, p + len)` inside it).
    pub fn devptr(&self, p: u64, len: u64) -> Result<*mut c_void, i32> {
        self.allocs
            .check(p, len)
            .map(|_| p as usize as *mut c_void)
            .map_err(|_| cudaErrorInvalidValue)
    }
}

/// A string argument (a bus id); one with an interior NUL is refused.
pub fn cstr(b: Option<&[u8]>) -> Result<Option<std::ffi::CString>, i32> {
    b.map(|b| std::ffi::CString::new(b).map_err(|_| cudaErrorInvalidValue))
        .transpose()
}

pub fn opt_cstr(s: &Option<std::ffi::CString>) -> *const std::ffi::c_char {
    s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

pub fn opt_mut_ptr(b: &mut Option<Vec<u8>>) -> *mut c_void {
    b.as_mut()
        .map_or(std::ptr::null_mut(), |v| v.as_mut_ptr().cast())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_cuda_api::tracker::Alloc;
    use wormhole_wire::Encoder;

    #[test]
    fn refuses_foreign_handles_and_addresses() {
        let mut t = CudaTenant::new(1 << 20);
        let mut e = Encoder::new();
        e.bool(true);
        e.u64(0x107);
        let mut slot = t.out_new(&mut Decoder::new(e.as_slice())).expect("fresh");
        // SAFETY: a slot with an id points `ptr()` at its own handle field,
        // as a creation call would write it.
        unsafe { *slot.ptr() = 0x1234 as *mut c_void };
        t.commit_new(&mut slot, Kind::Stream, cudaSuccess);
        assert_eq!(t.lookup(0x107, Kind::Stream), Ok(0x1234 as *mut c_void));
        assert!(t.lookup(0x107, Kind::Event).is_err(), "wrong kind");
        assert!(t.lookup(0x108, Kind::Stream).is_err(), "unknown id");
        assert_eq!(
            t.lookup(2, Kind::Stream),
            Ok(2 as *mut c_void),
            "cudaStreamPerThread"
        );
        assert!(t.lookup(2, Kind::Event).is_err());
        let mut low = Encoder::new();
        low.bool(true);
        low.u64(2);
        assert!(
            t.out_new(&mut Decoder::new(low.as_slice())).is_err(),
            "ids of special handles are never new"
        );
        assert!(
            t.out_new(&mut Decoder::new(e.as_slice())).is_err(),
            "an id in use is not fresh"
        );
        t.allocs
            .insert(Alloc {
                start: 0x7000_0000,
                size: 256,
                device: 0,
            })
            .expect("insert");
        assert!(t.devptr(0x7000_0080, 128).is_ok());
        assert!(t.devptr(0x7000_0080, 129).is_err(), "overrun");
        assert!(t.devptr(0x6fff_ffff, 1).is_err(), "not ours");
        assert!(t.out_buf(true, 2 << 20).is_err(), "over the limit");
    }
}
