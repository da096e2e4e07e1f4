//! Programs as the tenant builds them.
//!
//! Every build, compilation and link asks the library for kernel-argument
//! information (`-cl-kernel-arg-info`, added after the application's own
//! options): the checks of `clSetKernelArg` (`args.rs`) must know which
//! arguments the library will take as objects, and PoCL 3.1 answers
//! `CL_KERNEL_ARG_INFO_NOT_AVAILABLE` for a program built with options that
//! lack it. With it, PoCL answers for programs from binaries too, whatever
//! options built the binary (measured: a binary of a program built without
//! the option, built again with it, describes every argument). Options
//! given as NULL stay NULL: PoCL then describes arguments all the same.
//!
//! The application is answered as if the option had not been added: its
//! own options for `CL_PROGRAM_BUILD_OPTIONS`, and
//! `CL_KERNEL_ARG_INFO_NOT_AVAILABLE` from `clGetKernelArgInfo` where its
//! options did not ask for the information, as PoCL answers natively.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_void, CStr, CString};

use wormhole_opencl_api::{
    CL_INVALID_LINKER_OPTIONS, CL_INVALID_VALUE, CL_KERNEL_ARG_INFO_NOT_AVAILABLE,
    CL_PROGRAM_NUM_DEVICES, CL_SUCCESS,
};

use super::ffi;
use super::queries::info_bytes;
use super::tenant::Tenant;

/// What the tenant adds to every build, compilation and link.
pub const ARG_INFO: &CStr = c"-cl-kernel-arg-info";

const CL_PROGRAM_BUILD_OPTIONS: u32 = 0x1182;
const CL_PROGRAM_DEVICES: u32 = 0x1163;
const CL_KERNEL_PROGRAM: u32 = 0x1194;
const CL_INVALID_BUILD_OPTIONS: i32 = -43;

/// Build options as the library is given them.
pub struct Options(Option<CString>);

impl Options {
    pub fn ptr(&self) -> *const c_char {
        self.0.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
    }

    pub fn into_inner(self) -> Option<CString> {
        self.0
    }
}

/// The options the library is given: NULL for NULL, else the
/// application's, then [`ARG_INFO`] (always, even when the application gave
/// it: the library then reports it twice, and [`as_given`] takes one away,
/// so no record of who added what is needed).
pub fn with_arg_info(options: &Option<CString>) -> Result<Options, i32> {
    let Some(app) = options.as_deref().map(CStr::to_bytes) else {
        return Ok(Options(None));
    };
    if app.is_empty() {
        return Ok(Options(Some(ARG_INFO.to_owned())));
    }
    let mut v = Vec::with_capacity(app.len() + 1 + ARG_INFO.count_bytes());
    v.extend_from_slice(app);
    v.push(b' ');
    v.extend_from_slice(ARG_INFO.to_bytes());
    // Bytes of two C strings: no NUL inside.
    CString::new(v)
        .map(|c| Options(Some(c)))
        .map_err(|_| CL_INVALID_BUILD_OPTIONS)
}

/// The build options as the library reports them, less what
/// [`with_arg_info`] added. PoCL reports the options it was given with
/// runs of spaces made one and no space at either end, so the added
/// option is the last word; where it is not there (a build that stopped
/// at an option it refused reports the options before it), nothing was
/// added to what the application sees.
pub fn as_given(reported: &[u8]) -> &[u8] {
    let flag = ARG_INFO.to_bytes();
    if reported == flag {
        return &[];
    }
    match reported.strip_suffix(flag) {
        Some(rest) if rest.ends_with(b" ") => &rest[..rest.len() - 1],
        _ => reported,
    }
}

/// Whether the application asked for argument information when it built
/// a program whose options the library reports as `reported`, by PoCL's
/// rule: options that name it anywhere, or none (NULL: reported empty, as
/// the tenant never passes empty options).
pub fn asked_for_arg_info(reported: &[u8]) -> bool {
    let needle: &[u8] = b"cl-kernel-arg-info";
    reported.is_empty()
        || as_given(reported)
            .windows(needle.len())
            .any(|w| w == needle)
}

