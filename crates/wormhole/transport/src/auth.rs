//! Who may use a server over TCP: a shared secret, proved without sending it.
//!
//! A Unix socket is guarded by its file's permissions; a TCP port is open to
//! anyone who can reach it. With a token configured, the listener sends a
//! challenge before it starts a tenant, and only a client that answers with
//! HMAC-SHA256 of the challenge under the token is served. The token never
//! crosses the wire, and an answer fits one challenge only. This proves who
//! connects; it does not encrypt the calls (use a tunnel for that).
//!
//! Server to client: `WHCH`, a u32 version, 32 random bytes. Client to
//! server: the 32-byte MAC. Server to client, on a wrong MAC: `WHNO`, then
//! the connection closes; on a right one the tenant's greeting follows.

use std::io::{Read, Write};
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::TransportError;

/// Starts a challenge (where a greeting starts with `WHOL`).
pub const CHALLENGE_MAGIC: [u8; 4] = *b"WHCH";
/// Says the answer was wrong.
pub const REFUSED_MAGIC: [u8; 4] = *b"WHNO";
const VERSION: u32 = 1;
const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
/// Bytes of a challenge after its magic.
pub const CHALLENGE_REST: usize = 4 + NONCE_LEN;
/// Binds the MAC to this use, so that the token's MACs elsewhere are no use here.
const CONTEXT: &[u8] = b"wormhole-tcp-auth-v1";

/// A shared secret, as read from a token file.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// Reads a token file: its bytes, without a final newline. Refuses an
    /// empty one and one that others than its owner may read.
    pub fn from_file(path: &Path) -> Result<Token, TransportError> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(TransportError::Auth(
                "the token file may be read by others than its owner (chmod 600 it)",
            ));
        }
        let mut bytes = std::fs::read(path)?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        if bytes.len() < 16 {
            return Err(TransportError::Auth("the token is shorter than 16 bytes"));
        }
        Ok(Token(bytes))
    }

    fn mac(&self, nonce: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .expect("HMAC accepts keys of any length");
        m.update(CONTEXT);
        m.update(nonce);
        m
    }
}

/// The listener's side: sends a challenge and checks the answer. Ok(false)
/// for a wrong answer (the client is told, and should be dropped); Err for
/// a connection that failed or went silent (set a read timeout first).
pub fn challenge<S: Read + Write>(s: &mut S, token: &Token) -> Result<bool, TransportError> {
    let mut nonce = [0u8; NONCE_LEN];
    fill_random(&mut nonce)?;
    let mut msg = Vec::with_capacity(4 + CHALLENGE_REST);
    msg.extend_from_slice(&CHALLENGE_MAGIC);
    msg.extend_from_slice(&VERSION.to_le_bytes());
    msg.extend_from_slice(&nonce);
    s.write_all(&msg)?;
    let mut answer = [0u8; MAC_LEN];
    s.read_exact(&mut answer)?;
    // Constant-time comparison.
    if token.mac(&nonce).verify_slice(&answer).is_ok() {
        return Ok(true);
    }
    let _ = s.write_all(&REFUSED_MAGIC);
    Ok(false)
}

/// The client's side, after reading [`CHALLENGE_MAGIC`]: reads the rest of
/// the challenge and answers it.
pub fn answer<S: Read + Write>(s: &mut S, token: &Token) -> Result<(), TransportError> {
    let mut rest = [0u8; CHALLENGE_REST];
    s.read_exact(&mut rest)?;
    let version = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if version != VERSION {
        return Err(TransportError::Auth("unknown challenge version"));
    }
    let mac = token.mac(&rest[4..]).finalize().into_bytes();
    s.write_all(&mac)?;
    Ok(())
}

fn fill_random(buf: &mut [u8]) -> Result<(), TransportError> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is writable for its length.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e.into());
            }
            continue;
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn token(s: &str) -> Token {
        Token(s.as_bytes().to_vec())
    }

    /// Runs a challenge on one end of a socket pair and `client` on the other.
    /// The server's end is shut once the challenge returns, so a client
    /// waiting for more reads the end instead of hanging.
    fn run(server_token: &Token, client: impl FnOnce(&mut UnixStream) + Send) -> bool {
        let (mut a, mut b) = UnixStream::pair().expect("pair");
        std::thread::scope(|sc| {
            sc.spawn(move || client(&mut b));
            let passed = challenge(&mut a, server_token).expect("challenge");
            let _ = a.shutdown(std::net::Shutdown::Both);
            passed
        })
    }

    fn read_magic(s: &mut UnixStream) -> [u8; 4] {
        let mut m = [0u8; 4];
        s.read_exact(&mut m).expect("magic");
        m
    }

    #[test]
    fn the_right_token_passes_and_a_wrong_one_is_refused() {
        let t = token("a secret of enough bytes");
        assert!(run(&t, |s| {
            assert_eq!(read_magic(s), CHALLENGE_MAGIC);
            answer(s, &t).expect("answer");
        }));
        assert!(!run(&t, |s| {
            assert_eq!(read_magic(s), CHALLENGE_MAGIC);
            answer(s, &token("another secret, as long")).expect("answer");
            assert_eq!(read_magic(s), REFUSED_MAGIC);
        }));
    }

    /// An answer recorded for one challenge does not pass the next: each
    /// challenge is fresh.
    #[test]
    fn an_answer_is_good_for_one_challenge_only() {
        let t = token("a secret of enough bytes");
        let recorded = std::sync::Mutex::new(Vec::new());
        assert!(run(&t, |s| {
            let mut c = [0u8; 4 + CHALLENGE_REST];
            s.read_exact(&mut c).expect("challenge");
            let mac = t.mac(&c[8..]).finalize().into_bytes();
            recorded.lock().expect("lock").extend_from_slice(&mac);
            s.write_all(&mac).expect("answer");
        }));
        let replay = recorded.lock().expect("lock").clone();
        assert!(!run(&t, |s| {
            let mut c = [0u8; 4 + CHALLENGE_REST];
            s.read_exact(&mut c).expect("challenge");
            s.write_all(&replay).expect("replayed answer");
        }));
    }

    #[test]
    fn a_silent_or_short_answer_is_an_error_not_a_pass() {
        let t = token("a secret of enough bytes");
        let (mut a, b) = UnixStream::pair().expect("pair");
        let peer = std::thread::spawn(move || {
            let mut b = b;
            let mut c = [0u8; 4 + CHALLENGE_REST];
            b.read_exact(&mut c).expect("challenge");
            b.write_all(&[0u8; 7]).expect("short answer");
        });
        assert!(challenge(&mut a, &t).is_err());
        peer.join().expect("peer");
    }

    #[test]
    fn token_files_must_be_private_and_long_enough() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("wh-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("token");
        std::fs::write(&p, "0123456789abcdef0123\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(
            Token::from_file(&p).expect("token").0,
            b"0123456789abcdef0123"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(Token::from_file(&p).is_err());
        std::fs::write(&p, "short\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(Token::from_file(&p).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
