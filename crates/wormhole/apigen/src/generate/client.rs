//! The client: one `extern "C"` stub per function (marshalling the call,
//! unmarshalling the reply), the per-thread-stream variants and the ICD
//! dispatch table.

use std::fmt::Write;

use super::{c_params, errcode_arg, impl_module, kind, ptsz_stream, size_expr, ALLOW};
use crate::{kind_variant, Api, Drains, Func, Ret, Scalar, Settings, Slot, StubRet, Ty};

fn client_put(o: &mut String, f: &Func) {
    for a in &f.args {
        let n = &a.name;
        let line = match &a.ty {
            Ty::Scalar(s) => {
                let enc = match s {
                    Scalar::U32 | Scalar::Bool => format!("c.enc.u32({n});"),
                    Scalar::I32 => format!("c.enc.i32({n});"),
                    Scalar::U64 | Scalar::Bitfield => format!("c.enc.u64({n});"),
                    Scalar::Usize => format!("c.enc.usize({n});"),
                    Scalar::I64 => format!("c.enc.i64({n});"),
                    Scalar::F32 => format!("c.enc.u32({n}.to_bits());"),
                    Scalar::F64 => format!("c.enc.u64({n}.to_bits());"),
                };
                if let (true, Some(sh)) = (f.attrs.is_async, &a.shape) {
                    format!("{enc} c.shape(({sh}) as u64);")
                } else if f.attrs.is_async && matches!(s, Scalar::F32 | Scalar::F64) {
                    format!("{enc} c.shape({n}.to_bits() as u64);")
                } else if f.attrs.is_async {
                    format!("{enc} c.shape({n} as u64);")
                } else {
                    enc
                }
            }
            // Releasing a live handle cannot fail on the server, whichever
            // it is: its shape is only whether it is NULL, so releases of
            // fresh objects are batched too.
            Ty::Handle { kind: k, .. }
                if f.attrs.release.is_some() && f.attrs.is_async && is_first(f, n) =>
            {
                format!("c.released_handle({n}, {})?;", kind(k))
            }
            Ty::Handle { kind: k, .. } => format!("c.handle({n}, {})?;", kind(k)),
            Ty::HandleArray { kind: k, count } => {
                format!("c.handles({n}, {count} as usize, {})?;", kind(k))
            }
            Ty::InBytes { size } => format!("c.in_bytes({n}, {});", size_expr("", size)),
            Ty::OutBytes { .. } | Ty::OutInfo { .. } | Ty::OutScalar(_) | Ty::OutHandles { .. } => {
                format!("c.enc.bool(!{n}.is_null());")
            }
            Ty::OutNew { .. } => format!("let n_{n} = c.out_new({n});"),
            Ty::Errcode | Ty::UserData => continue,
            Ty::DevPtr { size } => match size {
                Some(sz) => format!("c.devptr({n}, Some({}))?;", size_expr("", sz)),
                None => format!("c.devptr({n}, None)?;"),
            },
            Ty::Str => format!("c.str({n});"),
            Ty::Callback { kind: k, userdata } => {
                format!(
                    "let cb_{n} = c.callback(CallbackKind::{}, {n}, {userdata})?;",
                    kind_variant(k)
                )
            }
            Ty::Custom { name, deps, .. } => {
                let deps: String = deps.iter().map(|d| format!(", {d}")).collect();
                format!("let s_{n} = custom::{name}::put(&mut c, {n}{deps})?;")
            }
        };
        let _ = writeln!(o, "        {line}");
    }
    if let Ret::New(_) = f.ret {
        o.push_str("        let new_id = c.new_id();\n");
    }
}

fn is_first(f: &Func, name: &str) -> bool {
    f.args.first().is_some_and(|a| a.name == name)
}

fn client_take(o: &mut String, f: &Func) {
    for a in &f.args {
        let n = &a.name;
        let line = match &a.ty {
            Ty::OutBytes { size } => format!("r.out_bytes({n}, {})?;", size_expr("", size)),
            Ty::OutInfo { size, .. } => {
                let first = f
                    .args
                    .first()
                    .map(|a| a.name.as_str())
                    .unwrap_or("std::ptr::null_mut()");
                format!(
                    "r.out_info({n}, {}, func::{}, param_name, {first})?;",
                    size_expr("", size),
                    f.name
                )
            }
            Ty::OutScalar(s) => format!("r.out_{}({n})?;", s.rust()),
            Ty::OutNew { kind: k } => format!("r.out_new(n_{n}, {n}, {}, status);", kind(k)),
            Ty::OutHandles { kind: k, count } => {
                format!("r.out_handles({n}, {count} as usize, {})?;", kind(k))
            }
            Ty::Custom { name, deps, .. } => {
                let deps: String = deps.iter().map(|d| format!(", {d}")).collect();
                format!("custom::{name}::take(s_{n}, &mut r, {n}{deps})?;")
            }
            _ => continue,
        };
        let _ = writeln!(o, "            {line}");
    }
}

