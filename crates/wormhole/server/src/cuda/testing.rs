//! What the CUDA backend's unit tests share: a tenant owning one 4 KiB
//! allocation at [`BASE`] and the handles a test names (stand-in
//! addresses), and a request run through the real dispatch. No library is
//! ever loaded, so a request that passes every check is answered as
//! without one.

use wormhole_cuda_api::tracker::Alloc;
use wormhole_cuda_api::Kind;
use wormhole_wire::{Decoder, Encoder};

use super::{dispatch, loader, CudaTenant};

/// Where the tenant's one allocation starts.
pub const BASE: u64 = 0x7000_0000;

/// A tenant owning `[BASE, BASE + 4096)` and `handles` (id, kind, the
/// library's stand-in address).
pub fn tenant(handles: &[(u64, Kind, usize)]) -> CudaTenant {
    loader::forbid_libraries();
    let mut t = CudaTenant::new(1 << 20);
    t.allocs
        .insert(Alloc {
            start: BASE,
            size: 4096,
            device: 0,
        })
        .expect("insert");
    for &(id, kind, raw) in handles {
        t.insert_handle(id, kind, raw);
    }
    t
}

/// Runs one request through the tenant's dispatch, as the serve loop does.
pub fn call(t: &mut CudaTenant, func: u32, args: impl FnOnce(&mut Encoder)) -> Result<i32, i32> {
    let mut e = Encoder::new();
    args(&mut e);
    let mut out = Encoder::new();
    dispatch(t, func, &mut Decoder::new(e.as_slice()), &mut out)
}
