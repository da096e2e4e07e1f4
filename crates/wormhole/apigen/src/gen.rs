//! Code generators. Each returns Rust source text for `include!`.

use std::fmt::Write;

use crate::{
    kind_variant, Api, Drains, Func, InfoHandle, Ret, Scalar, Settings, Size, Slot, StubRet, Ty,
};

const ALLOW: &str = "#[allow(non_snake_case, unused_variables, unused_mut, unused_unsafe, clippy::too_many_arguments, clippy::needless_late_init, clippy::let_and_return, clippy::unnecessary_cast, clippy::redundant_closure_call, clippy::let_unit_value)]";

fn c_params(f: &Func) -> String {
    f.args
        .iter()
        .map(|a| format!("{}: {}", a.name, a.ty.ctype()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A status the description names in its `api` block, or, where it names
/// none, a compile error in the generated code that says which to add.
fn named<'a>(status: &'a Option<String>, setting: &str) -> std::borrow::Cow<'a, str> {
    match status {
        Some(name) => name.into(),
        None => format!("compile_error!(\"the api block names no `{setting}` status\")").into(),
    }
}

fn kind(k: &str) -> String {
    format!("Kind::{}", kind_variant(k))
}

fn size_expr(prefix: &str, s: &Size) -> String {
    if s.is_const() {
        return format!("({}u64).saturating_mul({})", s.arg, s.mult);
    }
    format!("({prefix}{} as u64).saturating_mul({})", s.arg, s.mult)
}

fn errcode_arg(f: &Func) -> Option<&str> {
    f.args
        .iter()
        .find(|a| a.ty == Ty::Errcode)
        .map(|a| a.name.as_str())
}

/// `pub fn NAME(func: u32) -> bool`: whether `func` is one of the functions
/// `pred` picks, their ids listed one by one (whether or not some run on).
fn id_predicate(o: &mut String, api: &Api, doc: &str, name: &str, pred: impl Fn(&Func) -> bool) {
    let ids: Vec<String> = api
        .funcs
        .iter()
        .filter(|f| pred(f))
        .map(|f| f.id.to_string())
        .collect();
    let ids = if ids.is_empty() {
        "u32::MAX".to_string()
    } else {
        ids.join(" | ")
    };
    let _ = writeln!(
        o,
        "/// {doc}\n#[allow(clippy::manual_range_patterns)]\npub fn {name}(func: u32) -> bool {{\n    matches!(func, {ids})\n}}\n"
    );
}

/// Function ids, names and the info parameters that hold handles.
pub fn gen_common(api: &Api) -> String {
    let mut o = String::new();
    o.push_str("/// Function ids on the wire: positions in the API description.\n");
    o.push_str("#[allow(non_upper_case_globals)]\npub mod func {\n");
    for f in &api.funcs {
        let _ = writeln!(o, "    pub const {}: u32 = {};", f.name, f.id);
    }
    o.push_str("}\n\n/// Function names, indexed by id.\npub const FUNC_NAMES: &[&str] = &[\n");
    for f in &api.funcs {
        let _ = writeln!(o, "    \"{}\",", f.name);
    }
    o.push_str("];\n\n");
    id_predicate(
        &mut o,
        api,
        "Whether a function is forwarded without waiting for a reply.",
        "is_async",
        |f| f.attrs.is_async,
    );
    id_predicate(
        &mut o,
        api,
        "Whether a function returns no status (C `void`, or what the client\n/// makes itself): a failure of one sent without waiting is not a deferred\n/// failure for a later call to report.",
        "no_status",
        |f| matches!(&f.ret, Ret::Custom { .. }),
    );
    o.push_str("/// What the value of an info parameter holds, when it holds handles.\n");
    o.push_str("pub fn info_handle(func: u32, param: u32) -> Option<InfoHandle> {\n    match (func, param) {\n");
    for f in &api.funcs {
        for a in &f.args {
            if let Ty::OutInfo { handles, .. } = &a.ty {
                for (p, h) in handles {
                    let v = match h {
                        InfoHandle::One(k) => format!("InfoHandle::One({})", kind(k)),
                        InfoHandle::Array(k) => format!("InfoHandle::Array({})", kind(k)),
                        InfoHandle::Custom => "InfoHandle::Custom".to_string(),
                    };
                    let _ = writeln!(o, "        ({}, {:#x}) => Some({v}),", f.id, p);
                }
            }
        }
    }
    o.push_str("        _ => None,\n    }\n}\n");
    o
}

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
         // SAFETY: the caller's contract is the query's; `fetch` passes it on\n    \
         // with the caller's arguments or with a buffer of ours and its size.\n    \
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
            for cb in &callbacks {
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
            for cb in &callbacks {
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

fn server_func(o: &mut String, f: &Func, st: &Settings) {
    let ok = &st.success;
    let _ = writeln!(o, "{ALLOW}\nfn d_{}(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {{", f.name);
    let refcounting = f.attrs.retain.is_some() || f.attrs.release.is_some();
    let mut post = String::new();
    let mut exprs = Vec::new();
    let mut out = String::new();
    let mut after = String::new();
    let mut recycle = String::new();
    for (i, a) in f.args.iter().enumerate() {
        let n = &a.name;
        let expr = match &a.ty {
            Ty::Scalar(s) => {
                let m = match s {
                    Scalar::U32 | Scalar::Bool => "u32",
                    Scalar::I32 => "i32",
                    Scalar::U64 | Scalar::Bitfield => "u64",
                    Scalar::Usize => "usize",
                    Scalar::I64 => "i64",
                    Scalar::F32 => "f32",
                    Scalar::F64 => "f64",
                };
                match s {
                    Scalar::F32 => {
                        let _ =
                            writeln!(o, "    let v_{n} = f32::from_bits(d.u32().map_err(bad)?);");
                    }
                    Scalar::F64 => {
                        let _ =
                            writeln!(o, "    let v_{n} = f64::from_bits(d.u64().map_err(bad)?);");
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
                    post,
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
                let _ = writeln!(post, "    check_len(v_{n}, {})?;", size_expr("v_", size));
                format!("opt_ptr(v_{n})")
            }
            Ty::OutBytes { size } | Ty::OutInfo { size, .. } => {
                let _ = writeln!(o, "    let p_{n} = d.bool().map_err(bad)?;");
                let _ = writeln!(
                    post,
                    "    let mut v_{n} = t.out_buf(p_{n}, {})?;",
                    size_expr("v_", size)
                );
                // Encoded by now: the buffer serves the next call.
                let _ = writeln!(recycle, "    t.give_back(v_{n});");
                if matches!(a.ty, Ty::OutInfo { .. }) {
                    let _ = writeln!(
                        out,
                        "    t.info_out(e, v_{n}.as_deref_mut(), func::{}, v_param_name, status)?;",
                        f.name
                    );
                } else if matches!(f.ret, Ret::Status) {
                    // A failed call wrote nothing the caller may rely on;
                    // sending the buffer back would make the client copy
                    // `size` bytes into an application buffer that the
                    // library (natively) never touched.
                    let _ = writeln!(
                        out,
                        "    e.opt_bytes(if status == {ok} {{ v_{n}.as_deref() }} else {{ None }});"
                    );
                } else {
                    // Creation calls report per-device results (e.g.
                    // binary_status) along with their error.
                    let _ = writeln!(out, "    e.opt_bytes(v_{n}.as_deref());");
                }
                format!("opt_mut_ptr(&mut v_{n})")
            }
            Ty::OutScalar(s) => {
                let _ = writeln!(o, "    let p_{n} = d.bool().map_err(bad)?;");
                let _ = writeln!(post, "    let mut v_{n}: {} = 0;", s.rust());
                let _ = writeln!(
                    out,
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
                    out = out.replace(&format!("e.u64(v_{n});"), &format!("e.usize(v_{n});"));
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
                let _ = writeln!(after, "    t.commit_new(&mut v_{n}, {}, status);", kind(k));
                format!("v_{n}.ptr()")
            }
            Ty::OutHandles { kind: k, count } => {
                let _ = writeln!(o, "    let p_{n} = d.bool().map_err(bad)?;");
                let _ = writeln!(
                    post,
                    "    let mut v_{n} = t.out_handles(p_{n}, v_{count} as u64)?;"
                );
                let _ = writeln!(
                    out,
                    "    t.encode_handles(e, v_{n}.as_deref(), {}, status);",
                    kind(k)
                );
                format!("opt_mut_vec_ptr(&mut v_{n})")
            }
            Ty::Errcode => {
                let _ = writeln!(post, "    let mut v_{n}: i32 = 0;");
                format!("&mut v_{n}")
            }
            Ty::DevPtr { size } => {
                let _ = writeln!(o, "    let v_{n} = d.u64().map_err(bad)?;");
                let sz = size
                    .as_ref()
                    .map_or("0".to_string(), |s| size_expr("v_", s));
                let _ = writeln!(post, "    let v_{n} = t.devptr(v_{n}, {sz})?;");
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
                let _ = writeln!(out, "    v_{n}.reply(t, e, status)?;");
                format!("v_{n}.arg()")
            }
        };
        exprs.push(a.server.clone().unwrap_or(expr));
    }
    if let Ret::New(_) = f.ret {
        o.push_str("    let new_id = t.new_id(d)?;\n");
    }
    o.push_str("    d.finish().map_err(bad)?;\n");
    o.push_str(&post);
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
    o.push_str(&after);
    o.push_str("    e.u8(1);\n");
    o.push_str(&out);
    o.push_str(&recycle);
    o.push_str("    Ok(status)\n}\n\n");
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
            "                {n}: {{ let p = sym(\"{n}\"); if p.is_null() {{ None }} else {{ // SAFETY: the caller's contract: `p` is this function.\n                    Some(unsafe {{ std::mem::transmute::<*mut c_void, unsafe extern \"C\" fn({}) -> {}>(p) }}) }} }},",
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
            "    pub unsafe fn {n}({}) -> {} {{\n        match super::table().{n} {{\n            // SAFETY: the caller's contract is the library function's.\n            Some(f) => unsafe {{ f({}) }},\n            None => super::NO_LIBRARY,\n        }}\n    }}",
            c_params(f),
            f.ret.ctype(),
            names.join(", "),
            n = f.name
        );
    }
    o.push_str("}\n\n");
}

/// ELF exports for a library that stands in for another: for every
/// function the client implements, a trampoline (in `global_asm!`) that
/// jumps to the Rust function under `path` (`PATH::gen::NAME`, or
/// `PATH::manual::NAME` for hand-written ones) and carries the symbol
/// version `node` (e.g. `libcudart.so.13`), as the real library's do, so
/// programs linked against the real library bind to ours.
///
/// The trampoline is a plain jump (`jmp` on x86-64, `b` on AArch64; other
/// architectures get no exports), so the callee sees the caller's
/// arguments untouched. A version script defining `node` (see
/// [`gen_version_script`]) must be passed to the linker.
pub fn gen_exports(api: &Api, path: &str, node: &str) -> String {
    exports_to(api, node, |f, variant| match variant {
        Some(sfx) if ptsz_stream(f).is_some() => format!("{path}::gen::{}{sfx}", f.name),
        _ => format!("{path}::{}::{}", client_module(f), f.name),
    })
}

/// The client crate's public module that implements a function: its
/// generated stubs, or the hand-written ones (`manual`).
fn client_module(f: &Func) -> &'static str {
    match impl_module(f) {
        "overrides" => "manual",
        generated => generated,
    }
}

/// The stream argument of a `ptsz` function, which its `_ptsz` variant
/// maps (None for one without a stream argument: its variant is itself).
fn ptsz_stream(f: &Func) -> Option<&str> {
    if f.attrs.per_thread != Some(crate::PerThread::Ptsz) {
        return None;
    }
    f.args
        .iter()
        .find(|a| matches!(a.name.as_str(), "stream" | "hStream") && a.ty.ctype() == "*mut c_void")
        .map(|a| a.name.as_str())
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
    // SAFETY: the caller's contract is `{name}`'s.
    unsafe {{ {target}({args}) }}
}}
",
        name = f.name,
        params = c_params(f),
        ret = f.ret.ctype(),
        args = args.join(", "),
    );
}

