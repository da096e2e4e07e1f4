//! The CUDA runtime API as Wormhole forwards it.
//!
//! [`DESCRIPTION`] is the single description of every forwarded function
//! (`cuda.api`); the client library and the server's CUDA backend generate
//! their stubs and dispatch from it. This crate also holds the logic both
//! sides share and that needs no GPU: the allocation tracker
//! ([`tracker`]), fat-binary and cubin parsing ([`fatbin`]), kernel
//! argument marshalling ([`launch`]) and the runtime's error texts
//! ([`errors`]).

pub mod errors;
pub mod extent;
pub mod fatbin;
pub mod launch;
pub mod matmul;
pub mod tracker;
pub mod wire;

/// The API description, for build scripts.
pub const DESCRIPTION: &str = include_str!("../cuda.api");
/// cuBLAS's description (`cublas.api`).
pub const BLAS_DESCRIPTION: &str = include_str!("../cublas.api");
/// cuRAND's description (`curand.api`).
pub const RAND_DESCRIPTION: &str = include_str!("../curand.api");
/// The driver API's description (`driver.api`): answered by the client.
pub const DRIVER_DESCRIPTION: &str = include_str!("../driver.api");
/// cuBLASLt's description (`cublaslt.api`).
pub const LT_DESCRIPTION: &str = include_str!("../cublaslt.api");
/// cuSOLVER's dense API (`cusolver.api`).
pub const SOLVER_DESCRIPTION: &str = include_str!("../cusolver.api");

/// Kinds of CUDA handle a tenant's table holds; a handle of one kind can
/// never be used as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    Stream = 0,
    Event,
    /// `cublasHandle_t`.
    Cublas,
    /// `curandGenerator_t`.
    Curand,
    /// `cusolverDnHandle_t`.
    Cusolver,
    /// `cusolverDnParams_t`.
    CusolverParams,
    /// `gesvdjInfo_t` (cuSOLVER's Jacobi SVD settings).
    GesvdjInfo,
}

impl Kind {
    /// The status for a bad handle of this kind, in its own API's terms.
    pub fn invalid(self) -> i32 {
        match self {
            Kind::Stream | Kind::Event => cudaErrorInvalidResourceHandle,
            Kind::Cublas => blas::CUBLAS_STATUS_NOT_INITIALIZED,
            Kind::Curand => rand::CURAND_STATUS_NOT_INITIALIZED,
            Kind::Cusolver => solver::CUSOLVER_STATUS_NOT_INITIALIZED,
            Kind::CusolverParams | Kind::GesvdjInfo => solver::CUSOLVER_STATUS_INVALID_VALUE,
        }
    }
}

/// Unused by CUDA (no info queries return handles); the generated common
/// code names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoHandle {
    One(Kind),
    Array(Kind),
    Custom,
}

// cudaError_t values this code uses (driver_types.h).
#[allow(non_upper_case_globals)]
mod status {
    pub const cudaSuccess: i32 = 0;
    pub const cudaErrorInvalidValue: i32 = 1;
    pub const cudaErrorMemoryAllocation: i32 = 2;
    pub const cudaErrorInitializationError: i32 = 3;
    pub const cudaErrorInvalidPitchValue: i32 = 12;
    pub const cudaErrorInvalidDevicePointer: i32 = 17;
    pub const cudaErrorInvalidSymbol: i32 = 13;
    pub const cudaErrorInvalidMemcpyDirection: i32 = 21;
    pub const cudaErrorInsufficientDriver: i32 = 35;
    pub const cudaErrorInvalidDeviceFunction: i32 = 98;
    pub const cudaErrorNoDevice: i32 = 100;
    pub const cudaErrorInvalidDevice: i32 = 101;
    pub const cudaErrorInvalidResourceHandle: i32 = 400;
    pub const cudaErrorIllegalState: i32 = 401;
    pub const cudaErrorInvalidKernelImage: i32 = 200;
    pub const cudaErrorNotSupported: i32 = 801;
    pub const cudaErrorUnknown: i32 = 999;
}
pub use status::*;