/// The build options the library reports for `program` on `device`.
///
/// # Safety
/// `program` is a program and `device` one of its devices.
unsafe fn reported_options(
    program: *mut c_void,
    device: *mut c_void,
    max: u64,
) -> Result<Vec<u8>, i32> {
    // The options the application sent, and ours: never more than a
    // request held.
    // SAFETY: as this function's contract.
    unsafe { build_text(program, device, CL_PROGRAM_BUILD_OPTIONS, max) }
}

/// A text of `program`'s build on `device` (`param`: its options, its
/// log), up to its NUL, at most `max` bytes read.
///
/// # Safety
/// `program` is a program and `device` one of its devices.
pub(super) unsafe fn build_text(
    program: *mut c_void,
    device: *mut c_void,
    param: u32,
    max: u64,
) -> Result<Vec<u8>, i32> {
    // SAFETY: `program` is a program and `device` one of its devices (this
    // function's contract); `value` and `size_ret` are as info_bytes passes
    // them: NULL or room for `size` bytes, NULL or one size_t.
    let mut text = info_bytes(max, |size, value, size_ret| unsafe {
        ffi::clGetProgramBuildInfo(program, device, param, size, value, size_ret)
    })?;
    let n = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    text.truncate(n);
    Ok(text)
}

/// `CL_PROGRAM_BUILD_OPTIONS` answered with the application's options;
/// anything else as the library answers.
///
/// # Safety
/// As for `clGetProgramBuildInfo`; `program` and `device` come from the
/// tenant's table.
pub unsafe fn clGetProgramBuildInfo(
    t: &mut Tenant,
    program: *mut c_void,
    device: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    if param != CL_PROGRAM_BUILD_OPTIONS {
        // SAFETY: `program` and `device` are table handles (kinds Program,
        // Device); `value` is NULL or the decoder's `out_buf` of `size` bytes
        // and `size_ret` its usize local, so the library writes only server
        // memory of the sizes it is told.
        return unsafe {
            ffi::clGetProgramBuildInfo(program, device, param, size, value, size_ret)
        };
    }
    // SAFETY: `program` and `device` are table handles (kinds Program, Device);
    // the library refuses a device that is not the program's
    // (CL_INVALID_DEVICE).
    let text = match unsafe { reported_options(program, device, t.limits.max_alloc) } {
        Ok(v) => v,
        Err(e) => return e,
    };
    let restored = super::includes::restore(t, as_given(&text));
    let shown = &restored[..];
    let need = shown.len() + 1;
    if !value.is_null() {
        if size < need {
            return CL_INVALID_VALUE;
        }
        // SAFETY: `value` holds `size` >= `need` bytes (the decoder's
        // buffer of the size the client gave).
        unsafe {
            std::ptr::copy_nonoverlapping(shown.as_ptr(), value as *mut u8, shown.len());
            *(value as *mut u8).add(shown.len()) = 0;
        }
    }
    if !size_ret.is_null() {
        // SAFETY: the decoder's local.
        unsafe { *size_ret = need };
    }
    CL_SUCCESS
}

