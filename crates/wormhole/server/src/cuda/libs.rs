//! What cuBLAS's and cuRAND's generated decoders see as their tenant: the
//! client's one CUDA tenant (its handle table, holding streams, cuBLAS
//! handles and cuRAND generators side by side, and its allocations), with
//! the library's own statuses for what it refuses.

use std::ffi::c_void;

use wormhole_cuda_api::{Kind, Library};
use wormhole_wire::Decoder;

use super::tenant::{CudaTenant, NewSlot};

/// One cuBLAS or cuRAND request's view of the tenant.
pub struct LibTenant<'a> {
    pub cu: &'a mut CudaTenant,
    pub lib: Library,
    /// The pointer mode (device: true) this request's scalars and results
    /// need, once one of them has been decoded: all must agree, as one
    /// handle has one mode.
    pub mode: Option<bool>,
}

impl<'a> LibTenant<'a> {
    pub fn new(cu: &'a mut CudaTenant, lib: Library) -> Self {
        LibTenant {
            cu,
            lib,
            mode: None,
        }
    }

    /// The library's status for a bad handle of `kind`: its own kinds'
    /// "not initialized"; a stream that is not the tenant's is a bad value.
    fn bad(&self, kind: Kind) -> i32 {
        match kind {
            Kind::Stream | Kind::Event => self.lib.invalid_value(),
            _ => kind.invalid(),
        }
    }

    pub fn handle(&mut self, d: &mut Decoder<'_>, kind: Kind) -> Result<*mut c_void, i32> {
        let bad = self.bad(kind);
        self.cu.handle(d, kind).map_err(|_| bad)
    }

    pub fn opt_handle(&mut self, d: &mut Decoder<'_>, kind: Kind) -> Result<*mut c_void, i32> {
        let bad = self.bad(kind);
        self.cu.opt_handle(d, kind).map_err(|_| bad)
    }

    pub fn handle_with_id(
        &mut self,
        d: &mut Decoder<'_>,
        kind: Kind,
    ) -> Result<(*mut c_void, u64), i32> {
        let bad = self.bad(kind);
        self.cu.handle_with_id(d, kind).map_err(|_| bad)
    }

    pub fn check_release(&self, id: u64, kind: Kind) -> Result<(), i32> {
        self.cu.check_release(id, kind).map_err(|_| self.bad(kind))
    }

    pub fn retained(&mut self, _id: u64, _kind: Kind) {}

    pub fn released(&mut self, id: u64, kind: Kind) {
        if let Ok(raw) = self.cu.lookup(id, kind) {
            self.cu.blas_modes.remove(&(raw as usize));
        }
        self.cu.released(id, kind);
    }

    pub fn out_new(&mut self, d: &mut Decoder<'_>) -> Result<NewSlot, i32> {
        let invalid = self.lib.invalid_value();
        self.cu.out_new(d).map_err(|_| invalid)
    }

    /// Records a new handle; a new cuBLAS handle is in host pointer mode
    /// (whatever handle had its address before).
    pub fn commit_new(&mut self, slot: &mut NewSlot, kind: Kind, status: i32) {
        if status == 0 && kind == Kind::Cublas {
            self.cu.blas_modes.insert(slot.raw() as usize, false);
        }
        self.cu.commit_new(slot, kind, status);
    }

    /// A device address, unchecked here: its extent depends on the other
    /// arguments, and the description's `check=` for the call checks it
    /// (`every_devptr_is_checked` tests that each one is named by one).
    /// The call wrote the device memory `p` points to (`writes=`).
    pub fn wrote(&self, p: u64) {
        self.cu.wrote(p);
    }

    pub fn devptr(&self, p: u64, _len: u64) -> Result<*mut c_void, i32> {
        Ok(p as usize as *mut c_void)
    }

    /// `[p, p + bytes)` must be inside one of the tenant's allocations
    /// (nothing to check when the call touches no byte).
    pub fn owned(&self, p: *mut c_void, bytes: u64) -> Result<(), i32> {
        if bytes == 0 {
            return Ok(());
        }
        self.cu
            .allocs
            .check(p as usize as u64, bytes)
            .map(|_| ())
            .map_err(|_| self.lib.invalid_value())
    }
}
