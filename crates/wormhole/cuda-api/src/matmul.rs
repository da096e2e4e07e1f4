//! cuBLASLt's matmul as Wormhole forwards it. The client keeps the
//! descriptors (a matmul descriptor, one matrix layout per operand, a
//! search preference) as these plain values, and sends a matmul whole:
//! PyTorch creates and destroys all of them around every `nn.Linear`, and
//! none of that needs the device. The server rebuilds NVIDIA's descriptors
//! from a [`Matmul`], choosing the algorithm itself (see `cublaslt.api`).
//!
//! Only what the model supports travels, and the rest is refused where it
//! is set: column-major layouts, host scalars, the epilogues without
//! auxiliary outputs. Every operand's extent follows from its layout
//! ([`Matmul::extents`]), so the server checks each device range before
//! NVIDIA's library sees it.

use wormhole_wire::{Decoder, Encoder, WireError};

use crate::blas::{CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_NOT_SUPPORTED};
use crate::extent::{self, Invalid};

/// `cublasLtMatmulDescAttributes_t` values (cublasLt.h).
pub mod desc_attr {
    pub const COMPUTE_TYPE: i32 = 0;
    pub const SCALE_TYPE: i32 = 1;
    pub const POINTER_MODE: i32 = 2;
    pub const TRANSA: i32 = 3;
    pub const TRANSB: i32 = 4;
    pub const TRANSC: i32 = 5;
    pub const EPILOGUE: i32 = 7;
    pub const BIAS_POINTER: i32 = 8;
    pub const BIAS_BATCH_STRIDE: i32 = 10;
    pub const SM_COUNT_TARGET: i32 = 15;
    pub const BIAS_DATA_TYPE: i32 = 26;
}

/// `cublasLtMatrixLayoutAttribute_t` values.
pub mod layout_attr {
    pub const TYPE: i32 = 0;
    pub const ORDER: i32 = 1;
    pub const ROWS: i32 = 2;
    pub const COLS: i32 = 3;
    pub const LD: i32 = 4;
    pub const BATCH_COUNT: i32 = 5;
    pub const STRIDED_BATCH_OFFSET: i32 = 6;
}

/// `cublasLtMatmulPreferenceAttributes_t` values.
pub mod pref_attr {
    pub const SEARCH_MODE: i32 = 0;
    pub const MAX_WORKSPACE_BYTES: i32 = 1;
    pub const MIN_ALIGNMENT_A_BYTES: i32 = 5;
    pub const MIN_ALIGNMENT_D_BYTES: i32 = 8;
}

/// `cublasLtEpilogue_t`: the bias bit, and the epilogues forwarded (DEFAULT,
/// RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS): those that write nothing but D.
pub const EPILOGUE_BIAS: u32 = 4;
pub const EPILOGUES: [u32; 6] = [1, 2, 4, 6, 32, 36];

/// Bytes per element of a `cudaDataType_t` the model sizes; None for the
/// others (refused: the server could not bound what they touch).
pub fn elem_size(ty: i32) -> Option<u64> {
    match ty {
        // R_8I, R_8U, R_8F_E4M3, R_8F_E5M2
        3 | 8 | 28 | 29 => Some(1),
        // R_16F, R_16BF
        2 | 14 => Some(2),
        // R_32F, R_32I
        0 | 10 => Some(4),
        // R_64F, C_32F
        1 | 4 => Some(8),
        // C_64F
        5 => Some(16),
        _ => None,
    }
}

fn value<const N: usize>(v: &[u8]) -> Result<[u8; N], i32> {
    // As cuBLASLt: a size other than the attribute's is a bad value.
    v.try_into().map_err(|_| CUBLAS_STATUS_INVALID_VALUE)
}

fn i32_of(v: &[u8]) -> Result<i32, i32> {
    value::<4>(v).map(i32::from_ne_bytes)
}

fn u32_of(v: &[u8]) -> Result<u32, i32> {
    value::<4>(v).map(u32::from_ne_bytes)
}

