//! The description language's parser: small, line-aware, strict.

use crate::{
    Api, Arg, Attrs, Drains, Func, InfoHandle, ParseError, Ret, Scalar, Settings, Size, Slot,
    StubRet, Ty,
};

struct P<'a> {
    src: &'a str,
    pos: usize,
    /// The handle kinds known so far (the `api { }` block may change them).
    kinds: Vec<String>,
}

type R<T> = Result<T, ParseError>;

impl<'a> P<'a> {
    fn line(&self) -> usize {
        self.src[..self.pos].matches('\n').count() + 1
    }

    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(ParseError {
            line: self.line(),
            msg: msg.into(),
        })
    }

    fn skip_ws(&mut self) {
        loop {
            let rest = &self.src[self.pos..];
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with('#') {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.src[self.pos..].chars().next()
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.src[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> R<()> {
        if self.eat(s) {
            Ok(())
        } else {
            let got: String = self.src[self.pos..].chars().take(20).collect();
            self.err(format!("expected `{s}`, found `{got}`"))
        }
    }

    /// After white space, the longest run of characters that `part` accepts
    /// (not consumed).
    fn run_of(&mut self, part: impl Fn(char) -> bool) -> &'a str {
        self.skip_ws();
        let src: &'a str = self.src;
        let rest = &src[self.pos..];
        &rest[..rest.find(|c: char| !part(c)).unwrap_or(rest.len())]
    }

    fn ident(&mut self) -> R<String> {
        let name = self.run_of(|c| c.is_ascii_alphanumeric() || c == '_');
        if name.is_empty() {
            return self.err("expected a name");
        }
        self.pos += name.len();
        Ok(name.to_string())
    }

    fn number(&mut self) -> R<u64> {
        let text = self.run_of(|c| c.is_ascii_hexdigit() || c == 'x');
        let v = if let Some(h) = text.strip_prefix("0x") {
            u64::from_str_radix(h, 16)
        } else {
            text.parse()
        };
        match v {
            Ok(v) => {
                self.pos += text.len();
                Ok(v)
            }
            Err(_) => self.err(format!("bad number `{text}`")),
        }
    }

    /// Text up to (not including) any of `stops`, for C type spellings.
    fn until(&mut self, stops: &[char]) -> String {
        let text = self.run_of(|c| !stops.contains(&c));
        self.pos += text.len();
        text.trim().to_string()
    }

    /// A call expression `name(...)`, up to its matching parenthesis.
    fn call_expr(&mut self) -> R<String> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let open = match rest.find('(') {
            Some(i)
                if rest[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    && i > 0 =>
            {
                i
            }
            _ => return self.err("a check is a call: name(args)"),
        };
        let mut depth = 0i32;
        for (i, c) in rest.char_indices().skip(open) {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos += i + 1;
                        return Ok(rest[..=i].to_string());
                    }
                }
                _ => {}
            }
        }
        self.err("unterminated check")
    }

    /// A Rust expression, up to a `,` or `)` outside any brackets.
    fn expr(&mut self) -> R<String> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let mut depth = 0i32;
        for (i, c) in rest.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth > 0 => depth -= 1,
                ',' | ')' if depth == 0 => {
                    let e = rest[..i].trim().to_string();
                    if e.is_empty() {
                        return self.err("empty server expression");
                    }
                    self.pos += i;
                    return Ok(e);
                }
                _ => {}
            }
        }
        self.err("unterminated server expression")
    }

    fn kind(&mut self) -> R<String> {
        let k = self.ident()?;
        if !self.kinds.contains(&k) {
            return self.err(format!("unknown handle kind `{k}`"));
        }
        Ok(k)
    }

    fn size(&mut self) -> R<Size> {
        self.expect("[")?;
        // A constant size is written as a number.
        let arg = match self.peek() {
            Some(c) if c.is_ascii_digit() => self.number()?.to_string(),
            _ => self.ident()?,
        };
        let mult = if self.eat("*") { self.number()? } else { 1 };
        self.expect("]")?;
        Ok(Size { arg, mult })
    }

    fn scalar(name: &str) -> Option<Scalar> {
        Some(match name {
            "u32" => Scalar::U32,
            "i32" => Scalar::I32,
            "u64" => Scalar::U64,
            "usize" => Scalar::Usize,
            "bool" => Scalar::Bool,
            "bitfield" => Scalar::Bitfield,
            "i64" => Scalar::I64,
            "f32" => Scalar::F32,
            "f64" => Scalar::F64,
            _ => return None,
        })
    }

    fn custom(&mut self) -> R<(String, String, Vec<String>)> {
        let name = self.ident()?;
        self.expect("(")?;
        let ctype = self.until(&[';', ')']);
        let mut deps = Vec::new();
        if self.eat(";") {
            loop {
                deps.push(self.ident()?);
                if !self.eat(",") {
                    break;
                }
            }
        }
        self.expect(")")?;
        Ok((name, ctype, deps))
    }

    /// The rest of `[KIND; COUNT]` (optionally followed by `?`) after its `[`.
    fn handle_array(&mut self) -> R<(String, String)> {
        let kind = self.kind()?;
        self.expect(";")?;
        let count = self.ident()?;
        self.expect("]")?;
        self.eat("?");
        Ok((kind, count))
    }

    fn ty(&mut self) -> R<Ty> {
        if self.eat("[") {
            let (kind, count) = self.handle_array()?;
            return Ok(Ty::HandleArray { kind, count });
        }
        let word = self.ident()?;
        let mut ty = match word.as_str() {
            "in" => {
                self.expect("bytes")?;
                Ty::InBytes { size: self.size()? }
            }
            "out" => {
                if self.eat("[") {
                    let (kind, count) = self.handle_array()?;
                    return Ok(Ty::OutHandles { kind, count });
                }
                let w = self.ident()?;
                match w.as_str() {
                    "bytes" => Ty::OutBytes { size: self.size()? },
                    "new" => Ty::OutNew { kind: self.kind()? },
                    "info" => {
                        let size = self.size()?;
                        self.eat("?");
                        self.expect("{")?;
                        let mut handles = Vec::new();
                        while !self.eat("}") {
                            let param =
                                u32::try_from(self.number()?).or_else(|_| self.err("param"))?;
                            self.expect(":")?;
                            let h = if self.eat("custom") {
                                InfoHandle::Custom
                            } else {
                                let k = self.kind()?;
                                if self.eat("[]") {
                                    InfoHandle::Array(k)
                                } else {
                                    InfoHandle::One(k)
                                }
                            };
                            handles.push((param, h));
                            self.eat(",");
                        }
                        return Ok(Ty::OutInfo { size, handles });
                    }
                    s => match Self::scalar(s) {
                        Some(sc) if !matches!(sc, Scalar::I64 | Scalar::F32 | Scalar::F64) => {
                            Ty::OutScalar(sc)
                        }
                        _ => return self.err(format!("unknown out type `{s}`")),
                    },
                }
            }
            "errcode" => Ty::Errcode,
            "devptr" => {
                let size = if self.peek() == Some('[') {
                    Some(self.size()?)
                } else {
                    None
                };
                Ty::DevPtr { size }
            }
            "str" => Ty::Str,
            "userdata" => Ty::UserData,
            "callback" => {
                let kind = self.ident()?;
                self.expect("(")?;
                let userdata = self.ident()?;
                self.expect(")")?;
                Ty::Callback { kind, userdata }
            }
            "custom" => {
                let (name, ctype, deps) = self.custom()?;
                Ty::Custom { name, ctype, deps }
            }
            w => {
                if let Some(s) = Self::scalar(w) {
                    Ty::Scalar(s)
                } else if self.kinds.iter().any(|k| k == w) {
                    Ty::Handle {
                        kind: w.to_string(),
                        optional: false,
                    }
                } else {
                    return self.err(format!("unknown type `{w}`"));
                }
            }
        };
        let optional = self.eat("?");
        if let Ty::Handle { optional: o, .. } = &mut ty {
            *o = optional;
        }
        Ok(ty)
    }

    /// `api { kinds K ...; success NAME; unsupported NAME; invalid_value
    /// NAME; invalid_wait_list NAME; first_id N; load dlopen; }`. Another
    /// API's statuses are its own: none of OpenCL's is assumed, and
    /// `success` and `unsupported` must be named.
    fn settings(&mut self) -> R<Settings> {
        let mut s = Settings {
            success: String::new(),
            unsupported: String::new(),
            invalid_value: None,
            invalid_wait_list: None,
            ..Settings::default()
        };
        self.expect("{")?;
        while !self.eat("}") {
            match self.ident()?.as_str() {
                "kinds" => {
                    s.kinds.clear();
                    while !self.eat(";") {
                        s.kinds.push(self.ident()?);
                    }
                    continue;
                }
                "success" => s.success = self.ident()?,
                "unsupported" => s.unsupported = self.ident()?,
                "invalid_value" => s.invalid_value = Some(self.ident()?),
                "invalid_wait_list" => s.invalid_wait_list = Some(self.ident()?),
                "first_id" => {
                    s.first_id = u32::try_from(self.number()?).or_else(|_| self.err("first_id"))?
                }
                "load" => {
                    self.expect("dlopen")?;
                    s.dlopen = true;
                }
                o => return self.err(format!("unknown api setting `{o}`")),
            }
            self.expect(";")?;
        }
        if s.success.is_empty() || s.unsupported.is_empty() {
            return self.err("the api block must name its `success` and `unsupported` statuses");
        }
        Ok(s)
    }

    fn func(&mut self, id: u32) -> R<Func> {
        let name = self.ident()?;
        self.expect("(")?;
        let mut args = Vec::new();
        while !self.eat(")") {
            let an = self.ident()?;
            self.expect(":")?;
            let ty = self.ty()?;
            let (mut server, mut shape) = (None, None);
            loop {
                if self.eat("server") {
                    self.expect("=")?;
                    server = Some(self.expr()?);
                } else if self.eat("shape") {
                    self.expect("=")?;
                    shape = Some(self.expr()?);
                } else {
                    break;
                }
            }
            args.push(Arg {
                name: an,
                ty,
                server,
                shape,
            });
            if !self.eat(",") {
                self.expect(")")?;
                break;
            }
        }
        self.expect("->")?;
        let ret = match self.ident()?.as_str() {
            "status" => Ret::Status,
            "new" => Ret::New(self.kind()?),
            "custom" => {
                let (name, ctype, _) = self.custom()?;
                Ret::Custom { name, ctype }
            }
            r => return self.err(format!("unknown return `{r}`")),
        };
        let mut attrs = Attrs::default();
        while !self.eat(";") {
            match self.ident()?.as_str() {
                "async" => attrs.is_async = true,
                "flush" => {
                    attrs.is_async = true;
                    attrs.wake = true;
                }
                "wake" => {
                    self.expect("-if")?;
                    self.expect("=")?;
                    attrs.is_async = true;
                    attrs.wake_if = Some(self.call_expr()?);
                }
                "syncpoint" => attrs.syncpoint = true,
                "drains" => {
                    attrs.drains = Some(if self.eat("=") {
                        match self.ident()?.as_str() {
                            "always" => Drains::Always,
                            "events" => Drains::Events,
                            other => {
                                return self.err(format!("drains={other}: `always` or `events`"))
                            }
                        }
                    } else {
                        Drains::InOrder
                    })
                }
                "retain" => attrs.retain = Some(self.kind()?),
                "release" => attrs.release = Some(self.kind()?),
                "client" => {
                    if self.eat("-only") {
                        attrs.client_only = true
                    } else {
                        self.expect("-override")?;
                        attrs.client_override = true
                    }
                }
                "server" => {
                    self.expect("-override")?;
                    attrs.server_override = true
                }
                "manual" => attrs.manual = true,
                "check" => {
                    self.expect("=")?;
                    attrs.checks.push(self.call_expr()?);
                }
                "writes" => {
                    self.expect("=")?;
                    attrs.writes.push(self.ident()?);
                }
                "unsupported" => attrs.unsupported = true,
                "ptds" => attrs.per_thread = Some(crate::PerThread::Ptds),
                "ptsz" => attrs.per_thread = Some(crate::PerThread::Ptsz),
                "cached" => {
                    let mut except = Vec::new();
                    if self.eat("=") {
                        if self.ident()? != "except" {
                            return self.err("expected `cached=except(PARAM, ...)`");
                        }
                        self.expect("(")?;
                        loop {
                            let v = self.number()?;
                            let v = u32::try_from(v)
                                .or_else(|_| self.err(format!("parameter {v:#x} is not a u32")))?;
                            except.push(v);
                            if !self.eat(",") {
                                self.expect(")")?;
                                break;
                            }
                        }
                    }
                    attrs.cached = Some(except);
                }
                a => return self.err(format!("unknown attribute `{a}`")),
            }
        }
        Ok(Func {
            name,
            id,
            args,
            ret,
            attrs,
        })
    }
}

