//! Tests that look at what several generators emit for one description.

use super::*;
use crate::parse;

/// Fails, showing `text`, unless `text` contains each of `pieces`.
#[track_caller]
fn assert_has(text: &str, pieces: &[&str]) {
    for p in pieces {
        assert!(text.contains(p), "missing {p:?} in:\n{text}");
    }
}

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
    assert_has(
        &client,
        &[
            "pub unsafe extern \"C\" fn cudaMemcpyAsync_ptsz(n: usize, stream: *mut c_void) -> i32",
            "let stream = if stream.is_null() { 2usize as *mut c_void } else { stream };",
            "unsafe { cudaMemcpyAsync(n, stream) }",
        ],
    );
    // A _ptds variant is the function itself: no wrapper.
    assert!(!client.contains("cudaMemcpy_ptds"), "{client}");
    let exports = gen_exports(&api, "c", "libx.so.1");
    assert_has(
        &exports,
        &[
            "cudaMemcpyAsync_ptsz@@libx.so.1",
            "sym c::gen::cudaMemcpyAsync_ptsz",
            "cudaMemcpy_ptds@@libx.so.1",
        ],
    );
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
    assert_has(
        &gen_client(&api),
        &[
            "extra: key_of(device, Kind::Device)",
            "mutable: &[0x11b2]",
            "fetch_clGetKernelWorkGroupInfo(kernel, device, param_name, s, v, r)",
            "pub unsafe extern \"C\" fn fetch_clGetKernelWorkGroupInfo(",
        ],
    );
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
    assert_has(
        make,
        &[
            "c.enc.usize(n); c.shape((class(n)) as u64);",
            "let status = c.finish_async_create()?;",
            "adopt_id(new_id, Kind::Mem)",
        ],
    );
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
    assert!(client.contains(
        "pub unsafe extern \"C\" fn clMake(ctx: *mut c_void, errcode_ret: *mut i32) -> *mut c_void"
    ));
    assert!(client.contains("unsupported_int as *const c_void"));
    let server = gen_server(&api);
    assert!(server.contains("func::clMake => d_clMake(t, d, e),"));
    assert!(server.contains("t.insert(new_id, Kind::Mem, ret)"));
}

#[test]
fn forwarders_index_the_table_in_description_order() {
    let src = "api { kinds h; success OK; unsupported NO; first_id 0x20000; load dlopen; }\n\
               fn a(x: h, s: i64, f: f32, g: f64) -> status;\n\
               fn b(x: h) -> custom name(*const c_char) client-only;\n\
               fn c(x: h) -> status unsupported;";
    let api = parse(src).expect("parse");
    let fwd = gen_forwarders(&api, "libx.so.1");
    assert_has(
        &fwd,
        &[
            "pub const FORWARD_LEN: usize = 3;",
            "match table(0)",
            "unsafe extern \"C\" fn(*mut c_void, i64, f32, f64) -> i32",
            "None => fallback_status()",
            "None => fallback_name()",
            ".symver wormhole_x_b, b@@libx.so.1",
            // An unsupported function is exported too, to refuse.
            ".symver wormhole_x_c, c@@libx.so.1",
        ],
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
