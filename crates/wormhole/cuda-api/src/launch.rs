//! Kernel arguments by value: what `cudaLaunchKernel`'s `void **args`
//! points to, packed into one buffer laid out as the kernel's parameter
//! block, and unpacked on the server into the `void **` the real launch
//! takes.

use crate::fatbin::Kernel;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("the argument buffer has {got} bytes, the kernel takes {want}")]
    Size { got: usize, want: usize },
    #[error("parameter {0} lies outside the parameter block")]
    Layout(u16),
}

/// Packs arguments: `arg(i, size)` returns parameter `i`'s `size` bytes
/// (on the client, read through `args[i]`).
pub fn pack<'a>(k: &Kernel, mut arg: impl FnMut(usize, usize) -> &'a [u8]) -> Vec<u8> {
    let mut buf = vec![0u8; k.param_bytes()];
    for (i, p) in k.params.iter().enumerate() {
        let (off, size) = (usize::from(p.offset), usize::from(p.size));
        let src = arg(i, size);
        let n = src.len().min(size);
        buf[off..off + n].copy_from_slice(&src[..n]);
    }
    buf
}

/// Checks a packed buffer against the kernel's layout and returns, for
/// each parameter, its offset in the buffer (the server turns these into
/// the pointers `cudaLaunchKernel` takes).
pub fn unpack(k: &Kernel, buf: &[u8]) -> Result<Vec<usize>, ArgError> {
    let want = k.param_bytes();
    if buf.len() != want {
        return Err(ArgError::Size {
            got: buf.len(),
            want,
        });
    }
    k.params
        .iter()
        .map(|p| {
            let end = usize::from(p.offset) + usize::from(p.size);
            if end > buf.len() {
                Err(ArgError::Layout(p.ordinal))
            } else {
                Ok(usize::from(p.offset))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fatbin::{kernels, synth};

    #[test]
    fn packs_by_value_at_the_kernels_offsets_and_unpacks() {
        let ks = kernels(&synth::fixture()).expect("fixture");
        let scale = &ks[1]; // scale(float *p, float f, int n)
        let p: u64 = 0x7f00_0000_1000;
        let f: f32 = 2.5;
        let n: i32 = 1000;
        let vals: Vec<Vec<u8>> = vec![
            p.to_le_bytes().to_vec(),
            f.to_le_bytes().to_vec(),
            n.to_le_bytes().to_vec(),
        ];
        let buf = pack(scale, |i, size| {
            assert_eq!(size, vals[i].len());
            &vals[i]
        });
        assert_eq!(buf.len(), 16);
        assert_eq!(&buf[0..8], &p.to_le_bytes());
        assert_eq!(&buf[8..12], &f.to_le_bytes());
        assert_eq!(&buf[12..16], &n.to_le_bytes());
        assert_eq!(unpack(scale, &buf).expect("unpack"), vec![0, 8, 12]);
        assert_eq!(
            unpack(scale, &buf[..12]),
            Err(ArgError::Size { got: 12, want: 16 })
        );
    }
}
