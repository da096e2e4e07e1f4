//! Charging a tenant's OpenCL objects to its quota ([`crate::quota`]):
//! memory objects from creation until the library destroys them, programs'
//! sources and binaries until the client's last release.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use wormhole_opencl_api::{
    Kind, CL_MEM_ASSOCIATED_MEMOBJECT, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_MEM_SIZE,
    CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES, CL_SUCCESS,
};

use super::{ffi, info_value, release_real};
use crate::quota::Quota;

/// What one memory object costs its tenant, held by the tenant's table
/// and by the object's destructor callback.
#[derive(Debug)]
pub struct Charge {
    quota: Arc<Quota>,
    bytes: u64,
    state: AtomicU8,
}

const HELD: u8 = 0;
const LET_GO: u8 = 1;
const DESTROYED: u8 = 2;

impl Charge {
    /// The client released its last reference: the bytes come back when
    /// the library destroys the object, which commands may delay.
    pub fn let_go(&self) {
        // Counted first, and taken back if the object is already gone, so
        // that `uncharge` on another thread never sees a count to undo
        // that is not there yet.
        self.quota.freeing(self.bytes);
        if self
            .state
            .compare_exchange(HELD, LET_GO, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            self.quota.freed(self.bytes);
        }
    }
}

/// Runs when the library destroys the object: after the client's last
/// release *and* the last command that used it, so memory a queue still
/// holds stays counted.
extern "C" fn uncharge(_mem: *mut c_void, user: *mut c_void) {
    // SAFETY: `user` is the reference `charge` leaked for the callback,
    // and the library calls a destructor callback exactly once.
    let c = unsafe { Arc::from_raw(user as *const Charge) };
    if c.state.swap(DESTROYED, Ordering::AcqRel) == LET_GO {
        c.quota.freed(c.bytes);
    }
    c.quota.release(c.bytes);
}

/// Charges a memory object the library just made: its size (a sub-buffer:
/// nothing, its parent's memory is counted; `None`). Past the quota the
/// object is released and the creation fails as the library's would when
/// out of memory.
///
/// # Safety
/// `mem` is a live memory object on which the caller holds the only
/// reference it will hand out.
pub unsafe fn charge(quota: &Arc<Quota>, mem: *mut c_void) -> Result<Option<Arc<Charge>>, i32> {
    // SAFETY: `mem` is the object the library just made for this call
    // (`Tenant::insert`), live; CL_MEM_ASSOCIATED_MEMOBJECT answers one cl_mem,
    // a usize.
    let parent =
        unsafe { info_value::<usize>(ffi::clGetMemObjectInfo, mem, CL_MEM_ASSOCIATED_MEMOBJECT) };
    if parent.is_some_and(|p| p != 0) {
        return Ok(None);
    }
    // SAFETY: the same live `mem`; CL_MEM_SIZE answers one size_t.
    let bytes = unsafe { info_value::<usize>(ffi::clGetMemObjectInfo, mem, CL_MEM_SIZE) };
    let refuse = |code| {
        // SAFETY: the only reference to `mem`, which the library just made for
        // `Tenant::insert` and nobody else has seen.
        unsafe { release_real(Kind::Mem, mem) };
        Err(code)
    };
    let Some(bytes) = bytes.map(|b| b as u64) else {
        return refuse(CL_OUT_OF_RESOURCES);
    };
    if !quota.charge(bytes) {
        return refuse(CL_MEM_OBJECT_ALLOCATION_FAILURE);
    }
    let charge = Arc::new(Charge {
        quota: quota.clone(),
        bytes,
        state: AtomicU8::new(HELD),
    });
    let c = Arc::into_raw(charge.clone());
    // SAFETY: a live memory object; `uncharge` takes the reference.
    let s = unsafe {
        ffi::clSetMemObjectDestructorCallback(mem, uncharge as *mut c_void, c as *mut c_void)
    };
    if s != CL_SUCCESS {
        // No way to learn when it dies, so no way to give the bytes back.
        // SAFETY: the callback was refused, so the reference is still ours.
        drop(unsafe { Arc::from_raw(c) });
        quota.release(bytes);
        return refuse(CL_OUT_OF_RESOURCES);
    }
    Ok(Some(charge))
}

/// What a program's source or binaries cost its tenant, from its creation
/// until the client's last release (dropping this gives them back). The
/// library keeps its copy of them as long as the program lives, which
/// kernels and commands may make longer; what it compiles from them (and a
/// link makes) is not counted: asking the library for a linked program's
/// binaries makes PoCL compile them, seconds on the tenant's thread.
#[derive(Debug)]
pub struct ProgramCharge {
    quota: Arc<Quota>,
    bytes: u64,
}

impl Drop for ProgramCharge {
    fn drop(&mut self) {
        self.quota.release(self.bytes);
    }
}

/// Charges a program the library just made from `bytes` of source or
/// binaries; past the quota the program is released and the creation
/// fails with `CL_OUT_OF_HOST_MEMORY`, the code PoCL gives a creation it
/// has no memory for.
///
/// # Safety
/// `program` is a live program on which the caller holds the only
/// reference it will hand out.
pub unsafe fn charge_program(
    quota: &Arc<Quota>,
    program: *mut c_void,
    bytes: u64,
) -> Result<ProgramCharge, i32> {
    if quota.charge(bytes) {
        return Ok(ProgramCharge {
            quota: quota.clone(),
            bytes,
        });
    }
    // SAFETY: the only reference to `program`, which the library just made for
    // `Tenant::insert` and nobody else has seen.
    unsafe { release_real(Kind::Program, program) };
    Err(CL_OUT_OF_HOST_MEMORY)
}

/// What an object in the tenant's table costs it.
#[derive(Debug)]
pub enum Held {
    /// A memory object, until the library destroys it.
    Mem(Arc<Charge>),
    /// A program's source and binaries, until the client lets go.
    Program(ProgramCharge),
}

impl Held {
    /// The client released its last reference.
    pub fn let_go(self) {
        match self {
            Held::Mem(c) => c.let_go(),
            Held::Program(p) => drop(p),
        }
    }
}
