//! The server: the real library's declarations (linked, or an entry-point
//! table filled at run time), one decoder per function that validates every
//! argument before the call, and the `dispatch` switch.

use std::fmt::Write;

use super::{c_params, errcode_arg, kind, named, size_expr, ALLOW};
use crate::{kind_variant, Api, Arg, Func, Ret, Scalar, Settings, Ty};

/// One decoder, `d_NAME`: decodes and checks every argument, calls the
/// library (or the server's hand-written `overrides::NAME`) and encodes
/// the reply.
fn server_func(o: &mut String, f: &Func, st: &Settings) {
    let ok = &st.success;
    let _ = writeln!(o, "{ALLOW}\nfn d_{}(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {{", f.name);
    let mut sec = DecoderText::default();
    let mut exprs = Vec::new();
    for (i, a) in f.args.iter().enumerate() {
        let expr = match server_output(o, &mut sec, f, ok, a) {
            Some(expr) => expr,
            None => server_input(o, &mut sec, f, st, i, a),
        };
        exprs.push(a.server.clone().unwrap_or(expr));
    }
    if let Ret::New(_) = f.ret {
        o.push_str("    let new_id = t.new_id(d)?;\n");
    }
    o.push_str("    d.finish().map_err(bad)?;\n");
    o.push_str(&sec.post);
    for c in &f.attrs.checks {
        let _ = writeln!(
            o,
            "    // SAFETY: the check reads only what the decoder validated (handles\n    // from the table, buffers of the sizes checked above).\n    unsafe {{ {c} }}?;"
        );
    }
    let args = exprs.join(", ");
    o.push_str("    // SAFETY: every pointer passed is to memory owned by this frame, sized as\n");
    o.push_str(
        "    // the call requires (checked above); every handle came from the tenant's table.\n",
    );
    if f.attrs.server_override {
        let _ = writeln!(
            o,
            "    let ret = unsafe {{ overrides::{}(t, {args}) }};",
            f.name
        );
    } else {
        let _ = writeln!(o, "    let ret = unsafe {{ ffi::{}({args}) }};", f.name);
    }
    match &f.ret {
        Ret::Status => o.push_str("    let status = ret;\n"),
        Ret::New(k) => {
            let e = errcode_arg(f).unwrap_or("err");
            let _ = writeln!(
                o,
                "    let status = v_{e};\n    if status == {ok} {{ t.insert(new_id, {}, ret)?; }}",
                kind(k)
            );
        }
        Ret::Custom { .. } => {
            let _ = writeln!(o, "    let status = {ok};");
        }
    }
    if let (Some(k), Some(a)) = (&f.attrs.retain, f.args.first()) {
        let _ = writeln!(
            o,
            "    if status == {ok} {{ t.retained(id_{}, {}); }}",
            a.name,
            kind(k)
        );
    }
    if let (Some(k), Some(a)) = (&f.attrs.release, f.args.first()) {
        let _ = writeln!(
            o,
            "    if status == {ok} {{ t.released(id_{}, {}); }}",
            a.name,
            kind(k)
        );
    }
    // What the library was passed for each written argument (a custom
    // type's pointer, say): where the call wrote.
    for w in &f.attrs.writes {
        if let Some(i) = f.args.iter().position(|a| &a.name == w) {
            let _ = writeln!(o, "    t.wrote(({}) as usize as u64);", exprs[i]);
        }
    }
    o.push_str(&sec.after);
    o.push_str("    e.u8(1);\n");
    o.push_str(&sec.out);
    o.push_str(&sec.recycle);
    o.push_str("    Ok(status)\n}\n\n");
}

/// The parts of a decoder's text that follow the argument decoding, each
/// built up argument by argument and written out in this order.
#[derive(Default)]
struct DecoderText {
    /// Checks and buffers that need every argument decoded: after
    /// `d.finish()`, before the call.
    post: String,
    /// What the call's status settles (new objects committed).
    after: String,
    /// The reply's outputs, encoded after the status.
    out: String,
    /// Buffers handed back, once encoded, to serve the next call.
    recycle: String,
}

