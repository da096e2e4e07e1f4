//! The transport's untrusted decoders: the greeting, and the frame reader
//! (a length prefix checked against the limit before any allocation), fed
//! through a stream channel as a socket would feed it: as the server reads
//! requests, and as a client reads replies with notifications in band.
#![no_main]

use std::io::{Read, Write};

use libfuzzer_sys::fuzz_target;
use wormhole_transport::hello::Hello;
use wormhole_transport::stream::StreamChannel;
use wormhole_transport::Channel;

/// Reads from the fuzz input; writes go nowhere.
struct Bytes {
    data: Vec<u8>,
    pos: usize,
}

impl Read for Bytes {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = b.len().min(self.data.len() - self.pos);
        b[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Bytes {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const MAX_FRAME: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hello::from_bytes(data) {
        assert_eq!(Hello::from_bytes(&h.to_bytes()).ok(), Some(h));
    }
    let reader = Bytes {
        data: data.to_vec(),
        pos: 0,
    };
    let writer = Bytes {
        data: Vec::new(),
        pos: 0,
    };
    let mut ch = StreamChannel::new(reader, writer);
    ch.set_max_frame(MAX_FRAME);
    let mut buf = Vec::new();
    for _ in 0..64 {
        match ch.recv(&mut buf) {
            Ok(()) => assert!(buf.len() as u64 <= MAX_FRAME),
            Err(_) => break,
        }
    }
    client_side(data);
});

/// A client's channel, which files notifications while it reads replies
/// and reads them alone when no call is in flight, over a real socket
/// (readiness checks need one) that holds the input and then ends.
fn client_side(data: &[u8]) {
    let Ok((mut server, client)) = std::os::unix::net::UnixStream::pair() else {
        return;
    };
    // Inputs are far below a socket's buffer: the write cannot block.
    if data.len() > 64 << 10 || server.write_all(data).is_err() {
        return;
    }
    drop(server);
    let Ok(mut ch) = StreamChannel::unix(client) else {
        return;
    };
    ch.set_max_frame(MAX_FRAME);
    let Ok(_notes) = ch.notes() else { return };
    let mut buf = Vec::new();
    for _ in 0..64 {
        match ch.recv(&mut buf) {
            Ok(()) => assert!(buf.len() as u64 <= MAX_FRAME),
            Err(_) => break,
        }
    }
    // The socket has ended: whatever is left ends in an error, not a hang.
    assert!(ch.pump_notes().is_err());
}