/// The stub of a `cached` query: answers from the object's cache, and
/// otherwise asks through `fetch_NAME`, the ordinary stub under another name.
/// `check` (parse.rs) guarantees the shape used here.
fn client_cached(o: &mut String, f: &Func, mutable: &[u32]) {
    let Some(first) = f.args.first() else { return };
    let Ty::Handle {
        kind: first_kind, ..
    } = &first.ty
    else {
        return;
    };
    let Some((value, size)) = f.args.iter().find_map(|a| match &a.ty {
        Ty::OutInfo { size, .. } => Some((a.name.as_str(), size)),
        _ => None,
    }) else {
        return;
    };
    let size_ret = f
        .args
        .iter()
        .find(|a| a.ty == Ty::OutScalar(Scalar::Usize))
        .map_or("", |a| a.name.as_str());
    let extra = f
        .args
        .iter()
        .skip(1)
        .find_map(|a| match &a.ty {
            Ty::Handle { kind: k, .. } => Some(format!("key_of({}, {})", a.name, kind(k))),
            Ty::Scalar(_) if a.name != "param_name" && a.name != size.arg => {
                Some(format!("Some({} as u64)", a.name))
            }
            _ => None,
        })
        .unwrap_or_else(|| "Some(0)".to_string());
    let fetch_args: Vec<&str> = f
        .args
        .iter()
        .map(|a| match a.name.as_str() {
            n if n == size.arg => "s",
            n if n == value => "v",
            n if n == size_ret => "r",
            n => n,
        })
        .collect();
    let mutable: Vec<String> = mutable.iter().map(|p| format!("{p:#x}")).collect();
    let _ = writeln!(
        o,
        "{ALLOW}\npub unsafe extern \"C\" fn {name}({params}) -> i32 {{\n    \
         let q = CachedQuery {{ func: func::{name}, obj: {first}, kind: {fk}, extra: {extra}, param: param_name, mutable: &[{mutable}] }};\n    \
         // SAFETY: the application passes `{value}` NULL or writable for `{sz}`\n    \
         // bytes and `{size_ret}` NULL or a writable size_t, as {name} requires and\n    \
         // cached_info needs; `fetch` hands the server stub those or a buffer of\n    \
         // cached_info's own with its true size.\n    \
         unsafe {{ cached_info(q, {sz}, {value}, {size_ret}, &|s, v, r| fetch_{name}({fetch})) }}\n}}\n",
        name = f.name,
        params = c_params(f),
        first = first.name,
        fk = kind(first_kind),
        sz = size.arg,
        mutable = mutable.join(", "),
        fetch = fetch_args.join(", "),
    );
}

/// One stub: marshals the call, sends it (or posts it, when `async`) and
/// unmarshals the reply into the application's memory.
fn client_func(o: &mut String, f: &Func, st: &Settings) {
    let (ok, unsupported) = (&st.success, &st.unsupported);
    let ret_ty = f.ret.ctype();
    let prefix = if let Some(mutable) = &f.attrs.cached {
        client_cached(o, f, mutable);
        "fetch_"
    } else {
        ""
    };
    let _ = writeln!(
        o,
        "{ALLOW}\npub unsafe extern \"C\" fn {prefix}{}({}) -> {ret_ty} {{",
        f.name,
        c_params(f)
    );
    if f.attrs.unsupported {
        match &f.ret {
            Ret::Status => {
                let _ = writeln!(o, "    {unsupported}\n}}\n");
            }
            _ => {
                if let Some(e) = errcode_arg(f) {
                    let _ = writeln!(o, "    // SAFETY: errcode_ret is NULL or points to a cl_int, as the API requires.\n    unsafe {{ set_errcode({e}, {unsupported}) }};");
                }
                o.push_str("    std::ptr::null_mut()\n}\n\n");
            }
        }
        return;
    }
    let inner_ty = match &f.ret {
        Ret::Status => "i32".to_string(),
        other => other.ctype(),
    };
    o.push_str("    // SAFETY: every pointer is the application's and valid as the OpenCL\n");
    o.push_str("    // specification requires of callers; handles are checked before use.\n");
    let _ = writeln!(
        o,
        "    let res = unsafe {{ (|| -> Result<{inner_ty}, i32> {{"
    );
    let _ = writeln!(o, "        let mut c = Call::begin(func::{})?;", f.name);
    client_put(o, f);
    let callbacks: Vec<&str> = f
        .args
        .iter()
        .filter(|a| matches!(a.ty, Ty::Callback { .. }))
        .map(|a| a.name.as_str())
        .collect();
    client_finish(o, f, ok);
    client_result(o, f, ok, &callbacks);
    o.push_str("    })() };\n");
    match &f.ret {
        Ret::Status => o.push_str("    match res {\n        Ok(s) | Err(s) => s,\n    }\n"),
        _ => {
            let e = errcode_arg(f).unwrap_or("std::ptr::null_mut()");
            let _ = write!(o, "    let (v, err) = match res {{\n        Ok(v) => (v, {ok}),\n        Err(e) => (std::ptr::null_mut(), e),\n    }};\n");
            let _ = writeln!(o, "    // SAFETY: errcode_ret is NULL or points to a cl_int, as the API requires.\n    unsafe {{ set_errcode({e}, err) }};\n    v");
        }
    }
    o.push_str("}\n\n");
}

