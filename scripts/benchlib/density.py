"""Density (--density): many idle sandboxes at once, parallel creates cold and from a pool."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

from .common import HutchError, log, pss_kib, REPO


# --------------------------------------------------------------------------
# density (--density): many idle sandboxes at once, parallel creates

def sandbox_state(rtdir, sid):
    with open(os.path.join(rtdir, sid, "state.json")) as f:
        return json.load(f)


def health(sock_path, timeout=10):
    """GET /health on a new connection: True if it answers 200."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n")
        buf = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            buf += b
        return buf.startswith(b"HTTP/1.1 200")
    except OSError:
        return False
    finally:
        s.close()


def parallel_creates(hutch, total, clients, *opts):
    """total `hutch create` from `clients` threads at once (each its own CLI
    process per create); returns (wall seconds, ids, errors)."""
    ids, errors, lock = [], [], threading.Lock()
    per = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]

    def client(k):
        for _ in range(k):
            r = subprocess.run([hutch.bin, "create", *opts], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=hutch.r.env, text=True)
            with lock:
                if r.returncode == 0 and r.stdout.strip():
                    ids.append(r.stdout.strip())
                    hutch.ids.append(r.stdout.strip())
                else:
                    errors.append(r.stderr.strip()[:300])

    threads = [threading.Thread(target=client, args=(k,)) for k in per]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, ids, errors


def rm_all(hutch):
    t0 = time.perf_counter()
    r = subprocess.run([hutch.bin, "rm", "-q", "--all"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=hutch.r.env, text=True)
    dt = time.perf_counter() - t0
    hutch.ids.clear()
    if r.returncode != 0:
        raise HutchError("hutch rm --all: %s" % r.stderr.strip()[:300])
    return dt


def wait_pool_full(hutch):
    for _ in range(12000):
        _, out = hutch.r.timed([hutch.bin, "pool", "ls", "--json"], HutchError, capture=True)
        if all(p["ready"] >= p["size"] for p in json.loads(out)):
            return
        time.sleep(0.05)
    raise HutchError("the pool did not fill in 600 s")


def python_claims(hutch, total, clients):
    """total claims by the Python client's own pool code from `clients`
    threads; returns (wall seconds, claims that found a sandbox)."""
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))
    os.environ["HUTCH_RUNTIME_DIR"] = hutch.r.env["HUTCH_RUNTIME_DIR"]
    os.environ["HUTCH_IMAGE_STORE"] = hutch.r.env["HUTCH_IMAGE_STORE"]
    from hutch import _pool as pypool, LocalSandbox
    got, lock = [], threading.Lock()

    def client(k):
        sb = LocalSandbox()
        for _ in range(k):
            info = pypool.try_claim(hutch.bin, sb._cli_options())
            if info:
                with lock:
                    got.append(info["id"])
                    hutch.ids.append(info["id"])

    threads = [threading.Thread(target=client, args=(total // clients,)) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, len(got)


def measure_density(args, res, hutch):
    """(1) N idle sandboxes alive at once: time to create them (4 parallel
    clients), PSS of every supervisor and init, /health of each, time to
    remove them all; (2) 100 creates from 10 parallel clients, cold and
    from a warm pool of 100."""
    rtdir = hutch.r.env["HUTCH_RUNTIME_DIR"]
    N = args.density_n
    log("density: creating %d idle sandboxes (4 parallel clients)" % N)
    d = {"n": N}
    try:
        dt, ids, errors = parallel_creates(hutch, N, 4)
        d["create_s"] = dt
        d["created"] = len(ids)
        d["create_errors"] = errors[:5]
        d["create_error_count"] = len(errors)
        time.sleep(0.5)  # let the last ones settle (their CLI has exited)
        total = sup_kib = init_kib = 0
        missing = 0
        for sid in ids:
            try:
                st = sandbox_state(rtdir, sid)
                a, b = pss_kib(int(st["supervisor_pid"])), pss_kib(int(st["init_pid"]))
            except (OSError, ValueError, KeyError):
                missing += 1
                continue
            sup_kib += a
            init_kib += b
        measured = len(ids) - missing
        if measured:
            d["pss_total_mib"] = (sup_kib + init_kib) / 1024
            d["pss_per_sandbox_mib"] = (sup_kib + init_kib) / measured / 1024
            d["pss_supervisor_kib"] = sup_kib / measured
            d["pss_init_kib"] = init_kib / measured
        d["pss_missing"] = missing
        t0 = time.perf_counter()
        d["healthy"] = sum(1 for sid in ids if health(os.path.join(rtdir, sid, "api.sock")))
        d["health_s"] = time.perf_counter() - t0
        with open("/proc/meminfo") as f:
            mem = dict((l.split(":")[0], int(l.split()[1])) for l in f)
        d["mem_available_mib"] = mem["MemAvailable"] / 1024
    finally:
        log("density: removing them")
        d["rm_all_s"] = rm_all(hutch)
    left = [x for x in os.listdir(rtdir) if not x.startswith(".")]
    d["left_after_rm"] = len(left)

    # (2) 100 creates from 10 parallel clients
    log("density: 100 creates from 10 parallel clients, cold")
    dt, ids, errors = parallel_creates(hutch, 100, 10)
    d["cold100_s"], d["cold100_ok"], d["cold100_errors"] = dt, len(ids), errors[:3]
    rm_all(hutch)
    log("density: 100 creates from 10 parallel clients, warm pool of 100")
    try:
        t0 = time.perf_counter()
        hutch.r.timed([hutch.bin, "pool", "start", "--size", "100"], HutchError)
        wait_pool_full(hutch)
        d["pool_fill_s"] = time.perf_counter() - t0
        # the keeper refills in the background meanwhile, as in real use
        dt, ids, errors = parallel_creates(hutch, 100, 10)
        d["warm100_s"], d["warm100_ok"], d["warm100_errors"] = dt, len(ids), errors[:3]
        rm_all(hutch)
        # the same from the Python client, which claims itself (no CLI process)
        wait_pool_full(hutch)
        dt, n = python_claims(hutch, 100, 10)
        d["warm100_py_s"], d["warm100_py_ok"] = dt, n
    finally:
        subprocess.run([hutch.bin, "pool", "stop", "--all"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=hutch.r.env)
        rm_all(hutch)
    res.density = d
