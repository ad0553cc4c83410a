//! The delay of the benchmark's network links (`benches/net.sh`): holds
//! every packet a host sends for a fixed time before the kernel sends it on,
//! so that two hosts see a round trip of twice that time.
//!
//! The kernels these benchmarks run on may lack `tc netem` (this machine's
//! has no `sch_netem`), so the delay is a netfilter queue: an nftables rule
//! in the host's namespace queues what leaves its veth, and this program
//! lets each packet go once it has waited its time. It sees only the
//! packets' metadata (copy mode `META`), never copies a payload, takes TCP's
//! large segments whole (`F_GSO`), and releases every packet that is due
//! with one batch verdict, so its cost per packet is a share of one
//! `recv(2)` and of one `send(2)`. Written here rather than with a crate:
//! the crates for netfilter queues wrap libmnl or libnetfilter_queue and
//! send one verdict per packet; batch verdicts are what keep this element
//! cheap on a 2-core machine that also runs what it measures.
//!
//! Usage: `link_delay QUEUE DELAY_US`, inside the host's namespace, started
//! under `chrt -f` (a real-time thread has no timer slack, and is woken on
//! time on a busy machine). It prints `ready` once it holds the queue.
//!
//! Order and spacing are kept: packets leave in the order they came, each
//! `DELAY_US` after the moment this program received it. Should the socket
//! overflow (`ENOBUFS`), the packets it did not see are still in the
//! kernel's queue, and the next batch verdict (all ids up to one) releases
//! them.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{
    bind, recv, send, socket, sockopt, AddressFamily, RecvFlags, SendFlags, SocketType,
};

// linux/netfilter/nfnetlink.h, nfnetlink_queue.h, netlink.h
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = 3;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NFQA_CFG_F_GSO: u32 = 1 << 2;
const NF_ACCEPT: u32 = 1;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;

