//! What both sides include: function ids, names, the predicates the
//! description's attributes make, and the info parameters that hold handles.

use std::fmt::Write;

use super::kind;
use crate::{Api, Func, InfoHandle, Ret, Ty};

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
        "Whether the description names every device memory a function may\n/// change (`writes=`): its decoder reports each, and no other memory is\n/// taken as changed.",
        "names_writes",
        |f| !f.attrs.writes.is_empty(),
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