/// A link with [`ARG_INFO`] among its options, which PoCL needs there as
/// well (the compilations' options do not carry over to what it links).
/// The specification does not list the option for links, so a library
/// that refuses it (`CL_INVALID_LINKER_OPTIONS`) links again with the
/// application's options alone.
///
/// # Safety
/// As for `clLinkProgram`; handles come from the tenant's table, `options`
/// is NULL or a C string.
#[allow(clippy::too_many_arguments)]
pub unsafe fn clLinkProgram(
    _t: &mut Tenant,
    context: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_programs: u32,
    input_programs: *const *mut c_void,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: `options` is NULL or the decoder's CString (`tenant::cstr`,
    // interior NULs refused), NUL-terminated and alive for the call.
    let app = (!options.is_null()).then(|| unsafe { CStr::from_ptr(options) }.to_owned());
    // SAFETY: `context` is a table handle (kind Context); `device_list` and
    // `input_programs` are NULL or at least `num_devices` and
    // `num_input_programs` table handles (`check_count`); `pfn_notify` is NULL
    // for program callbacks (`callbacks::decode`), `user_data` NULL or a static
    // stand-in; `err` is the decoder's local; `opts` is `options` or `ours`,
    // both alive across every call.
    let link = |opts: *const c_char| unsafe {
        ffi::clLinkProgram(
            context,
            num_devices,
            device_list,
            opts,
            num_input_programs,
            input_programs,
            pfn_notify,
            user_data,
            err,
        )
    };
    let Ok(ours) = with_arg_info(&app) else {
        return link(options);
    };
    let p = link(ours.ptr());
    // SAFETY: `err` is the decoder's local.
    if p.is_null() && !options.is_null() && unsafe { *err } == CL_INVALID_LINKER_OPTIONS {
        return link(options);
    }
    p
}

/// Leaves the bytes a program was made from where `Tenant::insert`, which
/// runs next, charges them to the quota; only once the library made it,
/// so that nothing is left for another program to take.
fn made_from(t: &mut Tenant, program: *mut c_void, err: *mut i32, bytes: u64) -> *mut c_void {
    // SAFETY: `err` is the decoder's local.
    if !program.is_null() && unsafe { *err } == CL_SUCCESS {
        t.program_bytes = Some(bytes);
    }
    program
}

/// The bytes a program is made from: the sum of its `count` lengths (0 for
/// NULL lengths).
///
/// # Safety
/// `lengths` is NULL or holds `count` lengths.
unsafe fn total_length(lengths: *const usize, count: u32) -> u64 {
    if lengths.is_null() {
        return 0;
    }
    // SAFETY: non-NULL, so `count` lengths (this function's contract).
    unsafe { std::slice::from_raw_parts(lengths, count as usize) }
        .iter()
        .map(|&n| n as u64)
        .sum()
}

/// # Safety
/// As for `clCreateProgramWithSource`; `lengths` holds `count` lengths
/// (the decoder gives every one).
pub unsafe fn clCreateProgramWithSource(
    t: &mut Tenant,
    context: *mut c_void,
    count: u32,
    strings: *const *const c_char,
    lengths: *const usize,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: `lengths` is NULL or `custom::source_lengths` pointed it at
    // `count` lengths (`custom::sources` refuses a count other than `count`).
    let bytes = unsafe { total_length(lengths, count) };
    // SAFETY: `context` is a table handle (kind Context); `strings` is never
    // NULL (`custom::sources` refuses it) and holds `count` pointers into the
    // request, each with its length in `lengths` (an empty one given as "", so
    // none is read to a NUL); `err` is the decoder's local.
    let p = unsafe { ffi::clCreateProgramWithSource(context, count, strings, lengths, err) };
    made_from(t, p, err, bytes)
}

/// # Safety
/// As for `clCreateProgramWithBinary`; `lengths` is NULL or holds
/// `num_devices` lengths.
#[allow(clippy::too_many_arguments)]
pub unsafe fn clCreateProgramWithBinary(
    t: &mut Tenant,
    context: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    lengths: *const usize,
    binaries: *const *const u8,
    binary_status: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: `lengths` is NULL or `custom::binaries` made it with exactly
    // `num_devices` lengths (it refuses another count).
    let bytes = unsafe { total_length(lengths, num_devices) };
    // SAFETY: `context` is a table handle (kind Context); `device_list` is NULL
    // only with `num_devices` 0, else at least that many Device handles
    // (`check_count`); `lengths` and `binaries` are both NULL or both
    // `num_devices` entries, each binary a server-owned copy of its length
    // followed by `custom::BINARY_PAD` zero bytes (PoCL 3.1 reads a fixed
    // header whatever the length: a short binary's read stays in the copy),
    // a NULL one with 0, which the library refuses (`custom::binaries`);
    // `binary_status` is NULL or the decoder's `out_buf` of 4 * `num_devices`
    // bytes; `err` is the decoder's local.
    let p = unsafe {
        ffi::clCreateProgramWithBinary(
            context,
            num_devices,
            device_list,
            lengths,
            binaries,
            binary_status.cast(),
            err,
        )
    };
    made_from(t, p, err, bytes)
}