/// cudaMemcpyKind.
#[allow(non_upper_case_globals)]
pub mod memcpy_kind {
    pub const cudaMemcpyHostToHost: i32 = 0;
    pub const cudaMemcpyHostToDevice: i32 = 1;
    pub const cudaMemcpyDeviceToHost: i32 = 2;
    pub const cudaMemcpyDeviceToDevice: i32 = 3;
    pub const cudaMemcpyDefault: i32 = 4;
}

/// Bytes of `struct cudaFuncAttributes`, the same in CUDA 12 and 13.
pub const FUNC_ATTRIBUTES_LEN: usize = 144;

/// Which way a copy goes, once cudaMemcpyDefault is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HostToHost,
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

/// Resolves a copy's direction from its kind and, for cudaMemcpyDefault,
/// from whether each pointer is device memory (the tracker's answer); an
/// explicit kind is checked against the same answer: neither side may
/// treat a host address as a device one or the other way round.
#[allow(non_upper_case_globals)]
pub fn direction(kind: i32, dst_dev: bool, src_dev: bool) -> Result<Direction, i32> {
    use memcpy_kind::*;
    let d = match kind {
        cudaMemcpyHostToHost => Direction::HostToHost,
        cudaMemcpyHostToDevice => Direction::HostToDevice,
        cudaMemcpyDeviceToHost => Direction::DeviceToHost,
        cudaMemcpyDeviceToDevice => Direction::DeviceToDevice,
        cudaMemcpyDefault => match (dst_dev, src_dev) {
            (false, false) => Direction::HostToHost,
            (true, false) => Direction::HostToDevice,
            (false, true) => Direction::DeviceToHost,
            (true, true) => Direction::DeviceToDevice,
        },
        _ => return Err(cudaErrorInvalidMemcpyDirection),
    };
    let (want_dst, want_src) = match d {
        Direction::HostToHost => (false, false),
        Direction::HostToDevice => (true, false),
        Direction::DeviceToHost => (false, true),
        Direction::DeviceToDevice => (true, true),
    };
    // Either way round is refused: a device address the kind calls host
    // memory would be read or written in the client's own address space.
    if want_dst != dst_dev || want_src != src_dev {
        return Err(cudaErrorInvalidValue);
    }
    Ok(d)
}

/// The size of `cudaDeviceProp` in the headers of each major version
/// (12.9: 1032 bytes, 13.5: 1008; measured with sizeof against them).
pub fn devprop_size(major: u32) -> usize {
    if major == 12 {
        1032
    } else {
        1008
    }
}

/// The runtime version a client library reports, by soname major.
pub fn runtime_version(major: u32) -> i32 {
    match major {
        12 => 12090,
        _ => 13050,
    }
}

// No CUDA info query returns handles, so the generated `info_handle` is a
// match with only its default arm.
#[allow(clippy::match_single_binding)]
mod common {
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/common_gen.rs"));
}
pub use common::*;

/// cuBLAS: function ids (`cublas.api`), statuses, versions.
pub mod blas {
    #![allow(non_upper_case_globals, clippy::match_single_binding)]
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/blas_common_gen.rs"));

    pub const CUBLAS_STATUS_SUCCESS: i32 = 0;
    pub const CUBLAS_STATUS_NOT_INITIALIZED: i32 = 1;
    pub const CUBLAS_STATUS_ALLOC_FAILED: i32 = 3;
    pub const CUBLAS_STATUS_INVALID_VALUE: i32 = 7;
    pub const CUBLAS_STATUS_INTERNAL_ERROR: i32 = 14;
    pub const CUBLAS_STATUS_NOT_SUPPORTED: i32 = 15;