fn check(api: &Api) -> Result<(), String> {
    for f in &api.funcs {
        let names: Vec<&str> = f.args.iter().map(|a| a.name.as_str()).collect();
        let has = |n: &str| names.contains(&n);
        for w in &f.attrs.writes {
            if !has(w) {
                return Err(format!("{}: `writes={w}` names no argument", f.name));
            }
        }
        for a in &f.args {
            if let Ty::HandleArray { .. } = &a.ty {
                let (setting, named) = if a.name == "event_wait_list" {
                    ("invalid_wait_list", &api.settings.invalid_wait_list)
                } else {
                    ("invalid_value", &api.settings.invalid_value)
                };
                if named.is_none() {
                    return Err(format!(
                        "{}: the handle list `{}` needs `{setting} NAME;` in the api block",
                        f.name, a.name
                    ));
                }
            }
            let refs: Vec<&String> = match &a.ty {
                Ty::HandleArray { count, .. } | Ty::OutHandles { count, .. } => vec![count],
                Ty::InBytes { size } | Ty::OutBytes { size } | Ty::OutInfo { size, .. } => {
                    if size.is_const() {
                        vec![]
                    } else {
                        vec![&size.arg]
                    }
                }
                Ty::Callback { userdata, .. } => vec![userdata],
                Ty::DevPtr { size: Some(size) } if !size.is_const() => vec![&size.arg],
                Ty::Custom { deps, .. } => deps.iter().collect(),
                _ => vec![],
            };
            for r in refs {
                if !has(r) {
                    return Err(format!(
                        "{}: argument `{}` refers to unknown `{r}`",
                        f.name, a.name
                    ));
                }
            }
            if matches!(a.ty, Ty::OutInfo { .. }) && !has("param_name") {
                return Err(format!(
                    "{}: info output needs a `param_name` argument",
                    f.name
                ));
            }
        }
        if f.attrs.is_async {
            let has_outputs = f.args.iter().any(|a| {
                matches!(
                    a.ty,
                    Ty::OutBytes { .. }
                        | Ty::OutInfo { .. }
                        | Ty::OutScalar(_)
                        | Ty::OutHandles { .. }
                        | Ty::Callback { .. }
                )
            });
            // A hand-written (`manual`) client makes what a custom return
            // is itself (nvcc's registrations: a module handle, nothing).
            let ret_ok = matches!(f.ret, Ret::Status | Ret::New(_))
                || (f.attrs.manual && matches!(f.ret, Ret::Custom { .. }));
            if has_outputs || !ret_ok || f.attrs.syncpoint {
                return Err(format!(
                    "{}: an async call can return only a status and new handles the client names",
                    f.name
                ));
            }
        }
        if let Some(a) = f.args.iter().find(|a| a.shape.is_some()) {
            if !f.attrs.is_async || !matches!(a.ty, Ty::Scalar(_)) {
                return Err(format!(
                    "{}: `shape=` on `{}`: only a scalar of an async call has a shape",
                    f.name, a.name
                ));
            }
        }
        if f.attrs.cached.is_some() {
            check_cached(f)?;
        }
        if let Some(d) = f.attrs.drains {
            let queue_first = matches!(
                f.args.first().map(|a| &a.ty),
                Some(Ty::Handle { kind, .. }) if kind == "queue"
            );
            let events = f
                .args
                .iter()
                .any(|a| matches!(&a.ty, Ty::HandleArray { kind, .. } if kind == "event"));
            let names_it = if d == Drains::Events {
                events
            } else {
                queue_first
            };
            if f.attrs.is_async || f.attrs.manual || !names_it || f.ret != Ret::Status {
                return Err(format!(
                    "{}: `drains` needs a synchronous call returning a status, its queue first \
                     (`drains=events`: a list of events)",
                    f.name
                ));
            }
        }
        if matches!(f.ret, Ret::New(_)) && !f.args.iter().any(|a| a.ty == Ty::Errcode) {
            return Err(format!(
                "{}: a function returning a handle needs an errcode argument",
                f.name
            ));
        }
    }
    for s in &api.dispatch {
        if let Slot::Func(n) = s {
            if !api.funcs.iter().any(|f| &f.name == n) {
                return Err(format!("dispatch names `{n}`, which is not described"));
            }
        }
    }
    Ok(())
}

