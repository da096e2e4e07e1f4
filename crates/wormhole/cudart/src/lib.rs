//! Wormhole's CUDA runtime client: everything behind the libcudart
//! stand-ins (`wormhole-cudart-12`, `wormhole-cudart-13`, see
//! `wormhole-cuda-stand-ins`), which only add
//! the ELF exports with NVIDIA's soname and symbol versions.
//!
//! Every function of `cuda.api` is here: generated stubs (`gen`) marshal a
//! call, send it to a Wormhole server over shared memory (or TCP) and
//! unmarshal the reply, through `call` (the call/reply cycle) and `state`
//! (the connection, handles, allocations, last error); `manual` holds the
//! hand-written ones, a module per concern (memory, copies, registration,
//! launches, streams, devices, …). The server is found as the OpenCL
//! client finds it (`WORMHOLE_SERVER`); with none, every call returns what
//! the native runtime returns on a machine without the NVIDIA
//! driver (cudaErrorInsufficientDriver).

pub mod call;
pub mod driver;
pub mod libs;
pub mod lt;
pub mod manual;
pub mod state;

pub use manual::mem3d::{Extent, Memcpy3DParms, PitchedPtr};
pub use state::MAJOR;

/// The generated stubs. Their text names the hand-written functions
/// `overrides::NAME` and the custom kinds `custom::NAME` (apigen's paths, in
/// the snapshots), hence the aliases below.
#[allow(clippy::missing_safety_doc, unused_imports)]
pub mod gen {
    use std::ffi::{c_char, c_void};

    use wormhole_cuda_api::{cudaErrorNotSupported, cudaSuccess};
    use wormhole_cuda_api::{func, Kind};

    use crate::call::Call;
    use crate::manual as overrides;
    use crate::manual as custom;
    use crate::state::{adopt_new, released, retained, set_errcode};

    include!(concat!(env!("OUT_DIR"), "/client_gen.rs"));
}

/// cuBLAS's generated stubs (`cublas.api`) and their forwarding table.
pub mod blas {
    #[allow(clippy::missing_safety_doc, unused_imports)]
    pub mod gen {
        use std::ffi::{c_char, c_void};

        use wormhole_cuda_api::blas::{func, CUBLAS_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_SUCCESS};
        use wormhole_cuda_api::Kind;

        use crate::libs::blas_manual as overrides;
        use crate::libs::{self as custom, released, Call};
        use crate::state::{adopt_new, retained, set_errcode};

        include!(concat!(env!("OUT_DIR"), "/blas_client_gen.rs"));
        include!(concat!(env!("OUT_DIR"), "/blas_forward_gen.rs"));
    }
}

/// cuRAND's generated stubs (`curand.api`) and their forwarding table.
pub mod rand {
    #[allow(clippy::missing_safety_doc, unused_imports)]
    pub mod gen {
        use std::ffi::{c_char, c_void};

        use wormhole_cuda_api::rand::{func, CURAND_STATUS_NOT_INITIALIZED, CURAND_STATUS_SUCCESS};
        use wormhole_cuda_api::Kind;

        use crate::libs::rand_manual as overrides;
        use crate::libs::{self as custom, released, Call};
        use crate::state::{adopt_new, retained, set_errcode};

        include!(concat!(env!("OUT_DIR"), "/rand_client_gen.rs"));
        include!(concat!(env!("OUT_DIR"), "/rand_forward_gen.rs"));
    }
}

/// cuSOLVER's generated stubs (`cusolver.api`) and their forwarding table.
pub mod solver {
    #[allow(clippy::missing_safety_doc, unused_imports)]
    pub mod gen {
        use std::ffi::{c_char, c_void};

        use wormhole_cuda_api::solver::{
            func, CUSOLVER_STATUS_NOT_SUPPORTED, CUSOLVER_STATUS_SUCCESS,
        };
        use wormhole_cuda_api::Kind;

        use crate::libs::solver_manual as overrides;
        use crate::libs::{self as custom, released, Call};
        use crate::state::{adopt_new, retained, set_errcode};

        include!(concat!(env!("OUT_DIR"), "/solver_client_gen.rs"));
        include!(concat!(env!("OUT_DIR"), "/solver_forward_gen.rs"));
    }
}

/// The body of a libcudart stand-in (`wormhole-cuda-stand-ins`) of CUDA
/// major `$major`, beside its generated exports.
#[macro_export]
macro_rules! stand_in {
    ($major:literal) => {
        /// Present only in Wormhole's stand-ins, so a server never mistakes
        /// one for the real runtime it should load.
        #[no_mangle]
        pub static wormhole_cudart_stub: u32 = $major;

        extern "C" fn init() {
            $crate::MAJOR.store($major, ::std::sync::atomic::Ordering::Relaxed);
        }

        /// Runs when the library is loaded, before the program's own
        /// constructors (which register its kernels).
        #[used]
        #[link_section = ".init_array"]
        static INIT: extern "C" fn() = init;
    };
}

/// `cudaHostFn_t`: a host function run in stream order (may be NULL).
pub type HostFn = Option<unsafe extern "C" fn(*mut std::ffi::c_void)>;

/// `cudaStreamCallback_t`: called with the stream, its status and the
/// caller's data (may be NULL).
pub type StreamCallback =
    Option<unsafe extern "C" fn(*mut std::ffi::c_void, i32, *mut std::ffi::c_void)>;

/// `cudaIpcMemHandle_t` and `cudaIpcEventHandle_t`: 64 opaque bytes,
/// passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcHandle {
    pub reserved: [std::ffi::c_char; 64],
}

/// `dim3`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}
