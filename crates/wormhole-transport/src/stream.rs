//! Frames over a byte stream (TCP between hosts, or a Unix socket): the
//! baseline that GVirtuS and rCUDA use, and the transport between hosts.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;

use crate::shm::{read_frame, DEFAULT_MAX_FRAME};
use crate::{Channel, TransportError};

/// A framed channel over any stream that can be split into a reader and a
/// writer.
pub struct StreamChannel<S: Read + Write> {
    reader: BufReader<S>,
    writer: BufWriter<S>,
    max_frame: u64,
}

impl StreamChannel<TcpStream> {
    pub fn tcp(stream: TcpStream) -> Result<Self, TransportError> {
        stream.set_nodelay(true)?;
        let reader = stream.try_clone()?;
        Ok(Self::new(reader, stream))
    }
}

impl StreamChannel<std::os::unix::net::UnixStream> {
    pub fn unix(stream: std::os::unix::net::UnixStream) -> Result<Self, TransportError> {
        let reader = stream.try_clone()?;
        Ok(Self::new(reader, stream))
    }
}

impl<S: Read + Write> StreamChannel<S> {
    pub fn new(reader: S, writer: S) -> Self {
        StreamChannel {
            reader: BufReader::with_capacity(256 << 10, reader),
            writer: BufWriter::with_capacity(256 << 10, writer),
            max_frame: DEFAULT_MAX_FRAME,
        }
    }

    pub fn set_max_frame(&mut self, max: u64) {
        self.max_frame = max;
    }
}

impl<S: Read + Write + Send> Channel for StreamChannel<S> {
    fn send(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        self.writer.write_all(&(frame.len() as u64).to_le_bytes())?;
        self.writer.write_all(frame)?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.writer.flush()?;
        Ok(())
    }

    fn send_raw(&mut self, data: &[u8]) -> Result<(), TransportError> {
        self.writer.write_all(data)?;
        Ok(())
    }

    fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), TransportError> {
        self.reader.read_exact(dst).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => TransportError::PeerGone,
            _ => e.into(),
        })
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        let reader = &mut self.reader;
        read_frame(self.max_frame, buf, |b| {
            reader.read_exact(b).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => TransportError::PeerGone,
                _ => e.into(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_loopback_round_trip() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().expect("accept");
            let mut ch = StreamChannel::tcp(s).expect("chan");
            let mut buf = Vec::new();
            ch.recv(&mut buf).expect("recv");
            buf.reverse();
            ch.send(&buf).expect("send");
            ch.flush().expect("flush");
            // The client hangs up: the next read reports it.
            assert!(matches!(ch.recv(&mut buf), Err(TransportError::PeerGone)));
        });
        let mut ch = StreamChannel::tcp(TcpStream::connect(addr).expect("connect")).expect("chan");
        ch.send(b"abc").expect("send");
        ch.flush().expect("flush");
        let mut buf = Vec::new();
        ch.recv(&mut buf).expect("recv");
        assert_eq!(buf, b"cba");
        drop(ch);
        t.join().expect("server");
    }
}
