//! Accept queues: every listening socket on the machine with the
//! connections waiting in its queue and the queue's limit (the backlog),
//! read through the kernel's sock_diag netlink interface — what `ss -l`
//! shows as Recv-Q / Send-Q, the same figures Raindrops reads for Unicorn.
//! TCP over IPv4 and IPv6, and unix stream sockets (Unicorn, Passenger and
//! Puma behind nginx listen on them). Which of them are the server's is
//! the sampler's business (the socket inodes its processes hold).

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{self, ExtensionFlags, InetRequest, SocketId},
    unix::{self, ShowFlags, UnixRequest},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};
use std::io;

/// One listening socket now.
#[derive(Clone, Debug, PartialEq)]
pub struct Listening {
    /// The socket's inode (`socket:[N]` in /proc/PID/fd).
    pub inode: u32,
    /// `127.0.0.1:8080`, `[::]:80`, a unix path, or `@name` (abstract).
    pub address: String,
    /// Connections accepted by the kernel, waiting for `accept()`.
    pub depth: u32,
    /// The queue's limit: the backlog given to `listen()`, as the kernel
    /// caps it (`net.core.somaxconn`).
    pub limit: u32,
}

/// Every listening TCP (IPv4, IPv6) and unix stream socket.
pub fn listening() -> io::Result<Vec<Listening>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut all = Vec::new();
    for family in [AF_INET, AF_INET6] {
        let socket_id = if family == AF_INET {
            SocketId::new_v4()
        } else {
            SocketId::new_v6()
        };
        let request = SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: inet::StateFlags::LISTEN,
            socket_id,
        });
        dump(&mut socket, request, |message| {
            if let SockDiagMessage::InetResponse(r) = message {
                let id = &r.header.socket_id;
                all.push(Listening {
                    inode: r.header.inode,
                    address: std::net::SocketAddr::new(id.source_address, id.source_port)
                        .to_string(),
                    depth: r.header.recv_queue,
                    limit: r.header.send_queue,
                });
            }
        })?;
    }
    let request = SockDiagMessage::UnixRequest(UnixRequest {
        state_flags: unix::StateFlags::LISTEN,
        inode: 0,
        show_flags: ShowFlags::NAME | ShowFlags::RQLEN,
        cookie: [0xff; 8],
    });
    dump(&mut socket, request, |message| {
        if let SockDiagMessage::UnixResponse(r) = message {
            let mut listening = Listening {
                inode: r.header.inode,
                address: String::new(),
                depth: 0,
                limit: 0,
            };
            for nla in &r.nlas {
                match nla {
                    unix::nlas::Nla::Name(unix::nlas::UnixDiagName::Pathname(p)) => {
                        listening.address = p.to_string_lossy().into_owned();
                    }
                    unix::nlas::Nla::Name(unix::nlas::UnixDiagName::Abstract(name)) => {
                        listening.address = format!("@{}", String::from_utf8_lossy(name));
                    }
                    unix::nlas::Nla::ReceiveQueueLength(depth, limit) => {
                        (listening.depth, listening.limit) = (*depth, *limit);
                    }
                    _ => {}
                }
            }
            all.push(listening);
        }
    })?;
    Ok(all)
}

/// Sends one dump request and hands each answer to `each`.
fn dump(
    socket: &mut Socket,
    request: SockDiagMessage,
    mut each: impl FnMut(SockDiagMessage),
) -> io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut packet = NetlinkMessage::new(header, request.into());
    packet.finalize();
    let mut buf = vec![0; packet.buffer_len()];
    packet.serialize(&mut buf[..]);
    socket.send(&buf[..], 0)?;
    // Room for the largest datagram a dump sends (a truncated one would
    // lose every socket in it).
    let mut received = Vec::with_capacity(64 * 1024);
    loop {
        received.clear();
        let size = socket.recv(&mut received, 0)?;
        let mut offset = 0;
        while offset < size {
            let message = <NetlinkMessage<SockDiagMessage>>::deserialize(&received[offset..])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let length = message.header.length as usize;
            match message.payload {
                NetlinkPayload::InnerMessage(m) => each(m),
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                _ => {}
            }
            if length == 0 {
                break;
            }
            offset += length;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::{UnixListener, UnixStream};

    fn inode_of(fd: i32) -> u32 {
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        let text = link.to_string_lossy();
        text.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .unwrap()
    }

    #[test]
    fn a_tcp_listener_nobody_accepts_from_shows_its_queue_and_backlog() {
        let listener = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        listener
            .bind(
                &"127.0.0.1:0"
                    .parse::<std::net::SocketAddr>()
                    .unwrap()
                    .into(),
            )
            .unwrap();
        listener.listen(16).unwrap();
        let listener: TcpListener = listener.into();
        let addr = listener.local_addr().unwrap();
        let _waiting: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let inode = inode_of(listener.as_raw_fd());
        let found = listening().expect("sock_diag answers");
        let ours = found
            .iter()
            .find(|l| l.inode == inode)
            .expect("our listener");
        assert_eq!(ours.address, addr.to_string());
        assert_eq!((ours.depth, ours.limit), (5, 16), "{ours:?}");
        // Accepting one empties the queue by one.
        let _ = listener.accept().unwrap();
        let found = listening().unwrap();
        let ours = found.iter().find(|l| l.inode == inode).unwrap();
        assert_eq!(ours.depth, 4);
    }

    #[test]
    fn hundreds_of_listeners_are_all_read() {
        let dir = tempfile::tempdir().unwrap();
        let listeners: Vec<UnixListener> = (0..400)
            .map(|i| {
                let name = format!("a-long-socket-name-as-passenger-makes-them-{i:04}.sock");
                UnixListener::bind(dir.path().join(name)).unwrap()
            })
            .collect();
        let tcp: Vec<TcpListener> = (0..200)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let found = listening().expect("sock_diag answers");
        for l in &listeners {
            let inode = inode_of(l.as_raw_fd());
            assert!(
                found.iter().any(|f| f.inode == inode),
                "unix listener {inode} missing"
            );
        }
        for l in &tcp {
            let inode = inode_of(l.as_raw_fd());
            assert!(
                found.iter().any(|f| f.inode == inode),
                "tcp listener {inode} missing"
            );
        }
    }

    #[test]
    fn a_unix_listener_nobody_accepts_from_shows_its_queue_and_backlog() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let _waiting: Vec<UnixStream> = (0..3)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let inode = inode_of(listener.as_raw_fd());
        let found = listening().expect("sock_diag answers");
        let ours = found
            .iter()
            .find(|l| l.inode == inode)
            .expect("our listener");
        assert_eq!(ours.address, path.to_string_lossy());
        assert_eq!(ours.depth, 3, "{ours:?}");
        assert!(ours.limit >= 3, "{ours:?}");
    }
}
