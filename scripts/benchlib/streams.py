"""The exec -i streams (--streams) and the memory of idle sandboxes."""

import contextlib
import json
import shutil
import socket
import statistics
import subprocess
import time

from .common import HutchError, interleave, PeerError, proc_comm, proc_tree, pss_kib


def stream_sample(argv, env, size, direction, block):
    """Seconds to move size bytes through argv's stdin (direction "in":
    the command is cat > /dev/null, fed from a pipe) or out of its stdout
    (direction "out": head -c SIZE /dev/zero, read from a pipe): the same
    producer and consumer, this process, for every variant."""
    if direction == "in":
        p = subprocess.Popen(argv + ["sh", "-c", "cat > /dev/null"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        t0 = time.perf_counter()
        for _ in range(size // len(block)):
            p.stdin.write(block)
        p.stdin.close()
    else:
        p = subprocess.Popen(argv + ["head", "-c", str(size), "/dev/zero"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env)
        t0 = time.perf_counter()
        buf, got = bytearray(1 << 20), 0
        while True:
            n = p.stdout.readinto(buf)
            if not n:
                break
            got += n
        if got != size:
            raise PeerError("%s gave %d bytes of %d" % (" ".join(argv), got, size))
    if p.wait() != 0:
        raise PeerError("%s exited with %d" % (" ".join(argv), p.returncode))
    return time.perf_counter() - t0


def echo_round_trips(sock_path, count, tty=False):
    """One byte to cat and back over POST /exec's frames, count times:
    the seconds of each round trip. With tty, a keystroke on the sandbox's
    terminal and its echo (cat, in canonical mode, only holds the line)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    req = {"argv": ["cat"]}
    if tty:
        req["tty"] = {"rows": 24, "cols": 80}
    body = json.dumps(req).encode()
    s.sendall(b"POST /exec HTTP/1.1\r\nHost: s\r\nConnection: Upgrade\r\n"
              b"Upgrade: hutch-exec\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    if b" 101 " not in head.split(b"\r\n", 1)[0]:
        raise HutchError("POST /exec answered %r" % head[:200])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 6)
    out = []
    for i in range(count):
        t0 = time.perf_counter()
        s.sendall(b"\x00\x00\x00\x00\x01x")
        got = s.recv(64)
        out.append(time.perf_counter() - t0)
        if got != b"\x01\x00\x00\x00\x01x":
            raise HutchError("echo frame %r" % got)
    s.close()
    return out


def measure_streams(args, res, hutch, bwrap, peers_oci):
    """exec -i: 1 GiB into a command's stdin and 1 GiB out of its stdout,
    next to peers that run a command in a live sandbox (nsenter into bwrap,
    crun exec: both hand the caller's own pipes to the command, no relay,
    so they are the floor); then the one-byte echo round trip over POST
    /exec (pipes, no terminal)."""
    size = 1 << 30
    block = bytes(1 << 20)
    g = res.group("exec -i: 1 GiB through stdin and stdout (target: >= 500 MB/s each way, "
                  "within 1.5x of the best peer)")
    _, sid = hutch.create()
    live, bw_pid = [], None
    try:
        for o in peers_oci:
            with contextlib.suppress(PeerError):
                live.append((o, o.start_idle()[1]))
        if bwrap and shutil.which("nsenter"):
            with contextlib.suppress(PeerError):
                bw_pid = bwrap.start_idle()[1]
        none = contextlib.nullcontext()
        cmds = [("hutch exec -i ID", [hutch.bin, "exec", "-i", sid, "--"], none)]
        if bw_pid:
            cmds.append(("nsenter into bwrap", ["nsenter", "-t", str(bw_pid), "-a", "-r", "-w"],
                         none))
        for o, cid in live:  # in the peer's mount namespace, as its own calls are
            cmds.append(("%s exec" % o.name, o.global_args() + ["exec", cid], o.ns))
        v = []

        def sample(argv, ns, direction):
            with ns:
                return stream_sample(argv, hutch.r.env, size, direction, block)
        for direction in ("in", "out"):
            for name, argv, ns in cmds:
                v.append(("%s %s" % (name, "stdin" if direction == "in" else "stdout"),
                          lambda a=argv, n=ns, d=direction: sample(a, n, d)))
        interleave(g, v, max(1, min(args.iterations, 3)), warmup=0)
        for direction in ("stdin", "stdout"):
            for peer in ("nsenter into bwrap", "crun exec"):
                g["pairs"].append(("hutch exec -i ID %s" % direction,
                                   "%s %s" % (peer, direction), "<= 1.5"))
        for name, samples in g["variants"].items():
            if samples:
                res.notes.append("%s: %.0f MB/s (median of %d)"
                                 % (name, size / statistics.median(samples) / 1e6, len(samples)))
        for tty, what in ((False, "one byte to cat and back over POST /exec (pipes)"),
                          (True, "keystroke echo on an exec -t terminal (target: median "
                                 "and p99 <= 1 ms)")):
            rt = sorted(echo_round_trips(hutch.socket(sid), 200 if args.quick else 2000, tty))
            res.notes.append("%s: median %.3f ms, p99 %.3f ms (%d round trips)"
                             % (what, rt[len(rt) // 2] * 1e3, rt[int(len(rt) * 0.99)] * 1e3,
                                len(rt)))
    finally:
        hutch.rm(sid)
        for o, cid in live:
            with contextlib.suppress(PeerError):
                o.delete(cid)


def measure_memory(args, res, hutch, bwrap, peers_oci):
    N = args.sandboxes
    ids = []
    try:
        for _ in range(N):
            ids.append(hutch.create()[1])
        time.sleep(0.5)
        total, procs = 0, 0
        for sid in ids:
            info = hutch.inspect(sid)
            for key in ("supervisor_pid", "init_pid"):
                total += pss_kib(int(info[key]))
                procs += 1
        res.memory.append(("hutch (supervisor + init)", total / N,
                           "%d processes, %d sandboxes" % (procs, N)))
    finally:
        for sid in ids:
            hutch.rm(sid)

    if bwrap:
        try:
            pids = []
            for _ in range(N):
                p, _leaf = bwrap.start_idle()
                pids.append(p.pid)
            time.sleep(0.5)
            with_child, runtime_only, procs = 0, 0, 0
            for pid in pids:
                for q in proc_tree(pid):
                    k = pss_kib(q)
                    procs += 1
                    with_child += k
                    if proc_comm(q) == "bwrap":
                        runtime_only += k
            res.memory.append(("bwrap (2 bwrap processes + sleeping child)", with_child / N,
                               "%d processes, %d sandboxes" % (procs, N)))
            res.memory.append(("bwrap (its 2 processes only)", runtime_only / N, ""))
        except (PeerError, OSError) as e:
            res.memory.append(("bwrap", None, str(e)))
        finally:
            bwrap.cleanup()

    for o in peers_oci:
        cids = []
        try:
            for _ in range(N):
                cids.append(o.start_idle()[1])
            time.sleep(0.5)
            total = sum(pss_kib(o.pid(c)) for c in cids)
            res.memory.append(("%s (container's sleep; %s leaves no monitor)" % (o.name, o.name),
                               total / N, "%d sandboxes" % N))
        except (PeerError, OSError, ValueError, KeyError) as e:
            res.memory.append((o.name, None, str(e)))
        finally:
            for c in cids:
                try:
                    o.delete(c)
                except PeerError:
                    pass