    /// Bytes of alpha and beta in a call whose compute type is `compute`
    /// (cublasGemmEx's): a `cublasComputeType_t`, or one of the
    /// `cudaDataType` values cuBLAS still takes there (PyTorch passes
    /// CUDA_R_32F for bfloat16). None for any other value.
    pub fn scalar_size(compute: i32) -> Option<usize> {
        match compute {
            // CUBLAS_COMPUTE_16F, _PEDANTIC; CUDA_R_16F
            64 | 65 | 2 => Some(2),
            // CUBLAS_COMPUTE_32F, _PEDANTIC, _FAST_16F, _FAST_16BF,
            // _FAST_TF32, CUBLAS_COMPUTE_32I, _PEDANTIC; CUDA_R_32F, R_32I
            68 | 69 | 74 | 75 | 77 | 72 | 73 | 0 | 10 => Some(4),
            // CUBLAS_COMPUTE_64F, _PEDANTIC; CUDA_R_64F, C_32F
            70 | 71 | 1 | 4 => Some(8),
            // CUDA_C_64F
            5 => Some(16),
            _ => None,
        }
    }

    /// cublasGetVersion's answer for the library of a CUDA major (12.9.3,
    /// 13.10.0: the wheels the description was checked against).
    pub fn version(major: u32) -> i32 {
        if major == 12 {
            120903
        } else {
            131000
        }
    }

    /// cublasGetStatusName and cublasGetStatusString, as NVIDIA's library
    /// answers them (measured with both wheels: the same texts).
    pub fn status_text(s: i32) -> (&'static std::ffi::CStr, &'static std::ffi::CStr) {
        match s {
            0 => (c"CUBLAS_STATUS_SUCCESS", c"success"),
            1 => (
                c"CUBLAS_STATUS_NOT_INITIALIZED",
                c"the library was not initialized",
            ),
            3 => (
                c"CUBLAS_STATUS_ALLOC_FAILED",
                c"the resource allocation failed",
            ),
            7 => (
                c"CUBLAS_STATUS_INVALID_VALUE",
                c"an unsupported value or parameter was passed to the function",
            ),
            8 => (
                c"CUBLAS_STATUS_ARCH_MISMATCH",
                c"the function requires an architectural feature absent from the device",
            ),
            11 => (
                c"CUBLAS_STATUS_MAPPING_ERROR",
                c"an access to GPU memory space failed",
            ),
            13 => (
                c"CUBLAS_STATUS_EXECUTION_FAILED",
                c"the function failed to launch on the GPU",
            ),
            14 => (
                c"CUBLAS_STATUS_INTERNAL_ERROR",
                c"an internal operation failed",
            ),
            15 => (
                c"CUBLAS_STATUS_NOT_SUPPORTED",
                c"the requested functionality is not supported",
            ),
            16 => (c"CUBLAS_STATUS_LICENSE_ERROR", c"the license check failed"),
            _ => (c"unrecognized status", c"unrecognized status"),
        }
    }
}

/// cuRAND: function ids (`curand.api`), statuses, versions.
/// cuBLASLt's ids (`cublaslt.api`).
pub mod lt {
    #![allow(non_upper_case_globals, clippy::match_single_binding)]
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/lt_common_gen.rs"));
}

/// The driver API's ids and results (`driver.api`).
pub mod driver {
    #![allow(non_upper_case_globals, clippy::match_single_binding)]
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/driver_common_gen.rs"));

    pub const CUDA_SUCCESS: i32 = 0;
    pub const CUDA_ERROR_INVALID_VALUE: i32 = 1;
    pub const CUDA_ERROR_NOT_INITIALIZED: i32 = 3;
    pub const CUDA_ERROR_NO_DEVICE: i32 = 100;
    pub const CUDA_ERROR_INVALID_DEVICE: i32 = 101;
    pub const CUDA_ERROR_INVALID_CONTEXT: i32 = 201;
    pub const CUDA_ERROR_NOT_SUPPORTED: i32 = 801;