/// Where the client implements a function: generated, or by hand.
fn impl_module(f: &Func) -> &'static str {
    if f.attrs.client_override || f.attrs.manual || f.attrs.client_only {
        "overrides"
    } else {
        "gen"
    }
}

/// The functions a stand-in library exports, in description order: all
/// of them. An `unsupported` one answers the API's unsupported status
/// without being forwarded, which a program (or a framework whose loader
/// binds every symbol at once, as Python's does) can survive where a
/// missing symbol stops it.
fn exported(api: &Api) -> impl Iterator<Item = &Func> {
    api.funcs.iter()
}

/// Versioned trampolines for every exported function, jumping to `target`.
/// `target(f, None)` is where f's export jumps; `target(f, Some(suffix))`
/// where its per-thread variant's does (see `Attrs::per_thread`).
fn exports_to(api: &Api, node: &str, target: impl Fn(&Func, Option<&str>) -> String) -> String {
    // (architecture, the assembler's type prefix, the jump instruction)
    let arches = [("x86_64", '@', "jmp"), ("aarch64", '%', "b")];
    let mut o = String::new();
    for (arch, t, jump) in arches {
        let mut lines = vec![format!(
            ".pushsection .text.wormhole_exports,\"ax\",{t}progbits"
        )];
        let mut syms = Vec::new();
        let variants =
            exported(api).filter_map(|f| f.attrs.per_thread.map(|v| (f, Some(v.suffix()))));
        let all = exported(api).map(|f| (f, None)).chain(variants);
        for (i, (f, sfx)) in all.enumerate() {
            let name = format!("{}{}", f.name, sfx.unwrap_or(""));
            let local = format!("wormhole_x_{name}");
            lines.push(format!(".globl {local}"));
            lines.push(format!(".type {local},{t}function"));
            lines.push(format!("{local}: {jump} {{f{i}}}"));
            lines.push(format!(".symver {local}, {name}@@{node}"));
            syms.push(format!("f{i} = sym {}", target(f, sfx)));
        }
        lines.push(".popsection".into());
        let _ = writeln!(
            o,
            "#[cfg(target_arch = \"{arch}\")]\nstd::arch::global_asm!("
        );
        for l in lines {
            let _ = writeln!(o, "    {l:?},");
        }
        for s in syms {
            let _ = writeln!(o, "    {s},");
        }
        o.push_str(");\n");
    }
    o
}

