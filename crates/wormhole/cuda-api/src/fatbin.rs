//! Fat binaries as nvcc embeds them, and the kernels' parameter layouts
//! read from their cubins.
//!
//! nvcc's host code passes `__cudaRegisterFatBinary` a wrapper
//! (`__fatBinC_Wrapper_t`: magic 0x466243b1, version, pointer to the fat
//! binary). The fat binary is a header (magic 0xba55ed50, version, header
//! size, size of what follows) and a sequence of entries, each a header
//! (kind: 1 PTX, 2 ELF cubin; target architecture; flags) and a payload.
//! The layout follows NVIDIA's `fatbinary_section.h` and the published
//! analyses of the format; nothing here trusts a length it has not
//! checked, as the server parses what clients send.
//!
//! A cubin's `.nv.info.KERNEL` section lists the kernel's parameters
//! (EIATTR_KPARAM_INFO: ordinal, offset and size of each), which is what a
//! launch needs to copy arguments by value.

/// `__fatBinC_Wrapper_t.magic`.
pub const WRAPPER_MAGIC: u32 = 0x466243b1;
/// The fat binary header's magic.
pub const FATBIN_MAGIC: u32 = 0xba55ed50;
/// Entry kinds.
pub const KIND_PTX: u16 = 1;
pub const KIND_ELF: u16 = 2;
/// Entry flag: the payload is an LZ4 block (nvcc's `--compress-mode=speed`).
pub const FLAG_LZ4: u64 = 0x2000;
/// Entry flag: the payload is a Zstandard frame (CUDA 12.8 and later: the
/// `default`, `size` and `balance` modes, and `-Xfatbin -compress-all`).
pub const FLAG_ZSTD: u64 = 0x8000;

/// Largest fat binary we accept (the server copies it).
pub const MAX_FATBIN: u64 = 1 << 30;
/// Largest payload we decompress: a few bytes from a client must not make
/// its tenant allocate without bound.
pub const MAX_UNCOMPRESSED: u64 = 256 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FatbinError {
    #[error("truncated at byte {0}")]
    Truncated(usize),
    #[error("bad magic {0:#x}")]
    Magic(u32),
    #[error("size {0} out of bounds")]
    Size(u64),
    #[error("not a 64-bit little-endian ELF")]
    NotElf,
    #[error("compressed payload: {0}")]
    Decompress(String),
}

type R<T> = Result<T, FatbinError>;

fn u16_at(b: &[u8], o: usize) -> R<u16> {
    b.get(o..o.saturating_add(2))
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or(FatbinError::Truncated(o))
}

fn u32_at(b: &[u8], o: usize) -> R<u32> {
    b.get(o..o.saturating_add(4))
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or(FatbinError::Truncated(o))
}

fn u64_at(b: &[u8], o: usize) -> R<u64> {
    b.get(o..o.saturating_add(8))
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or(FatbinError::Truncated(o))
}

fn to_usize(v: u64) -> R<usize> {
    usize::try_from(v).map_err(|_| FatbinError::Size(v))
}

/// The whole length of a fat binary from its 16-byte header, so the client
/// knows how much to copy from the pointer nvcc gave it.
pub fn fatbin_len(header: &[u8]) -> R<u64> {
    let magic = u32_at(header, 0)?;
    if magic != FATBIN_MAGIC {
        return Err(FatbinError::Magic(magic));
    }
    let hsize = u64::from(u16_at(header, 6)?);
    let size = u64_at(header, 8)?;
    let total = hsize.checked_add(size).ok_or(FatbinError::Size(size))?;
    if hsize < 16 || total > MAX_FATBIN {
        return Err(FatbinError::Size(total));
    }
    Ok(total)
}

/// How an entry's payload is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Lz4,
    Zstd,
}

/// One entry of a fat binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: u16,
    /// SM version, e.g. 90 for sm_90.
    pub arch: u32,
    pub flags: u64,
    /// The payload's byte range in the fat binary: for a compressed entry
    /// the compressed bytes alone, without the padding after them.
    pub payload: std::ops::Range<usize>,
    /// How long the payload is once decompressed (0 if it is not
    /// compressed); at most `MAX_UNCOMPRESSED`.
    pub uncompressed_len: usize,
}

impl Entry {
    pub fn compression(&self) -> Option<Compression> {
        if self.flags & FLAG_ZSTD != 0 {
            Some(Compression::Zstd)
        } else if self.flags & FLAG_LZ4 != 0 {
            Some(Compression::Lz4)
        } else {
            None
        }
    }