    /// CUresult names and messages (cuda.h's), for cuGetErrorName and
    /// cuGetErrorString: the codes this client answers with, and the
    /// runtime's failures it passes on.
    const RESULTS: &[(i32, &std::ffi::CStr, &std::ffi::CStr)] = &[
        (0, c"CUDA_SUCCESS", c"no error"),
        (1, c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
        (2, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
        (3, c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
        (4, c"CUDA_ERROR_DEINITIALIZED", c"driver shutting down"),
        (
            35,
            c"CUDA_ERROR_STUB_LIBRARY",
            c"CUDA driver is a stub library",
        ),
        (
            100,
            c"CUDA_ERROR_NO_DEVICE",
            c"no CUDA-capable device is detected",
        ),
        (101, c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
        (
            201,
            c"CUDA_ERROR_INVALID_CONTEXT",
            c"invalid device context",
        ),
        (500, c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
        (801, c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
        (999, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
    ];

    /// A result's name and message; None for a code cuda.h does not list
    /// here (the driver then answers CUDA_ERROR_INVALID_VALUE).
    pub fn describe(result: i32) -> Option<(&'static std::ffi::CStr, &'static std::ffi::CStr)> {
        RESULTS
            .iter()
            .find(|(c, _, _)| *c == result)
            .map(|&(_, name, text)| (name, text))
    }

    /// The driver's result for a runtime status the client got while
    /// answering a driver call: the same number where both APIs name the
    /// same failure, else CUDA_ERROR_NOT_INITIALIZED (what a driver that
    /// cannot start answers).
    pub fn from_runtime(status: i32) -> i32 {
        match status {
            0 | 1 | 2 | 100 | 101 | 999 => status,
            _ => CUDA_ERROR_NOT_INITIALIZED,
        }
    }
}

pub mod rand {
    #![allow(non_upper_case_globals, clippy::match_single_binding)]
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/rand_common_gen.rs"));

    pub const CURAND_STATUS_SUCCESS: i32 = 0;
    pub const CURAND_STATUS_NOT_INITIALIZED: i32 = 101;
    pub const CURAND_STATUS_OUT_OF_RANGE: i32 = 104;
    pub const CURAND_STATUS_INITIALIZATION_FAILED: i32 = 203;

    /// curandGetVersion's answer for the library of a CUDA major (10.3.10,
    /// 10.4.5).
    pub fn version(major: u32) -> i32 {
        if major == 12 {
            10310
        } else {
            10405
        }
    }
}

/// cuSOLVER's dense API: function ids (`cusolver.api`) and statuses.
pub mod solver {
    #![allow(non_upper_case_globals, clippy::match_single_binding)]
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/solver_common_gen.rs"));

    pub const CUSOLVER_STATUS_SUCCESS: i32 = 0;
    pub const CUSOLVER_STATUS_NOT_INITIALIZED: i32 = 1;
    pub const CUSOLVER_STATUS_INVALID_VALUE: i32 = 3;
    pub const CUSOLVER_STATUS_INTERNAL_ERROR: i32 = 7;
    pub const CUSOLVER_STATUS_NOT_SUPPORTED: i32 = 9;
}

/// The private entry through which the libcublas and libcurand stand-ins
/// reach the one client in the libcudart stand-in:
/// `const usize *wormhole_cuda_forward_table(uint32_t api, uint64_t
/// fingerprint, size_t *len)`, with `api` one of these.
pub mod forward {
    pub const ENTRY: &std::ffi::CStr = c"wormhole_cuda_forward_table";
    pub const BLAS: u32 = 1;
    pub const RAND: u32 = 2;
    pub const DRIVER: u32 = 3;
    pub const LT: u32 = 4;
    pub const SOLVER: u32 = 5;
}

/// Whether `func` is one of cuBLASLt's (which count as cuBLAS's).
pub fn is_lt(func: u32) -> bool {
    func >= lt::func::cublasLtGetVersion
        && ((func - lt::func::cublasLtGetVersion) as usize) < lt::FUNC_NAMES.len()
}

/// Which forwarded library a function id belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    Runtime,
    Blas,
    Rand,
    Solver,
}

impl Library {
    /// The library of a function id, if it is one of CUDA's.
    pub fn of(func: u32) -> Option<Library> {
        let within = |first: u32, n: usize| func >= first && ((func - first) as usize) < n;
        if within(func::cudaGetDeviceCount, FUNC_NAMES.len()) {
            Some(Library::Runtime)
        } else if within(blas::func::cublasCreate_v2, blas::FUNC_NAMES.len())
            || within(lt::func::cublasLtGetVersion, lt::FUNC_NAMES.len())
        {
            // cuBLASLt shares cuBLAS's statuses, handles (a cuBLAS handle is
            // a cuBLASLt one) and deferred failures.
            Some(Library::Blas)
        } else if within(rand::func::curandCreateGenerator, rand::FUNC_NAMES.len()) {
            Some(Library::Rand)
        } else if within(solver::func::cusolverDnCreate, solver::FUNC_NAMES.len()) {
            Some(Library::Solver)
        } else {
            None
        }
    }

    /// The name of function `func`, of whichever library ("?" if none).
    pub fn func_name(func: u32) -> &'static str {
        let (first, names) = match Library::of(func) {
            Some(Library::Runtime) => (func::cudaGetDeviceCount, FUNC_NAMES),
            Some(Library::Blas) if is_lt(func) => (lt::func::cublasLtGetVersion, lt::FUNC_NAMES),
            Some(Library::Blas) => (blas::func::cublasCreate_v2, blas::FUNC_NAMES),
            Some(Library::Rand) => (rand::func::curandCreateGenerator, rand::FUNC_NAMES),
            Some(Library::Solver) => (solver::func::cusolverDnCreate, solver::FUNC_NAMES),
            None => return "?",
        };
        names.get((func - first) as usize).copied().unwrap_or("?")
    }

    /// Whether the description lets a call of this library's function
    /// `func` be deferred (its `async` attribute).
    pub fn is_async(self, func: u32) -> bool {
        match self {
            Library::Runtime => is_async(func),
            Library::Blas => blas::is_async(func) || lt::is_async(func),
            Library::Rand => rand::is_async(func),
            Library::Solver => solver::is_async(func),
        }
    }

    /// Whether the description names every device memory `func` may
    /// change (its `writes=` attributes), which its server decoder reports.
    pub fn names_writes(self, func: u32) -> bool {
        match self {
            Library::Runtime => names_writes(func),
            Library::Blas => blas::names_writes(func) || lt::names_writes(func),
            Library::Rand => rand::names_writes(func),
            Library::Solver => solver::names_writes(func),
        }
    }

    /// Whether `func` returns no status (kernel registration), so that a
    /// failure of it sent without waiting has nothing for a later call to
    /// report: it shows where the API shows it (at the launch).
    pub fn no_status(self, func: u32) -> bool {
        match self {
            Library::Runtime => no_status(func),
            Library::Blas => blas::no_status(func) || lt::no_status(func),
            Library::Rand => rand::no_status(func),
            Library::Solver => solver::no_status(func),
        }
    }

    /// What a call answers where the library cannot be reached (no server,
    /// no library on the server): NVIDIA's answer on a machine without the
    /// driver, for the calls that create handles (cudaErrorInsufficientDriver,
    /// CUBLAS_STATUS_NOT_INITIALIZED, CURAND_STATUS_INITIALIZATION_FAILED,
    /// CUSOLVER_STATUS_NOT_INITIALIZED).
    pub fn no_driver(self) -> i32 {
        match self {
            Library::Runtime => cudaErrorInsufficientDriver,
            Library::Blas => blas::CUBLAS_STATUS_NOT_INITIALIZED,
            Library::Rand => rand::CURAND_STATUS_INITIALIZATION_FAILED,
            Library::Solver => solver::CUSOLVER_STATUS_NOT_INITIALIZED,
        }
    }

    /// The status for an argument the library must not see (a device
    /// range the tenant does not own, a malformed request).
    pub fn invalid_value(self) -> i32 {
        match self {
            Library::Runtime => cudaErrorInvalidValue,
            Library::Blas => blas::CUBLAS_STATUS_INVALID_VALUE,
            Library::Rand => rand::CURAND_STATUS_OUT_OF_RANGE,
            Library::Solver => solver::CUSOLVER_STATUS_INVALID_VALUE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_parses_with_disjoint_ids() {
        assert_eq!(func::cudaGetDeviceCount, 0x10000);
        assert!(FUNC_NAMES.contains(&"cudaLaunchKernel"));
        assert!(is_async(func::cudaMemset));
        assert!(!is_async(func::cudaMalloc));
    }

    #[test]
    fn memcpy_default_follows_the_pointers() {
        use memcpy_kind::*;
        assert_eq!(
            direction(cudaMemcpyDefault, true, false),
            Ok(Direction::HostToDevice)
        );
        assert_eq!(
            direction(cudaMemcpyDefault, false, true),
            Ok(Direction::DeviceToHost)
        );
        assert_eq!(
            direction(cudaMemcpyDefault, true, true),
            Ok(Direction::DeviceToDevice)
        );
        assert_eq!(
            direction(cudaMemcpyHostToDevice, false, false),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            direction(9, true, true),
            Err(cudaErrorInvalidMemcpyDirection)
        );
    }

    /// The server checks a cuBLAS or cuRAND device pointer only through
    /// the description's `check=`s (its extent depends on the call): each
    /// one must be named by one, or a tenant could pass any address.
    #[test]
    fn every_devptr_is_checked() {
        for (name, src) in [
            ("cublas.api", BLAS_DESCRIPTION),
            ("curand.api", RAND_DESCRIPTION),
            ("cusolver.api", SOLVER_DESCRIPTION),
        ] {
            let api = match wormhole_apigen::parse(src) {
                Ok(api) => api,
                Err(e) => panic!("{name}: {e}"),
            };
            let mut seen = 0;
            for f in &api.funcs {
                for a in &f.args {
                    if matches!(a.ty, wormhole_apigen::Ty::DevPtr { .. }) {
                        seen += 1;
                        let token = format!("v_{}", a.name);
                        let named = f.attrs.checks.iter().any(|c| {
                            c.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                                .any(|w| w == token)
                        });
                        assert!(named, "{name}: {}'s {} is not checked", f.name, a.name);
                    }
                }
            }
            assert!(seen > 0, "{name} has device pointers");
        }
    }

    #[test]
    fn ids_tell_the_libraries_apart() {
        assert_eq!(Library::of(func::cudaMalloc), Some(Library::Runtime));
        assert_eq!(Library::of(blas::func::cublasSgemm_v2), Some(Library::Blas));
        assert_eq!(Library::of(rand::func::curandGenerate), Some(Library::Rand));
        assert_eq!(Library::of(0x20000 + blas::FUNC_NAMES.len() as u32), None);
        // cuBLASLt's are cuBLAS's (statuses, deferred failures).
        assert_eq!(Library::of(lt::func::cublasLtMatmul), Some(Library::Blas));
        assert!(Library::Blas.is_async(lt::func::cublasLtMatmul));
        assert!(!Library::Blas.is_async(lt::func::cublasLtMatmulDescCreate));
        assert_eq!(
            Library::func_name(lt::func::cublasLtMatmul),
            "cublasLtMatmul"
        );
        assert_eq!(Library::of(5), None, "OpenCL's");
        assert_eq!(Kind::Curand.invalid(), rand::CURAND_STATUS_NOT_INITIALIZED);
        assert_eq!(
            Library::of(solver::func::cusolverDnXgetrf),
            Some(Library::Solver)
        );
        assert!(Library::Solver.is_async(solver::func::cusolverDnDpotrf));
        assert!(!Library::Solver.is_async(solver::func::cusolverDnDpotrf_bufferSize));
        assert_eq!(
            Library::func_name(solver::func::cusolverDnXpotrs),
            "cusolverDnXpotrs"
        );
    }
}