/// A `cached` query must look like an OpenCL info query: its object first,
/// `param_name`, the value and its size, the size returned, and at most one
/// more argument (a handle or a scalar) that also selects the answer.
fn check_cached(f: &Func) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{}: cached: {why}", f.name));
    if f.attrs.is_async || f.attrs.client_override || f.attrs.manual || f.attrs.client_only {
        return bad("a cached query is forwarded synchronously by the generated stub");
    }
    if f.ret != Ret::Status {
        return bad("must return a status");
    }
    match f.args.first().map(|a| &a.ty) {
        Some(Ty::Handle {
            optional: false, ..
        }) => {}
        _ => return bad("the first argument must be a handle that is not NULL"),
    }
    let Some(size) = f.args.iter().find_map(|a| match &a.ty {
        Ty::OutInfo { size, .. } if !size.is_const() && size.mult == 1 => Some(size.arg.clone()),
        _ => None,
    }) else {
        return bad("needs an `out info[SIZE]?` argument sized by an argument");
    };
    let mut keys = 0;
    for a in f.args.iter().skip(1) {
        match &a.ty {
            Ty::OutInfo { .. } | Ty::OutScalar(Scalar::Usize) => {}
            Ty::Scalar(Scalar::U32) if a.name == "param_name" => {}
            Ty::Scalar(Scalar::Usize) if a.name == size => {}
            Ty::Handle { .. } | Ty::Scalar(Scalar::U32) => keys += 1,
            _ => {
                return bad(&format!(
                    "argument `{}` cannot be part of a cache key",
                    a.name
                ))
            }
        }
    }
    if keys > 1 {
        return bad(
            "at most one argument besides the object and the parameter may select the answer",
        );
    }
    if !f.args.iter().any(|a| a.ty == Ty::OutScalar(Scalar::Usize)) {
        return bad("needs an `out usize?` for the size returned");
    }
    Ok(())
}