/// `CL_KERNEL_ARG_INFO_NOT_AVAILABLE` where the application's options for
/// the kernel's program did not ask for argument information (see the
/// module's text); otherwise as the library answers. Nothing is written
/// where the answer is that code, as natively.
///
/// # Safety
/// As for `clGetKernelArgInfo`; `kernel` comes from the tenant's table.
pub unsafe fn clGetKernelArgInfo(
    t: &mut Tenant,
    kernel: *mut c_void,
    index: u32,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // SAFETY: `kernel` is a table handle, kind Kernel (this function's
    // contract, met by the decoder's `Tenant::handle`).
    let asked = unsafe { kernel_asked(kernel, t.limits.max_alloc) };
    if !asked {
        // The library's own refusals (an index past the last, a parameter
        // it does not know) come first, as natively.
        let mut n = 0usize;
        // SAFETY: a size query into our local.
        let s = unsafe {
            ffi::clGetKernelArgInfo(kernel, index, param, 0, std::ptr::null_mut(), &mut n)
        };
        return if s == CL_SUCCESS {
            CL_KERNEL_ARG_INFO_NOT_AVAILABLE
        } else {
            s
        };
    }
    // SAFETY: `kernel` is a table handle (kind Kernel); `value` is NULL or the
    // decoder's `out_buf` of `size` bytes and `size_ret` its usize local.
    unsafe { ffi::clGetKernelArgInfo(kernel, index, param, size, value, size_ret) }
}

/// Whether the application asked for argument information when it built
/// the program of `kernel` (true where that cannot be told: the
/// information is then given, as the library gives it).
///
/// # Safety
/// `kernel` is a kernel from the tenant's table.
unsafe fn kernel_asked(kernel: *mut c_void, max: u64) -> bool {
    // SAFETY: `kernel` is a table handle, kind Kernel (this function's
    // contract); CL_KERNEL_PROGRAM answers one cl_program, a usize.
    let Some(program) =
        (unsafe { super::info_value::<usize>(ffi::clGetKernelInfo, kernel, CL_KERNEL_PROGRAM) })
    else {
        return true;
    };
    let program = program as *mut c_void;
    // SAFETY: a program the library named.
    let devices = unsafe { program_devices(program) };
    let Some(&device) = devices.first() else {
        return true;
    };
    // SAFETY: the program and one of its devices.
    match unsafe { reported_options(program, device, max) } {
        Ok(o) => asked_for_arg_info(&o),
        Err(_) => true,
    }
}