    pub fn is_compressed(&self) -> bool {
        self.compression().is_some()
    }

    /// The payload, decompressed if it is compressed. `fb` is the fat
    /// binary `entries` split.
    pub fn contents<'a>(&self, fb: &'a [u8]) -> R<std::borrow::Cow<'a, [u8]>> {
        let data = fb
            .get(self.payload.clone())
            .ok_or(FatbinError::Truncated(self.payload.end))?;
        let Some(how) = self.compression() else {
            return Ok(data.into());
        };
        let mut out = vec![0u8; self.uncompressed_len];
        let n = match how {
            Compression::Lz4 => lz4_flex::block::decompress_into(data, &mut out)
                .map_err(|e| FatbinError::Decompress(format!("LZ4: {e}")))?,
            Compression::Zstd => ruzstd::decoding::FrameDecoder::new()
                .decode_all(data, &mut out)
                .map_err(|e| FatbinError::Decompress(format!("Zstandard: {e}")))?,
        };
        if n != out.len() {
            return Err(FatbinError::Decompress(format!(
                "{n} bytes where the entry says {}",
                out.len()
            )));
        }
        Ok(out.into())
    }
}

/// Splits a fat binary into its entries.
pub fn entries(fb: &[u8]) -> R<Vec<Entry>> {
    let total = to_usize(fatbin_len(fb)?)?;
    if fb.len() < total {
        return Err(FatbinError::Truncated(fb.len()));
    }
    let mut pos = usize::from(u16_at(fb, 6)?);
    let mut out = Vec::new();
    // An entry header is at least 64 bytes; anything shorter left over is
    // padding.
    while pos + 64 <= total {
        let kind = u16_at(fb, pos)?;
        let hsize = to_usize(u64::from(u32_at(fb, pos + 4)?))?;
        let psize = to_usize(u64_at(fb, pos + 8)?)?;
        let arch = u32_at(fb, pos + 28)?;
        let flags = u64_at(fb, pos + 40)?;
        let start = pos
            .checked_add(hsize)
            .ok_or(FatbinError::Size(hsize as u64))?;
        let end = start
            .checked_add(psize)
            .ok_or(FatbinError::Size(psize as u64))?;
        if hsize < 64 || end > total {
            return Err(FatbinError::Size(end as u64));
        }
        let mut e = Entry {
            kind,
            arch,
            flags,
            payload: start..end,
            uncompressed_len: 0,
        };
        if e.is_compressed() {
            // The exact compressed length, then the decompressed one.
            let packed = to_usize(u64::from(u32_at(fb, pos + 16)?))?;
            let unpacked = u64_at(fb, pos + 56)?;
            if packed > psize || unpacked > MAX_UNCOMPRESSED {
                return Err(FatbinError::Size(unpacked.max(packed as u64)));
            }
            e.payload = start..start + packed;
            e.uncompressed_len = to_usize(unpacked)?;
        }
        out.push(e);
        pos = end;
    }
    Ok(out)
}

/// One kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub ordinal: u16,
    pub offset: u16,
    pub size: u16,
}

/// A kernel's parameters, in ordinal order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
}

impl Kernel {
    /// Bytes of the parameter buffer.
    pub fn param_bytes(&self) -> usize {
        self.params
            .iter()
            .map(|p| usize::from(p.offset) + usize::from(p.size))
            .max()
            .unwrap_or(0)
    }
}

const EIATTR_KPARAM_INFO: u8 = 0x17;