/// Parses a description.
pub fn parse(src: &str) -> Result<Api, ParseError> {
    let mut settings = Settings::default();
    let mut p = P {
        src,
        pos: 0,
        kinds: settings.kinds.clone(),
    };
    let mut funcs = Vec::new();
    let mut dispatch = Vec::new();
    while p.peek().is_some() {
        let word = p.ident()?;
        match word.as_str() {
            "fn" => {
                let f = p.func(settings.first_id.saturating_add(funcs.len() as u32))?;
                if funcs.iter().any(|g: &Func| g.name == f.name) {
                    return p.err(format!("`{}` is described twice", f.name));
                }
                funcs.push(f);
            }
            "dispatch" => {
                p.expect("{")?;
                while !p.eat("}") {
                    let name = p.ident()?;
                    let slot = if p.eat("!") {
                        match p.ident()?.as_str() {
                            "int" => Slot::Unsupported(name, StubRet::Int),
                            "ptr" if p.eat("(") => {
                                let n = p.number()?;
                                p.expect(")")?;
                                match u8::try_from(n) {
                                    Ok(n @ 1..=8) => Slot::Unsupported(name, StubRet::Ptr(Some(n))),
                                    _ => {
                                        return p.err(format!(
                                            "`{name}`: errcode_ret must be one of the first 8 arguments"
                                        ))
                                    }
                                }
                            }
                            "ptr" => Slot::Unsupported(name, StubRet::Ptr(None)),
                            "void" => Slot::Unsupported(name, StubRet::Void),
                            "local" => Slot::Local(name),
                            o => return p.err(format!("unknown slot marker `{o}`")),
                        }
                    } else {
                        Slot::Func(name)
                    };
                    dispatch.push(slot);
                }
            }
            "api" if funcs.is_empty() => {
                settings = p.settings()?;
                p.kinds = settings.kinds.clone();
            }
            w => return p.err(format!("expected `fn` or `dispatch`, found `{w}`")),
        }
    }
    let api = Api {
        funcs,
        dispatch,
        settings,
    };
    check(&api).map_err(|msg| ParseError { line: 0, msg })?;
    Ok(api)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another API's statuses are named in its `api` block, and the
    /// generated code spells them so; none of OpenCL's is assumed.
    #[test]
    fn statuses_come_from_the_api_block() {
        let list = "fn w(q: stream, n: u32, l: [stream; n]?) -> status;";
        let unnamed = parse("api { kinds stream; success okay; }").expect_err("no unsupported");
        assert!(
            unnamed.msg.contains("`success` and `unsupported`"),
            "{unnamed}"
        );
        let block = "api { kinds stream; success okay; unsupported nope; }";
        let e = parse(&format!("{block}\n{list}")).expect_err("a list needs invalid_value");
        assert!(e.msg.contains("`invalid_value NAME;`"), "{e}");
        let api = parse(&format!(
            "api {{ kinds stream; success okay; unsupported nope; invalid_value bad; }}\n{list}\n\
             fn gone(q: stream) -> status unsupported;"
        ))
        .expect("parse");
        let (client, server) = (crate::gen_client(&api), crate::gen_server(&api));
        assert!(server.contains("v_n as u64, bad)?;"), "{server}");
        assert!(server.contains("_ => Err(nope),"), "{server}");
        assert!(client.contains("    nope\n}"), "{client}");
        for code in [client, server] {
            assert!(!code.contains("CL_"), "{code}");
        }
    }

    const QUERY: &str = "fn q(d: device, param_name: u32, param_value_size: usize, \
        param_value: out info[param_value_size]? {}, param_value_size_ret: out usize?) -> status";

    #[test]
    fn cached_queries_and_conditional_wakes() {
        let api = parse(&format!(
            "{QUERY} cached=except(0x1027, 7);\n\
             fn r(m: mem) -> status release mem wake-if=crate::x::pending();"
        ))
        .expect("parse");
        assert_eq!(api.funcs[0].attrs.cached, Some(vec![0x1027, 7]));
        let r = &api.funcs[1].attrs;
        assert!(r.is_async && !r.wake);
        assert_eq!(r.wake_if.as_deref(), Some("crate::x::pending()"));
        assert_eq!(
            parse(&format!("{QUERY} cached;")).expect("parse").funcs[0]
                .attrs
                .cached,
            Some(vec![])
        );
    }

    #[test]
    fn drains_names_its_queue_or_events() {
        let api = parse(
            "fn f(q: queue) -> status syncpoint drains=always;\n\
             fn r(q: queue, n: u32) -> status drains;\n\
             fn w(n: u32, l: [event; n]?) -> status drains=events;",
        )
        .expect("parse");
        let d: Vec<_> = api.funcs.iter().map(|f| f.attrs.drains).collect();
        assert_eq!(
            d,
            [
                Some(Drains::Always),
                Some(Drains::InOrder),
                Some(Drains::Events)
            ]
        );
        for bad in [
            "fn f(n: u32, q: queue) -> status drains;",
            "fn f(q: queue) -> status async drains;",
            "fn f(q: queue) -> status drains=events;",
            "fn f(q: queue) -> status drains=sometimes;",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cached_needs_the_shape_of_a_query() {
        for bad in [
            "fn q(d: device?, param_name: u32, param_value_size: usize, param_value: out info[param_value_size]? {}, param_value_size_ret: out usize?) -> status cached;",
            "fn q(d: device, param_name: u32, param_value_size: usize, param_value: out info[param_value_size]? {}) -> status cached;",
            "fn q(d: device, a: u32, b: u32, param_name: u32, param_value_size: usize, param_value: out info[param_value_size]? {}, param_value_size_ret: out usize?) -> status cached;",
            "fn q(d: device, param_name: u32, param_value_size: usize, param_value: out info[param_value_size]? {}, param_value_size_ret: out usize?) -> status client-override cached;",
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.msg.contains("cached"), "{bad}: {}", e.msg);
        }
        assert!(parse(&format!("{QUERY} cached=except();")).is_err());
    }

    #[test]
    fn parses_each_form() {
        let api = parse(
            "# c\nfn f(a: u32, h: device?, hs: [event; a]?, i: in bytes[a * 8]?, o: out bytes[a]?,\n\
             inf: out info[a]? {0x10: platform, 0x11: device[], 0x12: custom}, param_name: u32,\n\
             s: out usize?, e: out new event?, oh: out [device; a]?, err: errcode, st: str?,\n\
             cb: callback event(ud), ud: userdata, c: custom foo(*const c_void; a, h) server=f(v_c.arg(), (1, 2))) -> new context;\n\
             fn g(q: queue, e: out new event?) -> status flush;\n\
             dispatch { f x!int y!ptr z!local w!ptr(3) }",
        )
        .expect("parse");
        let f = &api.funcs[0];
        assert_eq!(f.args.len(), 15);
        assert_eq!(
            f.args[3].ty,
            Ty::InBytes {
                size: Size {
                    arg: "a".into(),
                    mult: 8
                }
            }
        );
        assert!(matches!(&f.args[5].ty, Ty::OutInfo { handles, .. } if handles.len() == 3));
        assert_eq!(f.ret, Ret::New("context".into()));
        assert!(!f.attrs.is_async);
        assert_eq!(f.args[14].server.as_deref(), Some("f(v_c.arg(), (1, 2))"));
        let g = &api.funcs[1];
        assert!(g.attrs.is_async && g.attrs.wake);
        let c = parse("fn f(a: u32) -> status check=m::ok(v_a, (1, 2)) check=m::also(v_a);")
            .expect("checks");
        assert_eq!(
            c.funcs[0].attrs.checks,
            vec!["m::ok(v_a, (1, 2))".to_string(), "m::also(v_a)".to_string()]
        );
        assert!(parse("fn f(a: u32) -> status check=nocall;").is_err());
        let w = parse("fn f(x: devptr, y: devptr) -> status writes=y;").expect("writes");
        assert_eq!(w.funcs[0].attrs.writes, vec!["y".to_string()]);
        assert!(parse("fn f(x: devptr) -> status writes=z;").is_err());
        assert_eq!(api.dispatch.len(), 5);
        assert_eq!(
            api.dispatch[4],
            Slot::Unsupported("w".into(), StubRet::Ptr(Some(3)))
        );
        assert!(parse("dispatch { w!ptr(9) }").is_err());
        assert!(parse("dispatch { w!ptr(0) }").is_err());
    }

    #[test]
    fn api_block_sets_kinds_ids_and_statuses() {
        let api = parse(
            "api { kinds stream event; success cudaSuccess; unsupported cudaErrorNotSupported;\n\
             first_id 0x10000; load dlopen; }\n\
             fn cudaStreamSynchronize(s: stream?) -> status syncpoint;\n\
             fn cudaMemset(p: devptr[n], v: i32, n: usize) -> status async;\n\
             fn cudaGetErrorName(e: i32) -> custom errname(*const c_char) client-only;",
        )
        .expect("parse");
        assert_eq!(api.settings.kinds, vec!["stream", "event"]);
        assert!(api.settings.dlopen);
        assert_eq!(api.funcs[1].id, 0x10001);
        assert!(matches!(&api.funcs[1].args[0].ty, Ty::DevPtr { size: Some(s) } if s.arg == "n"));
        assert!(api.funcs[2].attrs.client_only);
        assert!(
            parse("api { kinds stream; success s; unsupported u; }\nfn f(q: queue) -> status;")
                .is_err(),
            "OpenCL kinds are gone once an API names its own"
        );
        assert!(parse("fn f(p: devptr[m]) -> status;").is_err());
    }

    #[test]
    fn reports_errors_with_lines() {
        let e =
            parse("fn f(a: u32) -> status;\n\nfn g(b: wibble) -> status;").expect_err("bad type");
        assert_eq!(e.line, 3);
        assert!(
            parse("fn f(a: [device; n]) -> status;").is_err(),
            "unknown count arg"
        );
        assert!(
            parse("fn f(a: u32) -> new mem;").is_err(),
            "new without errcode"
        );
        assert!(parse("dispatch { nothere }").is_err());
        assert!(
            parse("fn f(n: u32, o: out bytes[n]?) -> status async;").is_err(),
            "async with an output"
        );
    }
}