/// Decodes an output argument: whether the client wants it, the buffer
/// the library writes it to, and how the reply carries it back. `None`
/// for an input argument.
fn server_output(
    o: &mut String,
    sec: &mut DecoderText,
    f: &Func,
    ok: &str,
    a: &Arg,
) -> Option<String> {
    let n = &a.name;
    let expr = match &a.ty {
        Ty::OutBytes { size } | Ty::OutInfo { size, .. } => {
            let _ = writeln!(o, "    let p_{n} = d.bool().map_err(bad)?;");
            let _ = writeln!(
                sec.post,
                "    let mut v_{n} = t.out_buf(p_{n}, {})?;",
                size_expr("v_", size)
            );
            // Encoded by now: the buffer serves the next call.
            let _ = writeln!(sec.recycle, "    t.give_back(v_{n});");
            if matches!(a.ty, Ty::OutInfo { .. }) {
                let _ = writeln!(
                    sec.out,
                    "    t.info_out(e, v_{n}.as_deref_mut(), func::{}, v_param_name, status)?;",
                    f.name
                );
            } else if matches!(f.ret, Ret::Status) {
                // A failed call wrote nothing the caller may rely on;
                // sending the buffer back would make the client copy
                // `size` bytes into an application buffer that the
                // library (natively) never touched.
                let _ = writeln!(
                    sec.out,
                    "    e.opt_bytes(if status == {ok} {{ v_{n}.as_deref() }} else {{ None }});"
                );
            } else {
                // Creation calls report per-device results (e.g.
                // binary_status) along with their error.
                let _ = writeln!(sec.out, "    e.opt_bytes(v_{n}.as_deref());");
            }
            format!("opt_mut_ptr(&mut v_{n})")
        }
        Ty::OutScalar(s) => {
            let _ = writeln!(o, "    let p_{n} = d.bool().map_err(bad)?;");
            let _ = writeln!(sec.post, "    let mut v_{n}: {} = 0;", s.rust());
            let _ = writeln!(
                sec.out,
                "    e.{}(v_{n});",
                if *s == Scalar::I32 {
                    "i32"
                } else if s.rust() == "u32" {
                    "u32"
                } else {
                    "u64"
                }
            );
            if s.rust() == "usize" {
                // usize travels as u64
                sec.out = sec
                    .out
                    .replace(&format!("e.u64(v_{n});"), &format!("e.usize(v_{n});"));
            }
            if f.args.iter().any(|a| matches!(a.ty, Ty::OutInfo { .. })) {
                // An info query's size_ret is optional by the API and
                // changes nothing else, but PoCL writes some through
                // NULL (CL_CONTEXT_PROPERTIES of a context made without
                // any: found by the dispatch fuzzer, a SEGV in the
                // tenant). The library always gets one to write.
                format!("&mut v_{n}")
            } else {
                format!("if p_{n} {{ &mut v_{n} }} else {{ std::ptr::null_mut() }}")
            }
        }
        Ty::OutNew { kind: k } => {
            let _ = writeln!(o, "    let mut v_{n} = t.out_new(d)?;");
            let _ = writeln!(
                sec.after,
                "    t.commit_new(&mut v_{n}, {}, status);",
                kind(k)
            );
            format!("v_{n}.ptr()")
        }
        Ty::OutHandles { kind: k, count } => {
            let _ = writeln!(o, "    let p_{n} = d.bool().map_err(bad)?;");
            let _ = writeln!(
                sec.post,
                "    let mut v_{n} = t.out_handles(p_{n}, v_{count} as u64)?;"
            );
            let _ = writeln!(
                sec.out,
                "    t.encode_handles(e, v_{n}.as_deref(), {}, status);",
                kind(k)
            );
            format!("opt_mut_vec_ptr(&mut v_{n})")
        }
        Ty::Errcode => {
            let _ = writeln!(sec.post, "    let mut v_{n}: i32 = 0;");
            format!("&mut v_{n}")
        }
        _ => return None,
    };
    Some(expr)
}