/// The kernels of a cubin (64-bit little-endian ELF) and their parameters.
pub fn cubin_kernels(elf: &[u8]) -> R<Vec<Kernel>> {
    if elf.get(0..4) != Some(b"\x7fELF".as_slice())
        || elf.get(4) != Some(&2)
        || elf.get(5) != Some(&1)
    {
        return Err(FatbinError::NotElf);
    }
    let shoff = to_usize(u64_at(elf, 0x28)?)?;
    let shentsize = usize::from(u16_at(elf, 0x3a)?);
    let shnum = usize::from(u16_at(elf, 0x3c)?);
    let shstrndx = usize::from(u16_at(elf, 0x3e)?);
    if shentsize < 64 {
        return Err(FatbinError::NotElf);
    }
    // A section's name offset and its bytes; only sections we read are
    // fetched (others, such as the NOBITS `.nv.shared.*` of kernels with
    // shared memory, have no bytes in the file).
    let header = |i: usize| -> R<usize> {
        i.checked_mul(shentsize)
            .and_then(|o| o.checked_add(shoff))
            .ok_or(FatbinError::Size(i as u64))
    };
    let data = |h: usize| -> R<&[u8]> {
        let off = to_usize(u64_at(elf, h.saturating_add(0x18))?)?;
        let size = to_usize(u64_at(elf, h.saturating_add(0x20))?)?;
        let end = off
            .checked_add(size)
            .ok_or(FatbinError::Size(size as u64))?;
        elf.get(off..end).ok_or(FatbinError::Truncated(end))
    };
    let strtab = data(header(shstrndx)?)?;
    let mut kernels = Vec::new();
    for i in 0..shnum {
        let h = header(i)?;
        let name_off = u32_at(elf, h)? as usize;
        let name = strtab
            .get(name_off..)
            .and_then(|s| s.split(|&c| c == 0).next())
            .unwrap_or_default();
        let Some(kname) = name.strip_prefix(b".nv.info.") else {
            continue;
        };
        let mut params = nv_info_params(data(h)?)?;
        params.sort_by_key(|p| p.ordinal);
        kernels.push(Kernel {
            name: String::from_utf8_lossy(kname).into_owned(),
            params,
        });
    }
    Ok(kernels)
}

/// The EIATTR_KPARAM_INFO records of one `.nv.info.KERNEL` section.
fn nv_info_params(mut d: &[u8]) -> R<Vec<Param>> {
    let mut out = Vec::new();
    while d.len() >= 2 {
        let (fmt, attr) = (d[0], d[1]);
        // Records are 4-byte aligned: a format without a value (NVAL) or
        // with a 1- or 2-byte one (BVAL, HVAL) still takes 4 bytes, as
        // nvcc's sm_80 cubins show (`01 35 00 00`).
        let (val, rest): (&[u8], &[u8]) = match fmt {
            1 => (&[], d.get(4..).ok_or(FatbinError::Truncated(4))?),
            2 => (
                d.get(2..3).ok_or(FatbinError::Truncated(2))?,
                d.get(4..).ok_or(FatbinError::Truncated(4))?,
            ),
            3 => (d.get(2..4).ok_or(FatbinError::Truncated(2))?, &d[4..]),
            4 => {
                let n = usize::from(u16_at(d, 2)?);
                let v = d.get(4..4 + n).ok_or(FatbinError::Truncated(4 + n))?;
                (v, &d[4 + n..])
            }
            _ => return Err(FatbinError::Size(u64::from(fmt))),
        };
        if attr == EIATTR_KPARAM_INFO && val.len() >= 12 {
            let flags = u32_at(val, 8)?;
            out.push(Param {
                ordinal: u16_at(val, 4)?,
                offset: u16_at(val, 6)?,
                size: ((flags >> 18) & 0x3fff) as u16,
            });
        }
        d = rest;
    }
    Ok(out)
}

/// The kernel layouts of one fat binary, read as they are asked for.
/// Uncompressed cubins are read at once; a compressed one only when a
/// kernel is named that the cubins read so far lack, and the PTX last of
/// all (a build for virtual architectures alone has no cubin). A fat
/// binary usually carries the same kernels for each architecture (all
/// agree on the ABI, so the first cubin that names a kernel wins), and one
/// decompression then answers for all of them, where reading everything
/// would inflate every architecture's code of every module at start-up.
#[derive(Debug, Clone, Default)]
pub struct Layouts {
    known: Vec<Kernel>,
    /// Entries not read yet: compressed cubins, then PTX, in the fat
    /// binary's order.
    pending: std::collections::VecDeque<Entry>,
}

impl Layouts {
    pub fn new(fb: &[u8]) -> R<Self> {
        let mut l = Layouts::default();
        let mut ptx = Vec::new();
        for e in entries(fb)? {
            match e.kind {
                KIND_ELF if e.is_compressed() => l.pending.push_back(e),
                KIND_ELF => l.add(e.kind, &fb[e.payload.clone()])?,
                KIND_PTX => ptx.push(e),
                _ => {}
            }
        }
        l.pending.extend(ptx);
        Ok(l)
    }

    fn add(&mut self, kind: u16, code: &[u8]) -> R<()> {
        let found = if kind == KIND_PTX {
            ptx_kernels(code)?
        } else {
            cubin_kernels(code)?
        };
        for k in found {
            if !self.known.iter().any(|o| o.name == k.name) {
                self.known.push(k);
            }
        }
        Ok(())
    }