/// The devices of `program` (none where they cannot be had).
///
/// # Safety
/// `program` is a live program.
pub(super) unsafe fn program_devices(program: *mut c_void) -> Vec<*mut c_void> {
    // SAFETY: a live program (this function's contract); one cl_uint.
    let n =
        unsafe { super::info_value::<u32>(ffi::clGetProgramInfo, program, CL_PROGRAM_NUM_DEVICES) };
    let mut devices = vec![std::ptr::null_mut::<c_void>(); n.unwrap_or(0) as usize];
    // SAFETY: room for `n` device handles, the size passed.
    let s = unsafe {
        ffi::clGetProgramInfo(
            program,
            CL_PROGRAM_DEVICES,
            devices.len() * std::mem::size_of::<usize>(),
            devices.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if s != CL_SUCCESS {
        devices.clear();
    }
    devices
}

/// The application's options with the include directories it sent
/// pointing at this tenant's copies (`includes.rs`).
pub fn with_includes(t: &Tenant, options: &Option<CString>) -> Option<CString> {
    let app = options.as_ref()?;
    Some(super::includes::rewrite(t, app).unwrap_or_else(|| app.clone()))
}

/// What the library is given for a build or compilation: the
/// application's options with its include directories ours, and
/// [`ARG_INFO`].
pub fn for_library(t: &Tenant, options: &Option<CString>) -> Result<Options, i32> {
    with_arg_info(&with_includes(t, options))
}

/// The options a thread of the tenant's own builds with (`builds.rs`):
/// as [`for_library`].
///
/// # Safety
/// `options` is NULL or a C string.
pub unsafe fn thread_options(t: &Tenant, options: *const c_char) -> Option<CString> {
    // SAFETY: `options` is NULL or the decoder's CString (`tenant::cstr`),
    // passed on by `builds::start`: NUL-terminated and alive for the call.
    let app = (!options.is_null()).then(|| unsafe { CStr::from_ptr(options) }.to_owned());
    let app = with_includes(t, &app);
    match with_arg_info(&app) {
        Ok(o) => o.into_inner(),
        Err(_) => app,
    }
}

/// A link's options with [`ARG_INFO`] taken back out, for the second try
/// of a library that refused them (see [`clLinkProgram`]).
pub fn without_arg_info(options: &CStr) -> Option<CString> {
    let app = as_given(options.to_bytes());
    (!app.is_empty()).then(|| CString::new(app).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_added_option_is_taken_back_from_what_the_library_reports() {
        let add = |o: Option<&str>| {
            let o = o.map(|s| CString::new(s).expect("no NUL"));
            with_arg_info(&o)
                .expect("options")
                .into_inner()
                .map(CString::into_bytes)
        };
        assert_eq!(add(None), None, "NULL stays NULL");
        assert_eq!(add(Some("")).as_deref(), Some(&b"-cl-kernel-arg-info"[..]));
        assert_eq!(
            add(Some("-DX=1")).as_deref(),
            Some(&b"-DX=1 -cl-kernel-arg-info"[..])
        );
        // What PoCL 3.1 reports for each (measured), and what a build
        // without the added option reports natively.
        for (reported, native) in [
            (&b"-cl-kernel-arg-info"[..], &b""[..]),
            (b"-DX=1 -cl-kernel-arg-info", b"-DX=1"),
            (
                b"-DX=1 -cl-kernel-arg-info -cl-kernel-arg-info",
                b"-DX=1 -cl-kernel-arg-info",
            ),
            // A build refused at `-bogus` reports what came before it.
            (b"-DX=1 ", b"-DX=1 "),
            (b"", b""),
            (b"-Dcl-kernel-arg-info", b"-Dcl-kernel-arg-info"),
        ] {
            assert_eq!(as_given(reported), native, "{reported:?}");
        }
        assert_eq!(
            without_arg_info(c"-O2 -cl-kernel-arg-info").as_deref(),
            Some(c"-O2")
        );
        assert_eq!(without_arg_info(c"-cl-kernel-arg-info"), None);
    }

    /// PoCL 3.1 describes the arguments of a program built with options
    /// that name `cl-kernel-arg-info` anywhere, or with none (NULL).
    #[test]
    fn whether_the_application_asked_is_told_from_the_reported_options() {
        for (reported, asked) in [
            (&b""[..], true),
            (b"-cl-kernel-arg-info", false),
            (b"-DX=1 -cl-kernel-arg-info", false),
            (b"-DX=1 -cl-kernel-arg-info -cl-kernel-arg-info", true),
            (b"-Dcl-kernel-arg-info -cl-kernel-arg-info", true),
            (b"-DX=1 ", false),
        ] {
            assert_eq!(asked_for_arg_info(reported), asked, "{reported:?}");
        }
    }
}