/// A fingerprint of the exported functions' names and C signatures: the
/// forwarding table ([`gen_forward_table`]) and the forwarders that index
/// it ([`gen_forwarders`]) are built from the same description only when
/// their fingerprints agree.
pub fn fingerprint(api: &Api) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in exported(api) {
        let sig = format!("{}({})->{};", f.name, c_params(f), f.ret.ctype());
        for b in sig.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The client side of a library forwarded through another one: the
/// addresses of the client's implementations of every exported function,
/// in description order (`forward_table()`), with the description's
/// [`fingerprint`]. The including module must have the generated stubs
/// (from [`gen_client`]) and `overrides` in scope.
pub fn gen_forward_table(api: &Api) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "/// The description's fingerprint (wormhole_apigen::fingerprint).\npub const FINGERPRINT: u64 = {:#x};",
        fingerprint(api)
    );
    let n = exported(api).count();
    let _ = writeln!(
        o,
        "/// The number of exported functions.\npub const FORWARD_LEN: usize = {n};"
    );
    o.push_str("/// The client's implementation of each exported function, in description order.\npub fn forward_table() -> [usize; FORWARD_LEN] {\n    [\n");
    for f in exported(api) {
        let m = impl_module(f);
        let e = if m == "gen" {
            f.name.clone()
        } else {
            format!("overrides::{}", f.name)
        };
        let _ = writeln!(o, "        {e} as *const () as usize,");
    }
    o.push_str("    ]\n}\n");
    o
}

