//! The structured fuzz mode's material: valid request frames on the
//! seeded objects (one per interesting path), the values worth patching
//! into them, and the patching itself.

use wormhole_opencl_api::func;

use super::{ids, triple, Frame};

/// Valid requests on the seeded objects, one per interesting path: the
/// structured fuzz mode mutates these. Ids 100 and up are fresh.
///
/// A table, one entry per request, so it stays one function: a fuzz input
/// picks entries by index and the tests name entries by position, so the
/// order is part of what the table means.
#[allow(clippy::too_many_lines)]
pub fn templates() -> Vec<Vec<u8>> {
    use func::*;
    use ids::*;
    let zero = triple(0, 0, 0);
    let r441 = triple(4, 4, 1);
    let mut v = vec![
        Frame::new(clGetPlatformInfo)
            .h(PLATFORM)
            .info(0x0902, 64)
            .done(),
        Frame::new(clGetDeviceInfo)
            .h(DEVICE)
            .info(0x1030, 4096)
            .done(),
        Frame::new(clGetDeviceIDs)
            .h(PLATFORM)
            .u64(u64::from(u32::MAX))
            .u32(4)
            .b(true)
            .b(true)
            .done(),
        Frame::new(clCreateContext)
            .ids(&[0x1084, PLATFORM])
            .u32(1)
            .ids(&[DEVICE])
            // No callback, no user data.
            .b(false)
            .b(false)
            .u64(100)
            .done(),
        Frame::new(clCreateCommandQueue)
            .h(CONTEXT)
            .h(DEVICE)
            .u64(0)
            .u64(101)
            .done(),
        Frame::new(clCreateBuffer)
            .h(CONTEXT)
            .u64(1)
            .u64(1024)
            .u8(0)
            .u64(102)
            .done(),
        Frame::new(clCreateBuffer)
            .h(CONTEXT)
            .u64(0x21)
            .u64(16)
            .u8(1)
            .bytes(&[7; 16])
            .u64(103)
            .done(),
        Frame::new(clEnqueueReadBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u32(1)
            .u64(0)
            .u64(64)
            .b(true)
            .u32(0)
            .b(false)
            .b(true)
            .u64(104)
            .done(),
        Frame::new(clEnqueueWriteBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u32(1)
            .u64(8)
            .u64(16)
            .opt(Some(&[1; 16]))
            .no_events()
            .done(),
        Frame::new(clEnqueueCopyBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .h(BUFFER2)
            .u64(0)
            .u64(64)
            .u64(128)
            .no_events()
            .done(),
        Frame::new(clEnqueueFillBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .opt(Some(&[1, 2, 3, 4]))
            .u64(4)
            .u64(0)
            .u64(64)
            .no_events()
            .done(),
        read_buffer_rect([8, 2, 1], 16, 8),
        set_arg_handle(KERNEL, 0, 0, BUFFER),
        set_arg_bytes(KERNEL, 1, &[9, 0, 0, 0]),
        Frame::new(clEnqueueNDRangeKernel)
            .h(QUEUE)
            .h(KERNEL)
            .u32(1)
            .opt(None)
            .opt(Some(&4u64.to_le_bytes()))
            .opt(None)
            .u32(0)
            .b(false)
            .b(true)
            .u64(105)
            .done(),
        Frame::new(clEnqueueMapBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u64(3)
            .u64(0)
            .u64(64)
            .u32(0)
            .b(false)
            .b(false)
            .u64(1)
            .u8(1)
            .done(),
        // Map id, written-back bytes follow (64 of them, which the harness,
        // having no channel, abandons), then queue and buffer.
        Frame::new(clEnqueueUnmapMemObject)
            .u64(1)
            .b(true)
            .u64(64)
            .h(QUEUE)
            .h(BUFFER)
            .no_events()
            .done(),
        Frame::new(clReleaseMemObject).h(BUFFER).done(),
        Frame::new(clRetainMemObject).h(BUFFER).done(),
        Frame::new(clCreateSubBuffer)
            .h(BUFFER)
            .u64(1)
            .u32(0x1220)
            .opt(Some(&[0u64.to_le_bytes(), 64u64.to_le_bytes()].concat()))
            .u64(106)
            .done(),
        Frame::new(clGetMemObjectInfo)
            .h(BUFFER)
            .info(0x1106, 8)
            .done(),
        Frame::new(clEnqueueReadImage)
            .h(QUEUE)
            .h(IMAGE)
            .u32(1)
            .opt(Some(&zero))
            .opt(Some(&r441))
            .u64(0)
            .u64(0)
            .b(true)
            .no_events()
            .done(),
        Frame::new(clWaitForEvents).u32(1).ids(&[EVENT]).done(),
        Frame::new(clGetEventInfo).h(EVENT).info(0x11D0, 8).done(),
        Frame::new(clGetKernelInfo).h(KERNEL).info(0x1194, 8).done(),
        Frame::new(clCreateKernel)
            .h(PROGRAM)
            .opt(Some(b"k"))
            .u64(107)
            .done(),
        Frame::new(clCreateKernelsInProgram)
            .h(PROGRAM)
            .u32(4)
            .b(true)
            .b(true)
            .done(),
        Frame::new(clReleaseKernel).h(KERNEL).done(),
        Frame::new(clReleaseEvent).h(EVENT).done(),
        Frame::new(clEnqueueMapImage)
            .h(QUEUE)
            .h(IMAGE)
            .u64(1)
            .bytes(&zero)
            .bytes(&r441)
            .u32(0)
            .b(false)
            .b(false)
            .u64(2)
            .u8(0)
            .done(),
        Frame::new(clEnqueueCopyImage)
            .h(QUEUE)
            .h(IMAGE)
            .h(IMAGE)
            .opt(Some(&zero))
            .opt(Some(&triple(8, 0, 0)))
            .opt(Some(&r441))
            .no_events()
            .done(),
        Frame::new(clGetContextInfo)
            .h(CONTEXT)
            .info(0x1081, 8)
            .done(),
        Frame::new(clCreateImage2D)
            .h(CONTEXT)
            .u64(1)
            .opt(Some(&[0xB5, 0x10, 0, 0, 0xD2, 0x10, 0, 0]))
            .u64(4)
            .u64(4)
            .u64(0)
            .u8(0)
            .u64(108)
            .done(),
        Frame::new(clEnqueueWriteImage)
            .h(QUEUE)
            .h(IMAGE)
            .u32(1)
            .opt(Some(&zero))
            .opt(Some(&triple(2, 2, 1)))
            .u64(0)
            .u64(0)
            .opt(Some(&[3; 24]))
            .no_events()
            .done(),
        Frame::new(whGetProgramBinary)
            .h(PROGRAM)
            .u32(0)
            .u64(1 << 20)
            .b(true)
            .done(),
        Frame::new(clGetProgramInfo)
            .h(PROGRAM)
            .info(0x1165, 8)
            .done(),
        Frame::new(clReleaseContext).h(CONTEXT).done(),
        set_arg_handle(KERNEL, 0, 1, SAMPLER),
        Frame::new(clEnqueueCopyBufferRect)
            .h(QUEUE)
            .h(BUFFER)
            .h(BUFFER2)
            .opt(Some(&zero))
            .opt(Some(&zero))
            .opt(Some(&triple(16, 4, 1)))
            .u64(16)
            .u64(0)
            .u64(32)
            .u64(0)
            .no_events()
            .done(),
        Frame::new(clEnqueueFillImage)
            .h(QUEUE)
            .h(IMAGE)
            .opt(Some(&[1; 16]))
            .opt(Some(&zero))
            .opt(Some(&triple(2, 2, 1)))
            .no_events()
            .done(),
        Frame::new(clGetKernelWorkGroupInfo)
            .h(KERNEL)
            .h(DEVICE)
            .info(0x11B0, 8)
            .done(),
        Frame::new(clCloneKernel).h(KERNEL).u64(109).done(),
        Frame::new(clEnqueueMigrateMemObjects)
            .h(QUEUE)
            .u32(1)
            .ids(&[BUFFER])
            .u64(0)
            .no_events()
            .done(),
        Frame::new(clEnqueueCopyImageToBuffer)
            .h(QUEUE)
            .h(IMAGE)
            .h(BUFFER)
            .opt(Some(&zero))
            .opt(Some(&r441))
            .u64(0)
            .no_events()
            .done(),
        Frame::new(clGetImageInfo).h(IMAGE).info(0x1111, 8).done(),
        Frame::new(clGetSupportedImageFormats)
            .h(CONTEXT)
            .u64(1)
            .u32(0x10F1)
            .u32(64)
            .b(true)
            .b(true)
            .done(),
        // A map that does not wait (pending: the client fetches its bytes
        // once its event completed), then the fetch: the last two of the
        // general templates.
        Frame::new(clEnqueueMapBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u64(1)
            .u64(0)
            .u64(64)
            .u32(0)
            .b(false)
            .b(true)
            .u64(110)
            .u64(2)
            .u8(4)
            .done(),
        Frame::new(whFetchMapping).u64(2).done(),
        // An include directory of two headers, one in a subdirectory.
        Frame::new(whIncludeDir)
            .bytes(b"/client/include")
            .u32(2)
            .bytes(b"a.h")
            .bytes(b"#define A 1\n")
            .bytes(b"sub/b.h")
            .bytes(b"#define B 2\n")
            .done(),
    ];
    v.extend(argument_templates());
    v
}

/// A raw pointer-sized value for a kernel argument: the address the issue
/// that added these templates crashed PoCL with.
pub const RAW_ADDRESS: u64 = 0xdea_dbee_f000;

/// `clSetKernelArg` with raw bytes.
pub fn set_arg_bytes(kernel: u64, index: u32, bytes: &[u8]) -> Vec<u8> {
    Frame::new(func::clSetKernelArg)
        .h(kernel)
        .u32(index)
        .u64(bytes.len() as u64)
        .u8(1)
        .bytes(bytes)
        .done()
}

/// `clSetKernelArg` with a handle: `tag` 0 for a memory object, 1 for a
/// sampler.
pub fn set_arg_handle(kernel: u64, index: u32, tag: u8, id: u64) -> Vec<u8> {
    Frame::new(func::clSetKernelArg)
        .h(kernel)
        .u32(index)
        .u64(8)
        .u8(2)
        .u8(tag)
        .h(id)
        .done()
}

/// `clSetKernelArg` with a NULL value (local memory of `size` bytes).
pub fn set_arg_null(kernel: u64, index: u32, size: u64) -> Vec<u8> {
    Frame::new(func::clSetKernelArg)
        .h(kernel)
        .u32(index)
        .u64(size)
        .u8(0)
        .done()
}

/// A blocking `clEnqueueReadBufferRect` of `region` from the seeded buffer's
/// origin, with the given row pitches (packed slices), without events.
pub fn read_buffer_rect(region: [u64; 3], buffer_row: u64, host_row: u64) -> Vec<u8> {
    let [x, y, z] = region;
    Frame::new(func::clEnqueueReadBufferRect)
        .h(ids::QUEUE)
        .h(ids::BUFFER)
        .u32(1)
        .opt(Some(&triple(0, 0, 0)))
        .opt(Some(&triple(0, 0, 0)))
        .opt(Some(&triple(x, y, z)))
        .u64(buffer_row)
        .u64(0)
        .u64(host_row)
        .u64(0)
        .b(true)
        .no_events()
        .done()
}

/// `clEnqueueNDRangeKernel` on the seeded queue, without events.
pub fn launch(kernel: u64, offset: Option<&[u64]>, global: &[u64]) -> Vec<u8> {
    let bytes = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    Frame::new(func::clEnqueueNDRangeKernel)
        .h(ids::QUEUE)
        .h(kernel)
        .u32(global.len() as u32)
        .opt(offset.map(bytes).as_deref())
        .opt(Some(&bytes(global)))
        .opt(None)
        .no_events()
        .done()
}

/// The arguments and launches the library does not check (each refusal is
/// the server's: PoCL 3.1 accepts every one of these sets and crashes or
/// aborts at the launch, so `tests::templates_are_valid_requests`
/// launches after each), and valid neighbours of them to mutate.
pub(crate) fn argument_templates() -> Vec<Vec<u8>> {
    use ids::*;
    let raw = RAW_ADDRESS.to_le_bytes();
    let max = u64::MAX;
    vec![
        // Kernel `ka`, with argument information.
        set_arg_bytes(KERNEL_ALL, 0, &raw),
        set_arg_bytes(KERNEL_ALL, 2, &raw),
        set_arg_bytes(KERNEL_ALL, 3, &raw),
        set_arg_bytes(KERNEL_ALL, 4, &raw),
        set_arg_handle(KERNEL_ALL, 4, 0, BUFFER),
        set_arg_handle(KERNEL_ALL, 0, 1, SAMPLER),
        set_arg_null(KERNEL_ALL, 1, 4 << 20),
        set_arg_handle(KERNEL_ALL, 3, 1, SAMPLER),
        launch(KERNEL_ALL, None, &[1]),
        // Kernel `kb`, from a binary without argument information.
        set_arg_bytes(KERNEL_BIN, 0, &raw),
        set_arg_bytes(KERNEL_BIN, 2, &raw),
        set_arg_bytes(KERNEL_BIN, 1, &raw),
        set_arg_null(KERNEL_BIN, 1, 1 << 62),
        set_arg_bytes(KERNEL_BIN, 3, &raw),
        launch(KERNEL_BIN, None, &[1]),
        // Work sizes.
        launch(KERNEL, None, &[max, max, max]),
        launch(KERNEL, Some(&[max]), &[2]),
        // A rectangle of 64 x 2^40 bytes.
        read_buffer_rect([64, 1 << 40, 1], 64, 64),
        Frame::new(func::clEnqueueTask)
            .h(QUEUE)
            .h(KERNEL_ALL)
            .no_events()
            .done(),
        Frame::new(func::clCloneKernel)
            .h(KERNEL_ALL)
            .u64(110)
            .done(),
        Frame::new(func::clGetProgramBuildInfo)
            .h(PROGRAM)
            .h(DEVICE)
            .info(0x1182, 256)
            .done(),
    ]
}

/// Values worth trying wherever a number goes: every seeded id, fresh ids,
/// other tenants' kinds of ids, and sizes at and past every boundary.
pub const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    100,
    104,
    ids::PLATFORM,
    ids::DEVICE,
    ids::DEVICE + 1,
    ids::PLATFORM - 1,
    8,
    16,
    24,
    64,
    4095,
    4096,
    4097,
    1 << 16,
    1 << 31,
    1 << 32,
    1 << 60,
    (1 << 63) - 1,
    u64::MAX - 7,
    u64::MAX,
    RAW_ADDRESS,
    1 << 62,
    4 << 20,
    ids::KERNEL_ALL,
    ids::KERNEL_BIN,
];

/// The structured fuzz mode: `data` picks templates and patches them
/// (overwrite a u64/u32/byte, truncate, insert, mark async), up to eight
/// frames per run so that sequences (create, use, release, use again) occur.
pub fn mutated_frames(data: &[u8]) -> Vec<Vec<u8>> {
    let tpl = templates();
    let mut frames = Vec::new();
    let mut it = data.iter().copied();
    while frames.len() < 8 {
        let Some(pick) = it.next() else { break };
        let mut f = tpl[pick as usize % tpl.len()].clone();
        let n = it.next().unwrap_or(0) % 5;
        for _ in 0..n {
            let (Some(a), Some(b), Some(what), Some(val)) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                break;
            };
            let pos = usize::from(u16::from_le_bytes([a, b])) % (f.len() + 1);
            let v = INTERESTING[val as usize % INTERESTING.len()];
            match what % 6 {
                0 => patch(&mut f, pos, &v.to_le_bytes()),
                1 => patch(&mut f, pos, &(v as u32).to_le_bytes()),
                2 => patch(&mut f, pos, &[val]),
                3 => f.truncate(pos),
                4 => {
                    let tail = f.split_off(pos);
                    f.extend_from_slice(&v.to_le_bytes());
                    f.extend_from_slice(&tail);
                }
                _ => patch(&mut f, 4, &wormhole_wire::FLAG_ASYNC.to_le_bytes()),
            }
        }
        frames.push(f);
    }
    frames
}

fn patch(f: &mut [u8], pos: usize, v: &[u8]) {
    let end = (pos + v.len()).min(f.len());
    if pos < end {
        f[pos..end].copy_from_slice(&v[..end - pos]);
    }
}

/// Splits raw fuzz input into frames: each is a u16 length then its bytes;
/// a short last piece is a frame of whatever is left.
pub fn raw_frames(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() && out.len() < 8 {
        if rest.len() < 2 {
            out.push(rest);
            break;
        }
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        let n = n.min(body.len());
        out.push(&body[..n]);
        rest = &body[n..];
    }
    out
}
