//! Program builds, compilations and links (run off the channel while other
//! threads call), and program binaries.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};

use wormhole_opencl_api::{
    Kind, CL_INVALID_VALUE, CL_PROGRAM_BINARIES, CL_PROGRAM_BINARY_SIZES, CL_PROGRAM_NUM_DEVICES,
    CL_SUCCESS,
};

use crate::connection::info_value;
use crate::gen;
use crate::objects::obj;
use crate::waits;

/// A build leaves the channel free while it compiles once more than one of
/// the application's threads calls OpenCL: the server builds on a thread of
/// its own and completes a user event at the end, which this thread waits
/// for as for any event ([`waits::wait`]); the other threads' calls go on
/// meanwhile, as natively. A single-threaded program builds in one round
/// trip, as the description says. `pfn_notify` runs on the calling thread
/// when the build returns, either way.
///
/// # Safety
/// As for `clBuildProgram`.
pub unsafe extern "C" fn clBuildProgram(
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: clBuildProgram's contract (this fn's): `device_list` NULL or `num_devices` devices,
    // `options` NULL or NUL-terminated, `pfn_notify`/`user_data` the application's for `program`;
    // `call` passes them unchanged, which is build's contract.
    unsafe {
        build(program, pfn_notify, user_data, options, |ev| match ev {
            None => gen::clBuildProgram(
                program,
                num_devices,
                device_list,
                options,
                pfn_notify,
                user_data,
            ),
            Some(ev) => gen::whBuildProgramStart(program, num_devices, device_list, options, ev),
        })
    }
}

/// `clCompileProgram` as [`clBuildProgram`].
///
/// # Safety
/// As for `clCompileProgram`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clCompileProgram(
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_headers: u32,
    input_headers: *const *mut c_void,
    header_include_names: *const *const c_char,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: clCompileProgram's contract (this fn's): the lists hold their counts, `options` is
    // NULL or NUL-terminated, `pfn_notify`/`user_data` the application's for `program`; `call`
    // passes them unchanged, which is build's contract.
    unsafe {
        build(program, pfn_notify, user_data, options, |ev| match ev {
            None => gen::clCompileProgram(
                program,
                num_devices,
                device_list,
                options,
                num_input_headers,
                input_headers,
                header_include_names,
                pfn_notify,
                user_data,
            ),
            Some(ev) => gen::whCompileProgramStart(
                program,
                num_devices,
                device_list,
                options,
                num_input_headers,
                input_headers,
                header_include_names,
                ev,
            ),
        })
    }
}

/// Runs a build or compilation: `call(None)` forwards it as one call (and
/// runs the callback); `call(Some(ev))` asks the server to start it on a
/// thread of its own, which completes `*ev` at the end; this thread then
/// waits for that with the channel free, takes the result, and runs
/// `pfn_notify`.
///
/// # Safety
/// `call` makes the application's call with its arguments; `pfn_notify`
/// and `user_data` are the application's for `program`; `options` is NULL
/// or a C string.
unsafe fn build(
    program: *mut c_void,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
    options: *const c_char,
    call: impl FnOnce(Option<&mut *mut c_void>) -> i32,
) -> i32 {
    // SAFETY: `options` is NULL or NUL-terminated (this fn's contract, the build's options string),
    // which includes::send needs.
    unsafe { crate::includes::send(options) };
    // Whatever comes of it, the program's kernels are this build's now.
    if let Ok(Some(p)) = obj(program, Kind::Program) {
        p.shape_as_new_build();
    }
    if !off_channel(pfn_notify, user_data) {
        return call(None);
    }
    let mut ev = std::ptr::null_mut();
    let s = call(Some(&mut ev));
    if s != CL_SUCCESS {
        return s;
    }
    // SAFETY: the event just started; the application's callback for this
    // program.
    unsafe {
        let s = finish(ev, |ev| gen::whBuildProgramResult(ev));
        crate::callbacks::notify_program(pfn_notify, program, user_data);
        s
    }
}

