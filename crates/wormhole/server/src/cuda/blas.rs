//! The cuBLAS backend: decoders generated from `cublas.api`, the checks it
//! names (the extent of every device-pointer argument, before the library
//! sees it), and the scalars and results whose meaning follows the
//! handle's pointer mode.
//!
//! libcublas is opened at run time, of the loaded runtime's major first
//! (libcublas.so.13 with libcudart.so.13), from the loader's search path.
//! Where it is missing, every call answers as cuBLAS does without a driver
//! (CUBLAS_STATUS_NOT_INITIALIZED: no handle can be created).

use std::ffi::c_void;

use wormhole_cuda_api::blas::{
    func, CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_NOT_SUPPORTED,
    CUBLAS_STATUS_SUCCESS,
};
use wormhole_cuda_api::extent;
use wormhole_cuda_api::{blas, matmul, Kind};
use wormhole_wire::{Decoder, Encoder, WireError};

use super::libs::LibTenant as Tenant;
use super::loader::{Sonames, Symbols};

/// Not described (the client answers the pointer-mode calls itself): the
/// server sets each handle's mode from the request's scalars.
type SetPointerMode = unsafe extern "C" fn(*mut c_void, i32) -> i32;

library_backend! {
    generated: "blas_server_gen.rs", checks as blas;
    library: CUBLAS = Sonames::ByRuntimeMajor("libcublas.so.12", "libcublas.so.13");
    loads: Option<SetPointerMode> = set_pointer_mode;
    statuses: CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_INVALID_VALUE;
}

fn set_pointer_mode(symbols: &Symbols) -> Option<SetPointerMode> {
    // SAFETY: `SetPointerMode` is the C signature of libcublas's
    // cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t).
    unsafe { symbols.function("cublasSetPointerMode_v2") }
}

impl Tenant<'_> {
    /// Makes the real handle's pointer mode the one this request's scalars
    /// need; a request mixing modes is refused (the client never sends
    /// one: a handle has one mode).
    pub fn pointer_mode(&mut self, h: *mut c_void, device: bool) -> Result<(), i32> {
        match self.mode {
            Some(m) if m != device => return Err(CUBLAS_STATUS_INVALID_VALUE),
            _ => self.mode = Some(device),
        }
        let cur = self
            .cu
            .blas_modes
            .get(&(h as usize))
            .copied()
            .unwrap_or(false);
        if cur != device {
            let f = CUBLAS.get().extra.ok_or(NO_LIBRARY)?;
            // SAFETY: `h` is a live handle from the tenant's table; mode 0
            // is CUBLAS_POINTER_MODE_HOST, 1 DEVICE.
            let s = unsafe { f(h, device as i32) };
            if s != CUBLAS_STATUS_SUCCESS {
                return Err(s);
            }
            self.cu.blas_modes.insert(h as usize, device);
        }
        Ok(())
    }
}

/// A value that crosses the wire as itself (scalars, results).
pub trait Value: Copy + Default {
    const SIZE: u64;
    fn read(d: &mut Decoder<'_>) -> Result<Self, WireError>;
    fn write(self, e: &mut Encoder);
}

/// Each crosses as its bit pattern in the wire's unsigned integer of its
/// size (`$bits`), converted by `$from` and `$to`.
macro_rules! value_as_bits {
    ($($t:ty => $bits:ident: $from:expr, $to:expr;)*) => {$(
        impl Value for $t {
            const SIZE: u64 = std::mem::size_of::<$t>() as u64;
            fn read(d: &mut Decoder<'_>) -> Result<Self, WireError> {
                d.$bits().map($from)
            }
            fn write(self, e: &mut Encoder) {
                e.$bits(($to)(self))
            }
        }
    )*};
}

value_as_bits! {
    f32 => u32: f32::from_bits, f32::to_bits;
    f64 => u64: f64::from_bits, f64::to_bits;
    i32 => u32: |bits| bits as i32, |v| v as u32;
}

/// A scalar or result: a value here (host pointer mode) or a checked
/// device address (device pointer mode). Tag 0 then the value (scalars) or
/// nothing (results); tag 1 then the address.
pub struct ByMode<T> {
    value: T,
    device: Option<*mut c_void>,
}

impl<T: Value> ByMode<T> {
    fn decode(
        t: &mut Tenant,
        d: &mut Decoder<'_>,
        h: *mut c_void,
        input: bool,
    ) -> Result<Self, i32> {
        let device = match d.u8().map_err(bad)? {
            0 => false,
            1 => true,
            _ => return Err(CUBLAS_STATUS_INVALID_VALUE),
        };
        let v = if device {
            let p = d.u64().map_err(bad)? as usize as *mut c_void;
            t.owned(p, T::SIZE)?;
            ByMode {
                value: T::default(),
                device: Some(p),
            }
        } else {
            ByMode {
                value: if input {
                    T::read(d).map_err(bad)?
                } else {
                    T::default()
                },
                device: None,
            }
        };
        t.pointer_mode(h, device)?;
        Ok(v)
    }