/// Far above what a link holds in flight for a millisecond: a full queue
/// drops packets, and drops are not what the benchmark measures.
const QUEUE_MAXLEN: u32 = 1 << 16;
const SOCKET_BUFFER: usize = 64 << 20;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let parsed = match args.as_slice() {
        [_, queue, delay] => queue.parse::<u16>().ok().zip(delay.parse::<u64>().ok()),
        _ => None,
    };
    let Some((queue, delay_us)) = parsed else {
        eprintln!("usage: link_delay QUEUE DELAY_US");
        return ExitCode::from(2);
    };
    match run(queue, Duration::from_micros(delay_us)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("link_delay: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(queue: u16, delay: Duration) -> Result<(), String> {
    let fd = socket(
        AddressFamily::NETLINK,
        SocketType::RAW,
        Some(netlink::NETFILTER),
    )
    .map_err(|e| format!("netlink socket: {e}"))?;
    bind(&fd, &SocketAddrNetlink::new(0, 0)).map_err(|e| format!("bind: {e}"))?;
    sockopt::set_socket_recv_buffer_size_force(&fd, SOCKET_BUFFER)
        .or_else(|_| sockopt::set_socket_recv_buffer_size(&fd, SOCKET_BUFFER))
        .map_err(|e| format!("SO_RCVBUF: {e}"))?;
    configure(&fd, queue)?;
    println!("ready");
    relay(&fd, queue, delay)
}

/// Binds QUEUE: metadata only, whole GSO segments, a long queue.
fn configure(fd: &OwnedFd, queue: u16) -> Result<(), String> {
    let mut cmd = [0u8; 4];
    cmd[0] = NFQNL_CFG_CMD_BIND;
    let mut params = [0u8; 5];
    params[4] = NFQNL_COPY_META;
    let msg = message(
        NFQNL_MSG_CONFIG,
        NLM_F_ACK,
        queue,
        &[
            (NFQA_CFG_CMD, &cmd),
            (NFQA_CFG_PARAMS, &params),
            (NFQA_CFG_QUEUE_MAXLEN, &QUEUE_MAXLEN.to_be_bytes()),
            (NFQA_CFG_MASK, &NFQA_CFG_F_GSO.to_be_bytes()),
            (NFQA_CFG_FLAGS, &NFQA_CFG_F_GSO.to_be_bytes()),
        ],
    );
    send(fd, &msg, SendFlags::empty()).map_err(|e| format!("binding queue {queue}: {e}"))?;
    let mut buf = vec![0u8; 8192];
    let (got, _) = recv(fd, &mut buf[..], RecvFlags::empty())
        .map_err(|e| format!("binding queue {queue}: {e}"))?;
    let ack = &buf[..got];
    if ack.len() < NLMSG_HDRLEN + 4 || u16::from_ne_bytes([ack[4], ack[5]]) != NLMSG_ERROR {
        return Err(format!(
            "binding queue {queue}: no acknowledgement from the kernel"
        ));
    }
    let code = i32::from_ne_bytes([ack[16], ack[17], ack[18], ack[19]]);
    if code != 0 {
        return Err(format!(
            "binding queue {queue}: {}",
            Errno::from_raw_os_error(-code)
        ));
    }
    Ok(())
}

/// One thread: a packet is released by the same wake-up that finds it due
/// (`ppoll` with the time left as its timeout), so each packet costs one
/// wake-up on its way in and shares one on its way out.
fn relay(fd: &OwnedFd, queue: u16, delay: Duration) -> Result<(), String> {
    // Packets waiting: (packet id, when this program received it).
    let mut waiting: VecDeque<(u32, Instant)> = VecDeque::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut ids = Vec::with_capacity(1024);
    loop {
        let now = Instant::now();
        let mut last = None;
        while let Some(&(id, came)) = waiting.front() {
            if came + delay > now {
                break;
            }
            last = Some(id);
            waiting.pop_front();
        }
        if let Some(last) = last {
            let mut verdict = [0u8; 8];
            verdict[..4].copy_from_slice(&NF_ACCEPT.to_be_bytes());
            verdict[4..].copy_from_slice(&last.to_be_bytes());
            let msg = message(
                NFQNL_MSG_VERDICT_BATCH,
                0,
                queue,
                &[(NFQA_VERDICT_HDR, &verdict)],
            );
            send(fd, &msg, SendFlags::empty())
                .map_err(|e| format!("verdict up to packet {last}: {e}"))?;
        }
        let timeout = waiting.front().map(|&(_, came)| {
            let left = (came + delay).saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: left.as_secs() as _,
                tv_nsec: left.subsec_nanos() as _,
            }
        });
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) | Err(Errno::INTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(format!("waiting for packets: {e}")),
        }
        // Everything the socket holds now, without blocking again.
        loop {
            let got = match recv(fd, &mut buf[..], RecvFlags::DONTWAIT) {
                Ok((n, _)) => n,
                Err(Errno::AGAIN | Errno::INTR) => break,
                // Missed messages: their packets wait in the kernel for the
                // next batch verdict, which covers every id up to its own.
                Err(Errno::NOBUFS) => continue,
                Err(e) => return Err(format!("receiving packets: {e}")),
            };
            let came = Instant::now();
            ids.clear();
            packet_ids(&buf[..got], &mut ids);
            waiting.extend(ids.iter().map(|&id| (id, came)));
        }
    }
}

/// The ids of the packet messages in one datagram from the kernel.
fn packet_ids(mut data: &[u8], ids: &mut Vec<u32>) {
    let packet_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET;
    while data.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if len < NLMSG_HDRLEN || len > data.len() {
            return;
        }
        let ty = u16::from_ne_bytes([data[4], data[5]]);
        if ty == packet_type {
            let mut attrs = data.get(NLMSG_HDRLEN + NFGENMSG_LEN..len).unwrap_or(&[]);
            while attrs.len() >= 4 {
                let alen = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
                let aty = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
                if alen < 4 || alen > attrs.len() {
                    break;
                }
                if aty == NFQA_PACKET_HDR && alen >= 8 {
                    ids.push(u32::from_be_bytes([attrs[4], attrs[5], attrs[6], attrs[7]]));
                    break;
                }
                attrs = &attrs[(alen + 3) & !3..];
            }
        }
        data = &data[((len + 3) & !3).min(data.len())..];
    }
}

/// One nfnetlink message of the queue subsystem: header, `nfgenmsg` for
/// QUEUE, then the attributes, each padded to 4 bytes.
fn message(ty: u16, flags: u16, queue: u16, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; NLMSG_HDRLEN];
    m.extend_from_slice(&[0, 0]); // AF_UNSPEC, NFNETLINK_V0
    m.extend_from_slice(&queue.to_be_bytes());
    for (ty, value) in attrs {
        let len = 4 + value.len();
        m.extend_from_slice(&(len as u16).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(value);
        m.resize((m.len() + 3) & !3, 0);
    }
    let total = m.len() as u32;
    m[..4].copy_from_slice(&total.to_ne_bytes());
    m[4..6].copy_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | ty).to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    m
}