    /// The layout of kernel `name`. `fb` must be the fat binary the layouts
    /// were made from. An entry that fails to decompress or parse is an
    /// error once; the search goes on past it on the next call.
    pub fn find(&mut self, fb: &[u8], name: &[u8]) -> R<Option<&Kernel>> {
        loop {
            if let Some(i) = self.known.iter().position(|k| k.name.as_bytes() == name) {
                return Ok(self.known.get(i));
            }
            let Some(e) = self.pending.pop_front() else {
                return Ok(None);
            };
            self.add(e.kind, &e.contents(fb)?)?;
        }
    }

    /// Every kernel, every entry read.
    pub fn all(mut self, fb: &[u8]) -> R<Vec<Kernel>> {
        while let Some(e) = self.pending.pop_front() {
            self.add(e.kind, &e.contents(fb)?)?;
        }
        Ok(self.known)
    }
}

/// The kernels a PTX module defines (`.entry NAME(.param ..., ...)`) and
/// their parameters where the ABI puts them: each at the next multiple of
/// its alignment (its `.align`, else its size), as a cubin's KPARAM_INFO
/// lists them.
pub fn ptx_kernels(ptx: &[u8]) -> R<Vec<Kernel>> {
    let text: String = String::from_utf8_lossy(ptx)
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(".entry") {
        let after = &rest[at + ".entry".len()..];
        rest = after;
        // A token of its own, not part of a longer word.
        if !after.starts_with(|c: char| c.is_whitespace()) {
            continue;
        }
        let after = after.trim_start();
        let name_end = after
            .find(|c: char| c == '(' || c == '{' || c == ';' || c.is_whitespace())
            .unwrap_or(after.len());
        let name = &after[..name_end];
        let after = after[name_end..].trim_start();
        let Some(list) = after.strip_prefix('(') else {
            continue;
        };
        let close = list.find(')').ok_or(FatbinError::Truncated(ptx.len()))?;
        let params = ptx_params(&list[..close])?;
        if !name.is_empty() && !out.iter().any(|k: &Kernel| k.name == name) {
            out.push(Kernel {
                name: name.to_string(),
                params,
            });
        }
        rest = &list[close..];
    }
    Ok(out)
}

/// One `.entry`'s parameter list.
fn ptx_params(list: &str) -> R<Vec<Param>> {
    let bad = || FatbinError::Size(list.len() as u64);
    let mut params = Vec::new();
    let mut end = 0u64;
    for (ordinal, decl) in list
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .enumerate()
    {
        let mut words = decl.split_whitespace();
        if words.next() != Some(".param") {
            return Err(bad());
        }
        let (mut align, mut elem, mut count) = (None, None, 1u64);
        while let Some(w) = words.next() {
            match w {
                ".align" => align = words.next().and_then(|n| n.parse::<u64>().ok()),
                ".ptr" | ".global" | ".const" | ".local" | ".shared" => {}
                _ if w.starts_with('.') => elem = ptx_type_size(w),
                _ => {
                    // The name, with `[N]` for an array (a struct by value).
                    if let Some((_, n)) = w.split_once('[') {
                        count = n.trim_end_matches(']').parse().map_err(|_| bad())?;
                    }
                }
            }
        }
        let elem = elem.ok_or_else(bad)?;
        let align = align.unwrap_or(elem).max(1);
        let offset = end.div_ceil(align).checked_mul(align).ok_or_else(bad)?;
        let size = elem.checked_mul(count).ok_or_else(bad)?;
        end = offset.checked_add(size).ok_or_else(bad)?;
        let field = |v: u64| u16::try_from(v).map_err(|_| bad());
        params.push(Param {
            ordinal: field(ordinal as u64)?,
            offset: field(offset)?,
            size: field(size)?,
        });
    }
    if end > u64::from(u16::MAX) {
        return Err(bad());
    }
    Ok(params)
}

/// Bytes of a PTX fundamental type (`.u32`, `.f64`, `.b8`, ...).
fn ptx_type_size(t: &str) -> Option<u64> {
    let bits: u64 = t.get(2..)?.parse().ok()?;
    match t.as_bytes().get(1)? {
        b'u' | b's' | b'b' | b'f' if matches!(bits, 8 | 16 | 32 | 64) => Some(bits / 8),
        _ => None,
    }
}