/// Decodes and checks an input argument (outputs are `server_output`'s);
/// returns the expression the library call passes for it.
fn server_input(
    o: &mut String,
    sec: &mut DecoderText,
    f: &Func,
    st: &Settings,
    i: usize,
    a: &Arg,
) -> String {
    let n = &a.name;
    let refcounting = f.attrs.retain.is_some() || f.attrs.release.is_some();
    match &a.ty {
        Ty::Scalar(s) => {
            let m = s.rust();
            match s {
                Scalar::F32 => {
                    let _ = writeln!(o, "    let v_{n} = f32::from_bits(d.u32().map_err(bad)?);");
                }
                Scalar::F64 => {
                    let _ = writeln!(o, "    let v_{n} = f64::from_bits(d.u64().map_err(bad)?);");
                }
                _ => {
                    let _ = writeln!(o, "    let v_{n} = d.{m}().map_err(bad)?;");
                }
            }
            format!("v_{n}")
        }
        Ty::Handle { kind: k, optional } => {
            if i == 0 && refcounting {
                let _ = writeln!(
                    o,
                    "    let (v_{n}, id_{n}) = t.handle_with_id(d, {})?;",
                    kind(k)
                );
                // A release must match a reference the client holds,
                // or it would drop one the server or a parent object
                // holds and leave a dangling handle in the table.
                if f.attrs.release.is_some() {
                    let _ = writeln!(o, "    t.check_release(id_{n}, {})?;", kind(k));
                }
            } else if *optional {
                let _ = writeln!(o, "    let v_{n} = t.opt_handle(d, {})?;", kind(k));
            } else {
                let _ = writeln!(o, "    let v_{n} = t.handle(d, {})?;", kind(k));
            }
            format!("v_{n}")
        }
        Ty::HandleArray { kind: k, count } => {
            // A wait list's faults have their own code; any other list's
            // are the kind's (or, for a missing list, the API's invalid value).
            let wait_list = n == "event_wait_list";
            let bad_entry = if wait_list {
                named(&st.invalid_wait_list, "invalid_wait_list").into_owned()
            } else {
                format!("{}.invalid()", kind(k))
            };
            let _ = writeln!(
                o,
                "    let v_{n} = t.handles(d, {}, {bad_entry})?;",
                kind(k)
            );
            let _ = writeln!(
                sec.post,
                "    check_count(v_{n}.as_deref(), v_{count} as u64, {})?;",
                if wait_list {
                    named(&st.invalid_wait_list, "invalid_wait_list")
                } else {
                    named(&st.invalid_value, "invalid_value")
                }
            );
            format!("opt_vec_ptr(&v_{n})")
        }
        Ty::InBytes { size } => {
            let _ = writeln!(o, "    let v_{n} = d.opt_bytes().map_err(bad)?;");
            let _ = writeln!(
                sec.post,
                "    check_len(v_{n}, {})?;",
                size_expr("v_", size)
            );
            format!("opt_ptr(v_{n})")
        }
        Ty::DevPtr { size } => {
            let _ = writeln!(o, "    let v_{n} = d.u64().map_err(bad)?;");
            let sz = size
                .as_ref()
                .map_or("0".to_string(), |s| size_expr("v_", s));
            let _ = writeln!(sec.post, "    let v_{n} = t.devptr(v_{n}, {sz})?;");
            format!("v_{n}")
        }
        Ty::Str => {
            let _ = writeln!(o, "    let v_{n} = cstr(d.opt_bytes().map_err(bad)?)?;");
            format!("opt_cstr(&v_{n})")
        }
        Ty::Callback { kind: k, .. } => {
            let _ = writeln!(
                o,
                "    let v_{n} = t.callback(d, CallbackKind::{})?;",
                kind_variant(k)
            );
            format!("v_{n}.func()")
        }
        Ty::UserData => {
            let cb = f
                .args
                .iter()
                .find(|c| matches!(&c.ty, Ty::Callback { userdata, .. } if userdata == n))
                .map(|c| c.name.clone())
                .unwrap_or_default();
            format!("v_{cb}.data()")
        }
        Ty::Custom { name, deps, .. } => {
            let earlier: Vec<&str> = f.args[..i].iter().map(|a| a.name.as_str()).collect();
            let deps: String = deps
                .iter()
                .filter(|d| earlier.contains(&d.as_str()))
                .map(|d| format!(", &v_{d}"))
                .collect();
            let _ = writeln!(
                o,
                "    let mut v_{n} = custom::{name}::decode(t, d{deps})?;"
            );
            let _ = writeln!(sec.out, "    v_{n}.reply(t, e, status)?;");
            format!("v_{n}.arg()")
        }
        // Outputs: server_output answered them before this is called.
        _ => String::new(),
    }
}