/// A stand-in library that forwards every call to the client runtime in
/// another library (see [`gen_forward_table`]): one `extern "C"` function
/// per exported function that calls entry `i` of the table the including
/// module's `table(i)` returns, or answers `fallback_status()` (for a
/// function returning a status) or `fallback_NAME()` (a `custom NAME`
/// return) when there is none; plus the versioned ELF exports (`node`).
pub fn gen_forwarders(api: &Api, node: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "/// The description's fingerprint (wormhole_apigen::fingerprint).\npub const FINGERPRINT: u64 = {:#x};",
        fingerprint(api)
    );
    let n = exported(api).count();
    let _ = writeln!(
        o,
        "/// The number of exported functions.\npub const FORWARD_LEN: usize = {n};\n"
    );
    o.push_str("/// One forwarder per exported function.\n#[allow(non_snake_case, unused_imports, clippy::too_many_arguments, clippy::missing_safety_doc, clippy::unused_unit)]\npub mod fwd {\n    use std::ffi::{c_char, c_void};\n    use super::*;\n\n");
    for (i, f) in exported(api).enumerate() {
        let types: Vec<String> = f.args.iter().map(|a| a.ty.ctype()).collect();
        let names: Vec<&str> = f.args.iter().map(|a| a.name.as_str()).collect();
        let ret = f.ret.ctype();
        let fallback = match &f.ret {
            Ret::Status => "fallback_status()".to_string(),
            Ret::Custom { ctype, .. } if ctype == "void" => "()".to_string(),
            Ret::Custom { name, .. } => format!("fallback_{name}()"),
            Ret::New(_) => "std::ptr::null_mut()".to_string(),
        };
        let _ = writeln!(
            o,
            "    pub unsafe extern \"C\" fn {name}({params}) -> {ret} {{\n        match table({i}) {{\n            // SAFETY: entry {i} of a table with this description's fingerprint is the\n            // client's implementation of {name}, whose C signature this is.\n            Some(p) => unsafe {{ std::mem::transmute::<usize, unsafe extern \"C\" fn({types}) -> {ret}>(p)({args}) }},\n            None => {fallback},\n        }}\n    }}\n",
            name = f.name,
            params = c_params(f),
            types = types.join(", "),
            args = names.join(", "),
        );
    }
    o.push_str("}\n\n");
    o.push_str(&exports_to(api, node, |f, _| format!("fwd::{}", f.name)));
    o
}