/// Every kernel's layout in a fat binary (the first cubin that names a
/// kernel wins), compressed cubins included.
pub fn kernels(fb: &[u8]) -> R<Vec<Kernel>> {
    Layouts::new(fb)?.all(fb)
}

/// Builders of synthetic fat binaries and cubins, for tests and fuzzing
/// seeds: the same layout nvcc produces, with only the parts we read.
pub mod synth {
    /// A `.nv.info.NAME` section body with KPARAM_INFO records for
    /// `(ordinal, offset, size)` triples, plus attributes that surround
    /// them in real cubins (an NVAL, and CBANK_PARAM_SIZE as an HVAL).
    pub fn nv_info(params: &[(u16, u16, u16)]) -> Vec<u8> {
        let mut v = vec![1u8, 0x35, 0, 0, 3, 0x19];
        let total: u16 = params.iter().map(|p| p.1 + p.2).max().unwrap_or(0);
        v.extend_from_slice(&total.to_le_bytes());
        for &(ord, off, size) in params {
            v.extend_from_slice(&[4, 0x17, 12, 0]);
            v.extend_from_slice(&0u32.to_le_bytes());
            v.extend_from_slice(&ord.to_le_bytes());
            v.extend_from_slice(&off.to_le_bytes());
            v.extend_from_slice(&((u32::from(size) << 18) | 0x1f000).to_le_bytes());
        }
        v
    }