fn u64_of(v: &[u8]) -> Result<u64, i32> {
    value::<8>(v).map(u64::from_ne_bytes)
}

fn i64_of(v: &[u8]) -> Result<i64, i32> {
    value::<8>(v).map(i64::from_ne_bytes)
}

fn invalid(_: Invalid) -> i32 {
    CUBLAS_STATUS_INVALID_VALUE
}

/// A matrix layout: `rows` x `cols` column-major elements of `ty`, columns
/// `ld` elements apart, `batch` of them `stride` elements apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    pub ty: i32,
    pub rows: u64,
    pub cols: u64,
    pub ld: i64,
    pub batch: i32,
    pub stride: i64,
}

impl Layout {
    /// `cublasLtMatrixLayoutCreate`'s arguments.
    pub fn new(ty: i32, rows: u64, cols: u64, ld: i64) -> Result<Layout, i32> {
        elem_size(ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
        Ok(Layout {
            ty,
            rows,
            cols,
            ld,
            batch: 1,
            stride: 0,
        })
    }

    /// `cublasLtMatrixLayoutSetAttribute`.
    pub fn set(&mut self, attr: i32, v: &[u8]) -> Result<(), i32> {
        use layout_attr::*;
        match attr {
            TYPE => {
                let ty = i32_of(v)?;
                elem_size(ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
                self.ty = ty;
            }
            // Column-major only: the other orders are tiled formats whose
            // footprint this model does not compute.
            ORDER if i32_of(v)? == 0 => {}
            ORDER => return Err(CUBLAS_STATUS_NOT_SUPPORTED),
            ROWS => self.rows = u64_of(v)?,
            COLS => self.cols = u64_of(v)?,
            LD => self.ld = i64_of(v)?,
            BATCH_COUNT => self.batch = i32_of(v)?,
            STRIDED_BATCH_OFFSET => self.stride = i64_of(v)?,
            _ => return Err(CUBLAS_STATUS_NOT_SUPPORTED),
        }
        Ok(())
    }

    fn dims(&self) -> Result<(i64, i64), i32> {
        let rows = i64::try_from(self.rows).map_err(|_| CUBLAS_STATUS_INVALID_VALUE)?;
        let cols = i64::try_from(self.cols).map_err(|_| CUBLAS_STATUS_INVALID_VALUE)?;
        Ok((rows, cols))
    }

    /// Bytes the operand spans, every batch included.
    pub fn bytes(&self) -> Result<u64, i32> {
        let elem = elem_size(self.ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
        let (rows, cols) = self.dims()?;
        let one = extent::matrix(rows, cols, self.ld, elem).map_err(invalid)?;
        extent::strided(one, self.stride, self.batch.into(), elem).map_err(invalid)
    }

    pub fn encode(&self, e: &mut Encoder) {
        e.i32(self.ty);
        e.u64(self.rows);
        e.u64(self.cols);
        e.i64(self.ld);
        e.i32(self.batch);
        e.i64(self.stride);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<Layout, WireError> {
        Ok(Layout {
            ty: d.i32()?,
            rows: d.u64()?,
            cols: d.u64()?,
            ld: d.i64()?,
            batch: d.i32()?,
            stride: d.i64()?,
        })
    }
}

/// A matmul descriptor. `bias` is a device address; `bias_type` -1 means
/// D's type, as cuBLASLt's default; `sm_count` 0 means unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Desc {
    pub compute: i32,
    pub scale: i32,
    pub transa: i32,
    pub transb: i32,
    pub epilogue: u32,
    pub bias: u64,
    pub bias_stride: i64,
    pub bias_type: i32,
    pub sm_count: i32,
}

impl Desc {
    /// `cublasLtMatmulDescCreate`'s arguments.
    pub fn new(compute: i32, scale: i32) -> Result<Desc, i32> {
        elem_size(scale).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
        Ok(Desc {
            compute,
            scale,
            transa: 0,
            transb: 0,
            epilogue: 1,
            bias: 0,
            bias_stride: 0,
            bias_type: -1,
            sm_count: 0,
        })
    }

    /// `cublasLtMatmulDescSetAttribute`.
    pub fn set(&mut self, attr: i32, v: &[u8]) -> Result<(), i32> {
        use desc_attr::*;
        let trans = |v: &[u8]| match i32_of(v)? {
            t @ 0..=2 => Ok(t),
            _ => Err(CUBLAS_STATUS_INVALID_VALUE),
        };
        match attr {
            COMPUTE_TYPE => self.compute = i32_of(v)?,
            SCALE_TYPE => {
                let s = i32_of(v)?;
                elem_size(s).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
                self.scale = s;
            }
            // Scalars travel by value: host pointer mode only.
            POINTER_MODE if i32_of(v)? == 0 => {}
            TRANSA => self.transa = trans(v)?,
            TRANSB => self.transb = trans(v)?,
            TRANSC if i32_of(v)? == 0 => {}
            EPILOGUE => {
                let ep = u32_of(v)?;
                if !EPILOGUES.contains(&ep) {
                    return Err(CUBLAS_STATUS_NOT_SUPPORTED);
                }
                self.epilogue = ep;
            }
            BIAS_POINTER => self.bias = u64_of(v)?,
            BIAS_BATCH_STRIDE => self.bias_stride = i64_of(v)?,
            BIAS_DATA_TYPE => {
                let ty = i32_of(v)?;
                if ty != -1 {
                    elem_size(ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
                }
                self.bias_type = ty;
            }
            SM_COUNT_TARGET => self.sm_count = i32_of(v)?,
            _ => return Err(CUBLAS_STATUS_NOT_SUPPORTED),
        }
        Ok(())
    }

    /// Bytes of alpha and of beta (of the scale type).
    pub fn scalar_size(&self) -> usize {
        elem_size(self.scale).unwrap_or(0) as usize
    }

    pub fn encode(&self, e: &mut Encoder) {
        e.i32(self.compute);
        e.i32(self.scale);
        e.i32(self.transa);
        e.i32(self.transb);
        e.u32(self.epilogue);
        e.u64(self.bias);
        e.i64(self.bias_stride);
        e.i32(self.bias_type);
        e.i32(self.sm_count);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<Desc, WireError> {
        Ok(Desc {
            compute: d.i32()?,
            scale: d.i32()?,
            transa: d.i32()?,
            transb: d.i32()?,
            epilogue: d.u32()?,
            bias: d.u64()?,
            bias_stride: d.i64()?,
            bias_type: d.i32()?,
            sm_count: d.i32()?,
        })
    }
}

/// A search preference: only the workspace bound reaches the server (it
/// takes the operands' alignments from their addresses, which a truthful
/// preference only promises).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Preference {
    pub max_workspace: u64,
}

impl Preference {
    /// `cublasLtMatmulPreferenceSetAttribute`.
    pub fn set(&mut self, attr: i32, v: &[u8]) -> Result<(), i32> {
        use pref_attr::*;
        match attr {
            // CUBLASLT_SEARCH_BEST_FIT, the default, only.
            SEARCH_MODE if u32_of(v)? == 0 => Ok(()),
            MAX_WORKSPACE_BYTES => {
                self.max_workspace = u64_of(v)?;
                Ok(())
            }
            MIN_ALIGNMENT_A_BYTES..=MIN_ALIGNMENT_D_BYTES => u32_of(v).map(|_| ()),
            _ => Err(CUBLAS_STATUS_NOT_SUPPORTED),
        }
    }
}

/// The first word of a `cublasLtMatmulAlgo_t` the client's heuristic
/// answered ("Wormhol" + 1); its second is the preference's workspace
/// bound. The server picks the real algorithm at the matmul.
pub const ALGO_MAGIC: u64 = 0x576f_726d_686f_6c01;

/// A `cublasLtMatmulAlgo_t`'s 8 words for a heuristic answer.
pub fn algo_words(pref: &Preference) -> [u64; 8] {
    [ALGO_MAGIC, pref.max_workspace, 0, 0, 0, 0, 0, 0]
}

/// The workspace bound an algorithm from [`algo_words`] carries; None for
/// one that is not Wormhole's.
pub fn algo_workspace(words: &[u64; 8]) -> Option<u64> {
    (words[0] == ALGO_MAGIC).then_some(words[1])
}

/// One operand: its device address and layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    pub ptr: u64,
    pub layout: Layout,
}

/// Everything a `cublasLtMatmul` sends but the handle and the stream (which
/// travel as handle ids): `D = epilogue(alpha op(A) op(B) + beta C)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Matmul {
    pub desc: Desc,
    pub alpha: Vec<u8>,
    pub beta: Vec<u8>,
    pub a: Operand,
    pub b: Operand,
    pub c: Operand,
    pub d: Operand,
    /// The algorithm's workspace bound (u64::MAX: none given).
    pub max_workspace: u64,
    pub workspace: u64,
    pub workspace_size: u64,
}

impl Matmul {
    pub fn encode(&self, e: &mut Encoder) {
        self.desc.encode(e);
        e.bytes(&self.alpha);
        e.bytes(&self.beta);
        for o in [&self.a, &self.b, &self.c, &self.d] {
            e.u64(o.ptr);
            o.layout.encode(e);
        }
        e.u64(self.max_workspace);
        e.u64(self.workspace);
        e.u64(self.workspace_size);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<Matmul, WireError> {
        let desc = Desc::decode(d)?;
        let alpha = d.bytes()?.to_vec();
        let beta = d.bytes()?.to_vec();
        let mut op = || -> Result<Operand, WireError> {
            Ok(Operand {
                ptr: d.u64()?,
                layout: Layout::decode(d)?,
            })
        };
        let (a, b, c, dd) = (op()?, op()?, op()?, op()?);
        Ok(Matmul {
            desc,
            alpha,
            beta,
            a,
            b,
            c,
            d: dd,
            max_workspace: d.u64()?,
            workspace: d.u64()?,
            workspace_size: d.u64()?,
        })
    }

    /// Whether the operands' shapes agree (op(A) m x k, op(B) k x n, C and
    /// D m x n, one batch count), as cuBLASLt requires, and the descriptor
    /// and scalars are ones the model supports. The server checks it
    /// before anything else, so a disagreeing request never reaches the
    /// library with extents computed from the wrong layout.
    pub fn validate(&self) -> Result<(), i32> {
        validate(
            &self.desc,
            [
                &self.a.layout,
                &self.b.layout,
                &self.c.layout,
                &self.d.layout,
            ],
        )?;
        let n = self.desc.scalar_size();
        if self.alpha.len() != n || self.beta.len() != n {
            return Err(CUBLAS_STATUS_INVALID_VALUE);
        }
        Ok(())
    }

    /// `(address, bytes)` of A, B, C, D, the bias and the workspace: what
    /// the call may touch, for the server to check against the tenant's
    /// allocations.
    pub fn extents(&self) -> Result<[(u64, u64); 6], i32> {
        let d = &self.d.layout;
        let bias = if self.desc.epilogue & EPILOGUE_BIAS != 0 {
            let ty = if self.desc.bias_type == -1 {
                d.ty
            } else {
                self.desc.bias_type
            };
            let elem = elem_size(ty).ok_or(CUBLAS_STATUS_NOT_SUPPORTED)?;
            let rows = i64::try_from(d.rows).map_err(|_| CUBLAS_STATUS_INVALID_VALUE)?;
            let one = extent::vector(rows, 1, elem).map_err(invalid)?;
            let stride = if d.batch > 1 {
                self.desc.bias_stride
            } else {
                0
            };
            extent::strided(one, stride, d.batch.into(), elem).map_err(invalid)?
        } else {
            0
        };
        Ok([
            (self.a.ptr, self.a.layout.bytes()?),
            (self.b.ptr, self.b.layout.bytes()?),
            (self.c.ptr, self.c.layout.bytes()?),
            (self.d.ptr, d.bytes()?),
            (self.desc.bias, bias),
            (self.workspace, self.workspace_size),
        ])
    }
}

/// The shape agreement [`Matmul::validate`] checks, on the descriptors
/// alone (the client's heuristic checks it too).
pub fn validate(desc: &Desc, [a, b, c, d]: [&Layout; 4]) -> Result<(), i32> {
    let bad = CUBLAS_STATUS_INVALID_VALUE;
    let op = |t: i32, l: &Layout| {
        if t == 0 {
            (l.rows, l.cols)
        } else {
            (l.cols, l.rows)
        }
    };
    let (m, k) = op(desc.transa, a);
    let (k2, n) = op(desc.transb, b);
    if k != k2 || (c.rows, c.cols) != (m, n) || (d.rows, d.cols) != (m, n) {
        return Err(bad);
    }
    if [a, b, c].iter().any(|l| l.batch != d.batch) || d.batch < 1 {
        return Err(bad);
    }
    if !EPILOGUES.contains(&desc.epilogue) || elem_size(desc.scale).is_none() {
        return Err(CUBLAS_STATUS_NOT_SUPPORTED);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_layout(rows: u64, cols: u64) -> Layout {
        Layout::new(0, rows, cols, rows as i64).expect("R_32F")
    }

    fn linear(m: u64, n: u64, k: u64) -> Matmul {
        let mut desc = Desc::new(68, 0).expect("desc");
        desc.set(desc_attr::TRANSA, &1i32.to_ne_bytes())
            .expect("transa");
        desc.set(desc_attr::EPILOGUE, &EPILOGUE_BIAS.to_ne_bytes())
            .expect("bias");
        desc.set(desc_attr::BIAS_POINTER, &0x9000u64.to_ne_bytes())
            .expect("ptr");
        let op = |ptr, layout| Operand { ptr, layout };
        Matmul {
            desc,
            alpha: 1f32.to_ne_bytes().to_vec(),
            beta: 0f32.to_ne_bytes().to_vec(),
            a: op(0x1000, f32_layout(k, m)),
            b: op(0x2000, f32_layout(k, n)),
            c: op(0x3000, f32_layout(m, n)),
            d: op(0x3000, f32_layout(m, n)),
            max_workspace: 1 << 20,
            workspace: 0x8000,
            workspace_size: 1 << 20,
        }
    }

    #[test]
    fn a_linear_layers_extents_follow_its_layouts() {
        let mm = linear(3, 5, 4);
        assert_eq!(mm.validate(), Ok(()));
        let e = mm.extents().expect("extents");
        assert_eq!(e[0], (0x1000, 4 * 3 * 4));
        assert_eq!(e[1], (0x2000, 4 * 5 * 4));
        assert_eq!(e[3], (0x3000, 3 * 5 * 4));
        // The bias has D's rows, of D's type.
        assert_eq!(e[4], (0x9000, 3 * 4));
        assert_eq!(e[5], (0x8000, 1 << 20));
    }

    #[test]
    fn the_wire_carries_a_matmul_whole() {
        let mut mm = linear(2, 2, 2);
        for l in [
            &mut mm.a.layout,
            &mut mm.b.layout,
            &mut mm.c.layout,
            &mut mm.d.layout,
        ] {
            l.set(layout_attr::BATCH_COUNT, &3i32.to_ne_bytes())
                .expect("batch");
            l.set(layout_attr::STRIDED_BATCH_OFFSET, &4i64.to_ne_bytes())
                .expect("stride");
        }
        let mut e = Encoder::new();
        mm.encode(&mut e);
        let bytes = e.into_vec();
        let mut d = Decoder::new(&bytes);
        assert_eq!(Matmul::decode(&mut d).expect("decode"), mm);
        assert_eq!(d.remaining(), 0);
        // Three batches 4 elements apart, the last a whole 2x2.
        assert_eq!(mm.extents().expect("extents")[0].1, (2 * 4 + 4) * 4);
        for cut in 0..bytes.len() {
            assert!(Matmul::decode(&mut Decoder::new(&bytes[..cut])).is_err());
        }
    }

    #[test]
    fn disagreeing_shapes_and_unsized_types_are_refused() {
        let mut mm = linear(3, 5, 4);
        mm.d.layout.rows = 4;
        assert_eq!(mm.validate(), Err(CUBLAS_STATUS_INVALID_VALUE));
        let mut mm = linear(3, 5, 4);
        mm.b.layout.batch = 2;
        assert_eq!(mm.validate(), Err(CUBLAS_STATUS_INVALID_VALUE));
        let mut mm = linear(3, 5, 4);
        mm.alpha.push(0);
        assert_eq!(mm.validate(), Err(CUBLAS_STATUS_INVALID_VALUE));
        let mut mm = linear(3, 5, 4);
        mm.a.layout.stride = -1;
        mm.a.layout.batch = 2;
        assert!(mm.extents().is_err());
        let mut mm = linear(3, 5, 4);
        mm.a.layout.ld = 1;
        assert_eq!(mm.extents(), Err(CUBLAS_STATUS_INVALID_VALUE));
        assert_eq!(Layout::new(99, 1, 1, 1), Err(CUBLAS_STATUS_NOT_SUPPORTED));
        assert_eq!(Desc::new(68, 99), Err(CUBLAS_STATUS_NOT_SUPPORTED));
    }

    #[test]
    fn attributes_outside_the_model_are_refused_where_they_are_set() {
        let mut d = Desc::new(68, 0).expect("desc");
        let one = 1i32.to_ne_bytes();
        // Device pointer mode, an aux epilogue, a scale pointer.
        assert_eq!(
            d.set(desc_attr::POINTER_MODE, &one),
            Err(CUBLAS_STATUS_NOT_SUPPORTED)
        );
        assert_eq!(
            d.set(desc_attr::EPILOGUE, &(128u32 | 2).to_ne_bytes()),
            Err(CUBLAS_STATUS_NOT_SUPPORTED)
        );
        assert_eq!(
            d.set(17, &0u64.to_ne_bytes()),
            Err(CUBLAS_STATUS_NOT_SUPPORTED)
        );
        // A value of the wrong size, a transpose that is none.
        assert_eq!(
            d.set(desc_attr::TRANSA, &[1u8]),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        assert_eq!(
            d.set(desc_attr::TRANSA, &7i32.to_ne_bytes()),
            Err(CUBLAS_STATUS_INVALID_VALUE)
        );
        let mut l = f32_layout(2, 2);
        assert_eq!(
            l.set(layout_attr::ORDER, &one),
            Err(CUBLAS_STATUS_NOT_SUPPORTED)
        );
        assert_eq!(l.set(layout_attr::ORDER, &0i32.to_ne_bytes()), Ok(()));
        let mut p = Preference::default();
        assert_eq!(
            p.set(pref_attr::MAX_WORKSPACE_BYTES, &64u64.to_ne_bytes()),
            Ok(())
        );
        assert_eq!(
            p.set(pref_attr::MIN_ALIGNMENT_A_BYTES, &16u32.to_ne_bytes()),
            Ok(())
        );
        assert_eq!(
            p.set(pref_attr::SEARCH_MODE, &1u32.to_ne_bytes()),
            Err(CUBLAS_STATUS_NOT_SUPPORTED)
        );
        let w = algo_words(&p);
        assert_eq!(algo_workspace(&w), Some(64));
        assert_eq!(algo_workspace(&[0; 8]), None);
    }
}