/// The linker version script that defines the version `node`.
pub fn gen_version_script(node: &str) -> String {
    format!("{node} {{\n}};\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn per_thread_variants_are_exported_and_map_the_null_stream() {
        let api = crate::parse(
            "api { kinds stream; success cudaSuccess; unsupported cudaErrorNotSupported; }\n\
             fn cudaMemcpyAsync(n: usize, stream: stream?) -> status ptsz;\n\
             fn cudaMemcpy(n: usize) -> status ptds;\n\
             fn cudaFree(n: usize) -> status;",
        )
        .expect("parse");
        let client = gen_client(&api);
        assert!(client.contains("pub unsafe extern \"C\" fn cudaMemcpyAsync_ptsz(n: usize, stream: *mut c_void) -> i32"), "{client}");
        assert!(
            client.contains(
                "let stream = if stream.is_null() { 2usize as *mut c_void } else { stream };"
            ),
            "{client}"
        );
        assert!(
            client.contains("unsafe { cudaMemcpyAsync(n, stream) }"),
            "{client}"
        );
        // A _ptds variant is the function itself: no wrapper.
        assert!(!client.contains("cudaMemcpy_ptds"), "{client}");
        let exports = gen_exports(&api, "c", "libx.so.1");
        assert!(
            exports.contains("cudaMemcpyAsync_ptsz@@libx.so.1"),
            "{exports}"
        );
        assert!(
            exports.contains("sym c::gen::cudaMemcpyAsync_ptsz"),
            "{exports}"
        );
        assert!(exports.contains("cudaMemcpy_ptds@@libx.so.1"), "{exports}");
        assert!(!exports.contains("cudaFree_pt"), "{exports}");
    }

    #[test]
    fn a_cached_query_asks_through_its_fetch_stub() {
        let api = crate::parse(
            "fn clGetKernelWorkGroupInfo(kernel: kernel, device: device?, param_name: u32, \
             param_value_size: usize, param_value: out info[param_value_size]? {}, \
             param_value_size_ret: out usize?) -> status cached=except(0x11B2);",
        )
        .expect("parse");
        let client = gen_client(&api);
        assert!(
            client.contains("extra: key_of(device, Kind::Device)"),
            "{client}"
        );
        assert!(client.contains("mutable: &[0x11b2]"), "{client}");
        assert!(
            client.contains("fetch_clGetKernelWorkGroupInfo(kernel, device, param_name, s, v, r)")
        );
        assert!(client.contains("pub unsafe extern \"C\" fn fetch_clGetKernelWorkGroupInfo("));
    }

    #[test]
    fn an_async_creation_posts_under_its_own_id() {
        let api = parse(
            "fn clMake(ctx: context, n: usize shape=class(n), errcode_ret: errcode) -> new mem async;\n\
             fn clPlain(ctx: context, n: usize, errcode_ret: errcode) -> new mem;",
        )
        .expect("parse");
        let client = gen_client(&api);
        let make = &client[..client.find("fn clPlain").expect("clPlain")];
        assert!(
            make.contains("c.enc.usize(n); c.shape((class(n)) as u64);"),
            "{make}"
        );
        assert!(
            make.contains("let status = c.finish_async_create()?;"),
            "{make}"
        );
        assert!(make.contains("adopt_id(new_id, Kind::Mem)"), "{make}");
        let plain = &client[client.find("fn clPlain").expect("clPlain")..];
        assert!(plain.contains("r.adopt(new_id, Kind::Mem)") && !plain.contains("finish_async"));
        assert!(
            crate::parse("fn f(n: usize shape=g(n)) -> status;").is_err(),
            "shape= on a synchronous call"
        );
    }

    #[test]
    fn generated_code_mentions_every_piece() {
        let api = parse(
            "fn clGetThingInfo(thing: device, param_name: u32, param_value_size: usize,\n\
             param_value: out info[param_value_size]? {0x10: platform}, param_value_size_ret: out usize?) -> status;\n\
             fn clMake(ctx: context, errcode_ret: errcode) -> new mem;\n\
             dispatch { clGetThingInfo clMake other!int }",
        )
        .expect("parse");
        let common = gen_common(&api);
        assert!(common.contains("pub const clMake: u32 = 1;"));
        assert!(common.contains("(0, 0x10) => Some(InfoHandle::One(Kind::Platform))"));
        let client = gen_client(&api);
        assert!(client.contains("pub unsafe extern \"C\" fn clMake(ctx: *mut c_void, errcode_ret: *mut i32) -> *mut c_void"));
        assert!(client.contains("unsupported_int as *const c_void"));
        let server = gen_server(&api);
        assert!(server.contains("func::clMake => d_clMake(t, d, e),"));
        assert!(server.contains("t.insert(new_id, Kind::Mem, ret)"));
    }
}