/// The end of a stub's call: posted without waiting (`async`), or waited
/// for, with the reply's status, what it drained and its outputs taken.
fn client_finish(o: &mut String, f: &Func, ok: &str) {
    if f.attrs.is_async {
        let wake = f
            .attrs
            .wake_if
            .clone()
            .unwrap_or_else(|| f.attrs.wake.to_string());
        if matches!(f.ret, Ret::New(_)) {
            // A creation reports its own status: an earlier deferred
            // failure is left for the next synchronisation point.
            o.push_str("        let status = c.finish_async_create()?;\n");
        } else {
            let _ = writeln!(o, "        let status = c.finish_async({wake})?;");
        }
        for a in &f.args {
            if let Ty::OutNew { kind: k } = &a.ty {
                let n = &a.name;
                let _ = writeln!(
                    o,
                    "        if status == {ok} {{ adopt_new(n_{n}, {n}, {}); }}",
                    kind(k)
                );
            }
        }
    } else {
        o.push_str("        let mut r = c.finish()?;\n");
        if f.attrs.syncpoint {
            o.push_str("        let status = r.status_with_deferred();\n");
        } else {
            o.push_str("        let status = r.status();\n");
        }
        match (f.attrs.drains, f.args.first()) {
            (Some(Drains::Events), _) => {
                for a in &f.args {
                    if let Ty::HandleArray { count, .. } = &a.ty {
                        let _ = writeln!(
                            o,
                            "        if r.status() == {ok} {{ r.waited_for({}, {count} as usize); }}",
                            a.name
                        );
                    }
                }
            }
            (Some(d), Some(q)) => {
                let always = d == Drains::Always;
                let _ = writeln!(
                    o,
                    "        if r.status() == {ok} {{ r.drained({}, {always}); }}",
                    q.name
                );
            }
            _ => {}
        }
        let mut take = String::new();
        client_take(&mut take, f);
        if !take.is_empty() {
            o.push_str("        if r.has_outputs() {\n");
            o.push_str(&take);
            o.push_str("        }\n");
        }
    }
}

/// What a stub's closure returns once the reply is in: the status (after
/// the reference counts and callbacks it settles) or the object made.
fn client_result(o: &mut String, f: &Func, ok: &str, callbacks: &[&str]) {
    let first = f
        .args
        .first()
        .map(|a| a.name.as_str())
        .unwrap_or("std::ptr::null_mut()");
    match &f.ret {
        Ret::Status => {
            if !f.attrs.is_async {
                o.push_str("        drop(r);\n");
            }
            if let Some(k) = &f.attrs.retain {
                let _ = writeln!(
                    o,
                    "        if status == {ok} {{ retained({first}, {}); }}",
                    kind(k)
                );
            }
            if let Some(k) = &f.attrs.release {
                let _ = writeln!(
                    o,
                    "        if status == {ok} {{ released({first}, {}); }}",
                    kind(k)
                );
            }
            for cb in callbacks {
                let _ = writeln!(o, "        cb_{cb}.fire(status, {first});");
            }
            o.push_str("        Ok(status)\n");
        }
        Ret::New(k) if f.attrs.is_async => {
            let _ = writeln!(o, "        let obj = if status == {ok} {{ adopt_id(new_id, {}) }} else {{ std::ptr::null_mut() }};", kind(k));
            let _ = write!(
                o,
                "        if status != {ok} {{ return Err(status); }}\n        Ok(obj)\n",
            );
        }
        Ret::New(k) => {
            let _ = writeln!(o, "        let obj = if status == {ok} {{ r.adopt(new_id, {}) }} else {{ std::ptr::null_mut() }};", kind(k));
            o.push_str("        drop(r);\n");
            for cb in callbacks {
                let _ = writeln!(o, "        cb_{cb}.fire(status, obj);");
            }
            let _ = write!(
                o,
                "        if status != {ok} {{ return Err(status); }}\n        Ok(obj)\n",
            );
        }
        Ret::Custom { name, .. } => {
            let _ = writeln!(o, "        let v = custom::{name}::take_ret(&mut r, status)?;\n        drop(r);\n        Ok(v)");
        }
    }
}