    /// A 64-bit ELF with the given named sections (plus the null section
    /// and the section-name table).
    pub fn cubin(sections: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut name_offs = Vec::new();
        for (n, _) in sections {
            name_offs.push(names.len() as u32);
            names.extend_from_slice(n.as_bytes());
            names.push(0);
        }
        let shstr_name = names.len() as u32;
        names.extend_from_slice(b".shstrtab\0");
        let mut data = vec![0u8; 64];
        let mut placed = Vec::new();
        for (_, body) in sections {
            placed.push((data.len() as u64, body.len() as u64));
            data.extend_from_slice(body);
        }
        let names_off = data.len() as u64;
        data.extend_from_slice(&names);
        while !data.len().is_multiple_of(8) {
            data.push(0);
        }
        let shoff = data.len() as u64;
        let shnum = sections.len() + 2;
        let mut sh = vec![0u8; 64]; // the null section
        let mut push = |name: u32, off: u64, size: u64| {
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&1u32.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            sh.extend_from_slice(&h);
        };
        for (i, &(off, size)) in placed.iter().enumerate() {
            push(name_offs[i], off, size);
        }
        push(shstr_name, names_off, names.len() as u64);
        data.extend_from_slice(&sh);
        data[0..4].copy_from_slice(b"\x7fELF");
        data[4] = 2;
        data[5] = 1;
        data[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        data[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        data[0x3c..0x3e].copy_from_slice(&(shnum as u16).to_le_bytes());
        data[0x3e..0x40].copy_from_slice(&((shnum - 1) as u16).to_le_bytes());
        data
    }

    /// A fat binary of `(kind, arch, flags, payload)` entries. A payload
    /// whose flags name a compression is compressed here, as nvcc's
    /// `fatbinary` does: the exact and decompressed lengths go into the
    /// entry's header, and the payload is padded to 8 bytes.
    pub fn fatbin(entries: &[(u16, u32, u64, Vec<u8>)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, arch, flags, plain) in entries {
            let mut h = [0u8; 64];
            let mut payload = if flags & super::FLAG_ZSTD != 0 {
                ruzstd::encoding::compress_to_vec(
                    plain.as_slice(),
                    ruzstd::encoding::CompressionLevel::Fastest,
                )
            } else if flags & super::FLAG_LZ4 != 0 {
                lz4_flex::block::compress(plain)
            } else {
                plain.clone()
            };
            if flags & (super::FLAG_LZ4 | super::FLAG_ZSTD) != 0 {
                h[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
                h[56..64].copy_from_slice(&(plain.len() as u64).to_le_bytes());
                payload.resize(payload.len().next_multiple_of(8), 0);
            }
            h[0..2].copy_from_slice(&kind.to_le_bytes());
            h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
            h[4..8].copy_from_slice(&64u32.to_le_bytes());
            h[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
            h[28..32].copy_from_slice(&arch.to_le_bytes());
            h[40..48].copy_from_slice(&(flags | 1).to_le_bytes());
            body.extend_from_slice(&h);
            body.extend_from_slice(&payload);
        }
        let mut v = Vec::new();
        v.extend_from_slice(&super::FATBIN_MAGIC.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&16u16.to_le_bytes());
        v.extend_from_slice(&(body.len() as u64).to_le_bytes());
        v.extend_from_slice(&body);
        v
    }

    /// The fixture the tests (and the fuzz seeds) use: our own test
    /// kernels' signatures, `vecAdd(const float*, const float*, float*,
    /// int)` and `scale(float*, float, int)`, as an sm_90 cubin, plus a
    /// PTX entry and the same cubin for sm_80, LZ4-compressed.
    pub fn fixture() -> Vec<u8> {
        let cubin_a = cubin(&[
            (".text.vecAdd", vec![0u8; 32]),
            (
                ".nv.info.vecAdd",
                nv_info(&[(0, 0, 8), (1, 8, 8), (2, 16, 8), (3, 24, 4)]),
            ),
            (
                ".nv.info.scale",
                nv_info(&[(2, 12, 4), (0, 0, 8), (1, 8, 4)]),
            ),
            (".nv.info", vec![4, 0x2f, 4, 0, 1, 2, 3, 4]),
        ]);
        fatbin(&[
            (
                super::KIND_PTX,
                90,
                0,
                b".version 8.0\n.target sm_90\n".to_vec(),
            ),
            (super::KIND_ELF, 90, 0, cubin_a.clone()),
            (super::KIND_ELF, 80, super::FLAG_LZ4, cubin_a),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_entries_and_kernel_layouts_of_the_fixture() {
        let fb = synth::fixture();
        assert_eq!(fatbin_len(&fb).expect("len") as usize, fb.len());
        let e = entries(&fb).expect("entries");
        assert_eq!(e.len(), 3);
        assert_eq!((e[0].kind, e[1].kind, e[1].arch), (KIND_PTX, KIND_ELF, 90));
        assert!(e[2].is_compressed() && !e[1].is_compressed());
        let k = kernels(&fb).expect("kernels");
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].name, "vecAdd");
        assert_eq!(
            k[0].params
                .iter()
                .map(|p| (p.offset, p.size))
                .collect::<Vec<_>>(),
            vec![(0, 8), (8, 8), (16, 8), (24, 4)]
        );
        assert_eq!(k[0].param_bytes(), 28);
        assert_eq!(k[1].name, "scale");
        assert_eq!(
            k[1].params.iter().map(|p| p.ordinal).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "sorted by ordinal"
        );
        assert_eq!(k[1].param_bytes(), 16);
    }

    /// `fixtures/testkernels.fatbin` is the fixture, checked in for the C
    /// samples (which cannot call Rust); regenerate it with
    /// `WORMHOLE_WRITE_FIXTURE=1 cargo test -p wormhole-cuda-api`.
    #[test]
    fn checked_in_fixture_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/testkernels.fatbin");
        if std::env::var_os("WORMHOLE_WRITE_FIXTURE").is_some() {
            std::fs::write(path, synth::fixture()).expect("write fixture");
        }
        let file = std::fs::read(path).expect("fixture is checked in");
        assert_eq!(file, synth::fixture());
    }

    /// Real nvcc output (CUDA 13.5 from PyPI's wheels, no GPU needed to
    /// build it) of our own kernels, `fixtures/testkernels.cu`:
    /// `nvcc -fatbin -arch=sm_90`, a multi-architecture build
    /// (`-gencode arch=compute_80,code=sm_80 -gencode
    /// arch=compute_90,code=[sm_90,compute_90]`, cubins plus PTX), and
    /// compressed cubins: `-arch=sm_90 --compress-mode=speed -Xfatbin
    /// -compress-all` (LZ4) and `-arch=sm_90 --compress-mode=size` (Zstandard).
    #[test]
    fn reads_real_nvcc_fat_binaries() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/");
        let layout = |k: &Kernel| {
            k.params
                .iter()
                .map(|p| (p.offset, p.size))
                .collect::<Vec<_>>()
        };
        for (file, archs, packed) in [
            ("nvcc13-sm90.fatbin", vec![90], None),
            ("nvcc13-multi.fatbin", vec![80, 90], None),
            ("nvcc13-lz4.fatbin", vec![90], Some(Compression::Lz4)),
            ("nvcc13-zstd.fatbin", vec![90], Some(Compression::Zstd)),
        ] {
            let fb = std::fs::read(format!("{dir}{file}")).expect("fixture");
            assert_eq!(fatbin_len(&fb).expect("len") as usize, fb.len(), "{file}");
            let e = entries(&fb).expect("entries");
            let cubins: Vec<u32> = e
                .iter()
                .filter(|e| e.kind == KIND_ELF)
                .map(|e| e.arch)
                .collect();
            assert_eq!(cubins, archs, "{file}");
            let elf = e.iter().find(|e| e.kind == KIND_ELF).expect("a cubin");
            assert_eq!(elf.compression(), packed, "{file}");
            let cubin = elf.contents(&fb).expect("contents");
            assert_eq!(cubin.get(..4), Some(b"\x7fELF".as_slice()), "{file}");
            let mut ks = kernels(&fb).expect("kernels");
            ks.sort_by(|a, b| a.name.cmp(&b.name));
            let names: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
            assert_eq!(names, ["mixed", "scale", "vecAdd"], "{file}");
            // mixed(char a, Pair {double; char} p, short s, double *out)
            assert_eq!(layout(&ks[0]), [(0, 1), (8, 16), (24, 2), (32, 8)]);
            assert_eq!(layout(&ks[1]), [(0, 8), (8, 4), (12, 4)]);
            assert_eq!(layout(&ks[2]), [(0, 8), (8, 8), (16, 8), (24, 4)]);
        }
        // examples/cuda/matmul.cu's kernel uses shared memory: its cubin has
        // a NOBITS section, which has no bytes in the file.
        let fb = std::fs::read(format!("{dir}nvcc13-matmul.fatbin")).expect("fixture");
        let ks = kernels(&fb).expect("kernels");
        assert_eq!(ks.len(), 1);
        assert_eq!(ks[0].name, "_Z6matmulPKfS0_Pfi");
        assert_eq!(layout(&ks[0]), [(0, 8), (8, 8), (16, 8), (24, 4)]);
    }

    #[test]
    fn refuses_damaged_input_without_panicking() {
        let fb = synth::fixture();
        assert_eq!(fatbin_len(&[0u8; 16]), Err(FatbinError::Magic(0)));
        assert!(fatbin_len(&fb[..10]).is_err());
        for cut in [17, 80, fb.len() / 2, fb.len() - 1] {
            assert!(entries(&fb[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = fb.clone();
        bad[16 + 8..16 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(entries(&bad).is_err());
        assert_eq!(cubin_kernels(b"not an elf"), Err(FatbinError::NotElf));
        // A section table at the very end of the address space (found by
        // fuzzing: offsets must not overflow).
        let mut elf = synth::cubin(&[(".nv.info.k", synth::nv_info(&[(0, 0, 8)]))]);
        elf[0x28..0x30].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        assert!(cubin_kernels(&elf).is_err());
        // Every single-byte corruption parses or fails cleanly.
        for i in 0..fb.len() {
            let mut c = fb.clone();
            c[i] ^= 0xff;
            let _ = kernels(&c);
        }
    }

    fn one_kernel_cubin(name: &str) -> Vec<u8> {
        synth::cubin(&[(&format!(".nv.info.{name}"), synth::nv_info(&[(0, 0, 8)]))])
    }

    /// A compressed cubin is inflated only for a kernel the others lack.
    #[test]
    fn compressed_cubins_are_read_only_when_a_kernel_is_missing() {
        for flag in [FLAG_LZ4, FLAG_ZSTD] {
            let fb = synth::fatbin(&[
                (KIND_ELF, 90, 0, one_kernel_cubin("plain")),
                (KIND_ELF, 90, flag, one_kernel_cubin("packed")),
            ]);
            // The same, its compressed payload damaged past repair.
            let mut bad = fb.clone();
            let e = entries(&bad).expect("entries");
            let p = e[1].payload.clone();
            bad[p].fill(0xff);

            let mut l = Layouts::new(&bad).expect("layouts");
            let found = l.find(&bad, b"plain").expect("no decompression");
            assert_eq!(found.map(|k| k.name.as_str()), Some("plain"));
            assert!(matches!(
                l.find(&bad, b"packed"),
                Err(FatbinError::Decompress(_))
            ));
            assert!(l.find(&bad, b"packed").expect("nothing left").is_none());

            let mut l = Layouts::new(&fb).expect("layouts");
            let found = l.find(&fb, b"packed").expect("decompressed");
            assert_eq!(found.map(|k| k.params.len()), Some(1), "{flag:#x}");
            assert_eq!(kernels(&fb).expect("all").len(), 2);
        }
    }

    /// The lengths in a compressed entry's header are checked before
    /// anything is allocated, and the output must match them exactly.
    #[test]
    fn compressed_lengths_are_bounded_and_exact() {
        let fb = synth::fatbin(&[(KIND_ELF, 90, FLAG_ZSTD, one_kernel_cubin("k"))]);
        let entry = 16;
        let with = |off: usize, v: &[u8]| {
            let mut c = fb.clone();
            c[entry + off..entry + off + v.len()].copy_from_slice(v);
            c
        };
        let huge = with(56, &(MAX_UNCOMPRESSED + 1).to_le_bytes());
        assert!(matches!(entries(&huge), Err(FatbinError::Size(_))));
        let past = with(16, &u32::MAX.to_le_bytes());
        assert!(matches!(entries(&past), Err(FatbinError::Size(_))));
        let len = u64_at(&fb, entry + 56).expect("len");
        for wrong in [len - 1, len + 1] {
            let c = with(56, &wrong.to_le_bytes());
            assert!(
                matches!(kernels(&c), Err(FatbinError::Decompress(_))),
                "{wrong}"
            );
        }
    }

    /// PTX-derived layouts are the ones nvcc's own cubin lists, for
    /// `fixtures/ptxkernels.cu` (`-gencode arch=compute_90,code=[sm_90,
    /// compute_90]`: a cubin and its PTX, compressed): a struct by value
    /// with padding after it, a template, no parameters at all.
    #[test]
    fn ptx_layouts_match_the_cubins() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/");
        let fb = std::fs::read(format!("{dir}nvcc13-ptxk.fatbin")).expect("fixture");
        let e = entries(&fb).expect("entries");
        let of = |kind: u16| {
            let e = e.iter().find(|e| e.kind == kind).expect("entry");
            let code = e.contents(&fb).expect("contents");
            let mut ks = if kind == KIND_PTX {
                ptx_kernels(&code)
            } else {
                cubin_kernels(&code)
            }
            .expect("kernels");
            ks.sort_by(|a, b| a.name.cmp(&b.name));
            ks
        };
        let (cubin, ptx) = (of(KIND_ELF), of(KIND_PTX));
        let names: Vec<&str> = ptx.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["_Z4tmplIfEvPT_S0_", "big", "noargs"]);
        assert_eq!(ptx, cubin);
        let big = &ptx[1];
        let layout: Vec<(u16, u16)> = big.params.iter().map(|p| (p.offset, p.size)).collect();
        assert_eq!(layout, [(0, 32), (32, 8), (40, 8), (48, 2)]);
        assert!(ptx[2].params.is_empty());
    }

    /// A fat binary with PTX alone (`-arch=compute_90`, the PTX compressed
    /// as nvcc does by default) gets its layouts from the PTX.
    #[test]
    fn ptx_only_fat_binaries_have_layouts() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/");
        let fb = std::fs::read(format!("{dir}nvcc13-ptx.fatbin")).expect("fixture");
        assert!(entries(&fb)
            .expect("entries")
            .iter()
            .all(|e| e.kind == KIND_PTX));
        let cubins = kernels(&std::fs::read(format!("{dir}nvcc13-sm90.fatbin")).expect("fixture"))
            .expect("kernels");
        let mut l = Layouts::new(&fb).expect("layouts");
        for k in &cubins {
            let found = l.find(&fb, k.name.as_bytes()).expect("parsed");
            assert_eq!(found, Some(k), "{}", k.name);
        }
    }

    #[test]
    fn ptx_parameter_lists_are_checked() {
        let one = |list: &str| {
            ptx_kernels(format!(".visible .entry k(\n{list}\n)\n{{ ret; }}").as_bytes())
        };
        // Pointer parameters with state-space qualifiers, as older PTX has.
        let k = one(".param .u64 .ptr .global .align 4 k_param_0, .param .u8 k_param_1")
            .expect("parsed");
        assert_eq!(k[0].params[1].offset, 8);
        // A comment mentioning .entry is not one.
        let k = ptx_kernels(b"// .entry fake(\n.visible .entry real()\n{}").expect("parsed");
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].name, "real");
        for bad in [
            ".reg .u32 k_param_0",
            ".param k_param_0",
            ".param .u128 k_param_0",
            ".param .b8 k_param_0[99999]",
            ".param .align 8 .b8 k_param_0[x]",
        ] {
            assert!(one(bad).is_err(), "{bad}");
        }
        assert!(ptx_kernels(b".entry k(.param .u32 a").is_err(), "unclosed");
    }
}