    /// What the library gets.
    pub fn arg(&mut self) -> *mut T {
        match self.device {
            Some(p) => p as *mut T,
            None => &mut self.value,
        }
    }

    /// A result in host mode comes back in the reply.
    pub fn reply(&mut self, _t: &mut Tenant, e: &mut Encoder, status: i32) -> Result<(), i32> {
        if self.device.is_none() && status == CUBLAS_STATUS_SUCCESS {
            self.value.write(e);
        }
        Ok(())
    }
}

/// A scalar of the call's compute type (cublasGemmEx): its bytes here
/// (host pointer mode) or a device address. It is decoded before the
/// compute type, so `checks::scalars` sizes and checks it after.
pub struct Scalar {
    bytes: [u8; 16],
    len: usize,
    device: Option<*mut c_void>,
}

impl Scalar {
    fn decode(t: &mut Tenant, d: &mut Decoder<'_>, h: *mut c_void) -> Result<Self, i32> {
        let s = match d.u8().map_err(bad)? {
            0 => {
                let b = d.bytes().map_err(bad)?;
                let mut bytes = [0u8; 16];
                bytes
                    .get_mut(..b.len())
                    .ok_or(CUBLAS_STATUS_INVALID_VALUE)?
                    .copy_from_slice(b);
                Scalar {
                    bytes,
                    len: b.len(),
                    device: None,
                }
            }
            1 => Scalar {
                bytes: [0; 16],
                len: 0,
                device: Some(d.u64().map_err(bad)? as usize as *mut c_void),
            },
            _ => return Err(CUBLAS_STATUS_INVALID_VALUE),
        };
        t.pointer_mode(h, s.device.is_some())?;
        Ok(s)
    }

    /// What the library gets.
    pub fn arg(&mut self) -> *mut c_void {
        match self.device {
            Some(p) => p,
            None => self.bytes.as_mut_ptr().cast(),
        }
    }

    pub fn reply(&mut self, _t: &mut Tenant, _e: &mut Encoder, _status: i32) -> Result<(), i32> {
        Ok(())
    }
}

/// The customs `cublas.api` names.
pub mod custom {
    use super::*;

    macro_rules! by_mode {
        ($name:ident, $t:ty, $input:literal) => {
            pub mod $name {
                use super::*;
                pub fn decode(
                    t: &mut Tenant,
                    d: &mut Decoder<'_>,
                    h: &*mut c_void,
                ) -> Result<ByMode<$t>, i32> {
                    ByMode::decode(t, d, *h, $input)
                }
            }
        };
    }
    by_mode!(hf32, f32, true);
    by_mode!(hf64, f64, true);
    by_mode!(rf32, f32, false);
    by_mode!(rf64, f64, false);
    by_mode!(ri32, i32, false);

    pub mod hscal {
        use super::*;
        pub fn decode(t: &mut Tenant, d: &mut Decoder<'_>, h: &*mut c_void) -> Result<Scalar, i32> {
            Scalar::decode(t, d, *h)
        }
    }
    // Complex scalars: sized by the call's check (`scalars`), as GemmEx's.
    pub use hscal as hc64;
    pub use hscal as hc128;
}

/// Nothing is hand-written on the server.
pub mod overrides {}

/// The extents `cublas.api`'s `check=`s name: every device-pointer argument
/// must be the tenant's for all the bytes the call can touch.
#[allow(clippy::too_many_arguments)]
pub mod checks;

#[cfg(test)]
mod tests;