/// The client: one `extern "C"` stub per function and the dispatch table.
///
/// The including module must bring into scope `Call`, `adopt_new`, `Kind`,
/// `CallbackKind`, `retained`, `released`, `set_errcode`, the `func` ids,
/// the `custom` and `overrides` modules, the API's success and unsupported
/// statuses (as its `api` block names them), and `c_void`/`c_char`.
pub fn gen_client(api: &Api) -> String {
    let mut o = String::new();
    for f in &api.funcs {
        if !f.attrs.manual && !f.attrs.client_only {
            client_func(&mut o, f, &api.settings);
        }
        if let Some(stream) = ptsz_stream(f) {
            per_thread_wrapper(&mut o, f, stream);
        }
    }
    o.push_str("/// The ICD dispatch table, in `cl_icd.h` order.\n");
    let _ = writeln!(o, "pub const DISPATCH_LEN: usize = {};", api.dispatch.len());
    o.push_str("/// A table, one line an entry, so it stays one function.\n#[allow(clippy::too_many_lines)]\n");
    o.push_str("pub fn dispatch_table() -> [*const c_void; DISPATCH_LEN] {\n    [\n");
    for s in &api.dispatch {
        let e = match s {
            Slot::Func(n) => {
                let f = api.funcs.iter().find(|f| &f.name == n);
                match f {
                    Some(f) if f.attrs.client_override || f.attrs.manual || f.attrs.client_only => {
                        format!("overrides::{n} as *const c_void")
                    }
                    _ => format!("{n} as *const c_void"),
                }
            }
            Slot::Local(n) => format!("overrides::{n} as *const c_void"),
            Slot::Unsupported(_, StubRet::Int) => "unsupported_int as *const c_void".into(),
            Slot::Unsupported(_, StubRet::Ptr(None)) => "unsupported_ptr as *const c_void".into(),
            Slot::Unsupported(_, StubRet::Ptr(Some(n))) => {
                format!("unsupported_ptr_err{n} as *const c_void")
            }
            Slot::Unsupported(_, StubRet::Void) => "unsupported_void as *const c_void".into(),
        };
        let _ = writeln!(o, "        {e},");
    }
    o.push_str("    ]\n}\n");
    o
}

/// NAME_ptsz: NAME with a NULL `stream` passed on as cudaStreamPerThread
/// (handle 2), the default stream of code built with `--default-stream
/// per-thread`.
fn per_thread_wrapper(o: &mut String, f: &Func, stream: &str) {
    let args: Vec<&str> = f.args.iter().map(|a| a.name.as_str()).collect();
    let target = match impl_module(f) {
        "gen" => f.name.clone(),
        m => format!("{m}::{}", f.name),
    };
    let _ = writeln!(
        o,
        "/// `{name}` as code built with `--default-stream per-thread` calls it:
/// its NULL stream is the thread's default stream.
///
/// # Safety
/// As `{name}`.
{ALLOW}
pub unsafe extern \"C\" fn {name}_ptsz({params}) -> {ret} {{
    let {stream} = if {stream}.is_null() {{ 2usize as *mut c_void }} else {{ {stream} }};
    // SAFETY: the arguments are the application's, valid as `{name}` requires
    // (this function's contract); only a NULL stream became the per-thread
    // default stream's handle, which `{name}` accepts as a stream.
    unsafe {{ {target}({args}) }}
}}
",
        name = f.name,
        params = c_params(f),
        ret = f.ret.ctype(),
        args = args.join(", "),
    );
}