/// `clLinkProgram` as [`clBuildProgram`]; the program the link made comes
/// with its result.
///
/// # Safety
/// As for `clLinkProgram`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clLinkProgram(
    context: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_programs: u32,
    input_programs: *const *mut c_void,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
    errcode_ret: *mut i32,
) -> *mut c_void {
    if !off_channel(pfn_notify, user_data) {
        // SAFETY: the arguments are the application's, passed unchanged: clLinkProgram's contract
        // is the generated forwarder's.
        return unsafe {
            gen::clLinkProgram(
                context,
                num_devices,
                device_list,
                options,
                num_input_programs,
                input_programs,
                pfn_notify,
                user_data,
                errcode_ret,
            )
        };
    }
    let mut ev = std::ptr::null_mut();
    // SAFETY: the application's arguments, unchanged (clLinkProgram's contract: the lists hold
    // their counts, `options` NULL or NUL-terminated); `ev` is our local out-slot.
    let s = unsafe {
        gen::whLinkProgramStart(
            context,
            num_devices,
            device_list,
            options,
            num_input_programs,
            input_programs,
            &mut ev,
        )
    };
    let mut err = s;
    let linked = if s != CL_SUCCESS {
        std::ptr::null_mut()
    } else {
        // SAFETY: as in `clBuildProgram`, for the program the link made.
        unsafe {
            let p = finish(ev, |ev| gen::whLinkProgramResult(ev, &mut err));
            crate::callbacks::notify_program(pfn_notify, p, user_data);
            p
        }
    };
    if !errcode_ret.is_null() {
        // SAFETY: the application's slot.
        unsafe { *errcode_ret = err };
    }
    linked
}

/// Whether to run a build, compilation or link on a thread of the
/// server's own, leaving the channel free while it runs.
fn off_channel(pfn_notify: *mut c_void, user_data: *mut c_void) -> bool {
    let several = waits::free_channel_for_build();
    // User data without a callback is the library's to refuse.
    several && (user_data.is_null() || !pfn_notify.is_null())
}

/// Waits with the channel free for the job `ev` announces, then takes its
/// result with `take` and releases the event.
///
/// # Safety
/// `ev` is the event a `wh*ProgramStart` call made.
unsafe fn finish<R>(ev: *mut c_void, take: impl FnOnce(*mut c_void) -> R) -> R {
    // The event only completes (a user event cannot fail), and a failed
    // wait (the server gone) leaves the result to tell.
    let _ = waits::wait(&[ev]);
    let r = take(ev);
    // SAFETY: our event, released once its result is taken.
    unsafe { gen::clReleaseEvent(ev) };
    r
}

/// # Safety
/// As for `clGetProgramInfo`.
pub unsafe extern "C" fn clGetProgramInfo(
    p: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    if param != CL_PROGRAM_BINARIES {
        // SAFETY: the arguments are the application's, passed unchanged: clGetProgramInfo's
        // contract is the generated forwarder's.
        return unsafe { gen::clGetProgramInfo(p, param, size, value, size_ret) };
    }
    let n: u32 = match info_value(gen::clGetProgramInfo, p, CL_PROGRAM_NUM_DEVICES) {
        Ok(n) => n,
        Err(s) => return s,
    };
    let need = n as usize * std::mem::size_of::<usize>();
    if !size_ret.is_null() {
        // SAFETY: `size_ret` is non-NULL and a writable size_t by clGetProgramInfo's contract on
        // param_value_size_ret.
        unsafe { *size_ret = need };
    }
    if value.is_null() {
        return CL_SUCCESS;
    }
    if size < need {
        return CL_INVALID_VALUE;
    }
    let mut sizes = vec![0usize; n as usize];
    // SAFETY: room for `n` sizes.
    let s = unsafe {
        gen::clGetProgramInfo(
            p,
            CL_PROGRAM_BINARY_SIZES,
            need,
            sizes.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if s != CL_SUCCESS {
        return s;
    }
    let dests = value as *const *mut c_void;
    for (i, &len) in sizes.iter().enumerate() {
        // SAFETY: `value` holds `n` pointers (size checked above).
        let d = unsafe { *dests.add(i) };
        if d.is_null() || len == 0 {
            continue;
        }
        // SAFETY: the application provides `len` bytes at `d`, as the API
        // requires for CL_PROGRAM_BINARIES.
        let s = unsafe { gen::whGetProgramBinary(p, i as u32, len, d) };
        if s != CL_SUCCESS {
            return s;
        }
    }
    CL_SUCCESS
}