#[cfg(test)]
mod forward_tests {
    use super::*;
    use crate::parse;

    #[test]
    fn forwarders_index_the_table_in_description_order() {
        let src = "api { kinds h; success OK; unsupported NO; first_id 0x20000; load dlopen; }\n\
                   fn a(x: h, s: i64, f: f32, g: f64) -> status;\n\
                   fn b(x: h) -> custom name(*const c_char) client-only;\n\
                   fn c(x: h) -> status unsupported;";
        let api = parse(src).expect("parse");
        let fwd = gen_forwarders(&api, "libx.so.1");
        assert!(fwd.contains("pub const FORWARD_LEN: usize = 3;"));
        assert!(fwd.contains("match table(0)"));
        assert!(fwd.contains("unsafe extern \"C\" fn(*mut c_void, i64, f32, f64) -> i32"));
        assert!(fwd.contains("None => fallback_status()"));
        assert!(fwd.contains("None => fallback_name()"));
        assert!(fwd.contains(".symver wormhole_x_b, b@@libx.so.1"));
        assert!(
            fwd.contains(".symver wormhole_x_c, c@@libx.so.1"),
            "unsupported: exported, to refuse"
        );
        let table = gen_forward_table(&api);
        assert!(table.contains("        a as *const () as usize,\n        overrides::b as"));
        // Both sides agree on the fingerprint; another signature changes it.
        assert!(table.contains(&format!("{:#x}", fingerprint(&api))));
        let other = parse(&src.replace("f: f32", "f: f64")).expect("parse");
        assert_ne!(fingerprint(&api), fingerprint(&other));
        // Scalars by value: floats travel as their bits.
        let server = gen_server(&api);
        assert!(server.contains("let v_f = f32::from_bits(d.u32().map_err(bad)?);"));
        assert!(server.contains("let v_s = d.i64().map_err(bad)?;"));
        let client = gen_client(&api);
        assert!(client.contains("c.enc.u64(g.to_bits());"));
        assert!(
            parse("fn f(o: out f32?) -> status;").is_err(),
            "no float outputs"
        );
    }
}