/// The server: the real library's declarations (`mod ffi`), one decoder per
/// function and `dispatch`.
///
/// The including module must bring into scope `Tenant`, `Kind`,
/// `CallbackKind`, `Decoder`, `Encoder`, `bad`, `check_count`, `check_len`,
/// `cstr`, `opt_cstr`, `opt_ptr`, `opt_mut_ptr`, `opt_vec_ptr`,
/// `opt_mut_vec_ptr`, the `func` ids, the `custom` and `overrides` modules,
/// the API's statuses its `api` block names, and `c_void`/`c_char`.
pub fn gen_server(api: &Api) -> String {
    let mut o = String::new();
    if api.settings.dlopen {
        ffi_dlopen(&mut o, api);
    } else {
        o.push_str("/// The real OpenCL library, reached through the system's ICD loader.\n");
        o.push_str("#[allow(non_snake_case, clippy::too_many_arguments, dead_code)]\npub mod ffi {\n    use std::ffi::{c_char, c_void};\n    #[link(name = \"OpenCL\")]\n    extern \"C\" {\n");
        for f in api.funcs.iter().filter(|f| !f.attrs.unsupported) {
            let _ = writeln!(
                o,
                "        pub fn {}({}) -> {};",
                f.name,
                c_params(f),
                f.ret.ctype()
            );
        }
        o.push_str("    }\n}\n\n");
    }
    for f in &api.funcs {
        if !f.attrs.manual && !f.attrs.unsupported && !f.attrs.client_only {
            server_func(&mut o, f, &api.settings);
        }
    }
    o.push_str("/// Decodes, validates and runs one request; `Err` carries the status of\n");
    o.push_str("/// a request refused before reaching the library.\n");
    o.push_str("pub fn dispatch(t: &mut Tenant, func: u32, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {\n    match func {\n");
    for f in &api.funcs {
        if f.attrs.unsupported || f.attrs.client_only {
            continue;
        }
        if f.attrs.manual {
            let _ = writeln!(
                o,
                "        func::{} => overrides::d_{}(t, d, e),",
                f.name, f.name
            );
        } else {
            let _ = writeln!(o, "        func::{} => d_{}(t, d, e),", f.name, f.name);
        }
    }
    let _ = writeln!(
        o,
        "        _ => Err({}),\n    }}\n}}",
        api.settings.unsupported
    );
    o
}

/// Forwarded functions: what the server calls and the client exports.
fn forwarded(api: &Api) -> impl Iterator<Item = &Func> {
    api.funcs
        .iter()
        .filter(|f| !f.attrs.unsupported && !f.attrs.client_only)
}

/// `mod ffi` for a library opened at run time: a table of entry points
/// that the including module fills (`table()`), and for each entry point
/// returning a status a function that calls through it, or returns
/// `NO_LIBRARY` when the library (or that entry point) is missing.
fn ffi_dlopen(o: &mut String, api: &Api) {
    o.push_str("/// The real library's entry points, opened at run time.\n");
    o.push_str("#[allow(non_snake_case, clippy::too_many_arguments, dead_code, clippy::missing_safety_doc)]\npub mod ffi {\n    use std::ffi::{c_char, c_void};\n\n");
    o.push_str("    /// Entry points found in the library (`None`: absent).\n    #[derive(Default)]\n    pub struct Table {\n");
    for f in forwarded(api) {
        let _ = writeln!(
            o,
            "        pub {}: Option<unsafe extern \"C\" fn({}) -> {}>,",
            f.name,
            c_params(f),
            f.ret.ctype()
        );
    }
    o.push_str("    }\n\n    impl Table {\n        /// Looks every entry point up with `sym` (NULL: absent).\n        ///\n        /// # Safety\n        /// `sym` returns NULL or the address of the named function, whose C\n        /// signature is the one described.\n        pub unsafe fn load(sym: &dyn Fn(&str) -> *mut c_void) -> Table {\n            Table {\n");
    for f in forwarded(api) {
        let _ = writeln!(
            o,
            "                {n}: {{ let p = sym(\"{n}\"); if p.is_null() {{ None }} else {{ // SAFETY: `p` is not NULL, so by `load`'s contract it is `{n}`, whose C signature this is.\n                    Some(unsafe {{ std::mem::transmute::<*mut c_void, unsafe extern \"C\" fn({}) -> {}>(p) }}) }} }},",
            c_params(f),
            f.ret.ctype(),
            n = f.name
        );
    }
    o.push_str("            }\n        }\n    }\n\n");
    // Calls that return a status get a function that answers NO_LIBRARY
    // when the entry point is missing; others are reached through the table.
    for f in forwarded(api).filter(|f| f.ret == Ret::Status) {
        let names: Vec<&str> = f.args.iter().map(|a| a.name.as_str()).collect();
        let _ = writeln!(
            o,
            "    pub unsafe fn {n}({}) -> {} {{\n        match super::table().{n} {{\n            // SAFETY: `f` is the library's {n} with this signature (`Table::load`), and the\n            // arguments are valid as {n} requires: this function's contract with its caller.\n            Some(f) => unsafe {{ f({}) }},\n            None => super::NO_LIBRARY,\n        }}\n    }}",
            c_params(f),
            f.ret.ctype(),
            names.join(", "),
            n = f.name
        );
    }
    o.push_str("}\n\n");
}
