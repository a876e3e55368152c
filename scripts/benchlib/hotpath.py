"""The hot path rows: run, create, exec, rm, CLI start, the API round trip, wake."""

import json
import os
import shutil
import subprocess
import sys
import time

from .common import ApiClient, HutchError, interleave, log, PeerError, REPO, UnixHTTPConnection
from .executor import measure_executor
from .image import measure_image
from .streams import measure_memory, measure_streams
from .workspace import measure_files


def measure(args, res, hutch, bwrap, crun, runc, tmpdir):
    n = args.iterations
    peers_oci = [x for x in (crun, runc) if x is not None]
    true = ["true"]
    # the Debian interpreter by absolute path, on the host and inside: the
    # sandboxes see the host's /usr, so it is the same binary everywhere
    pypass = ["/usr/bin/python3", "-c", "pass"]

    # 1. start + true + teardown
    log("start + true + teardown")
    g = res.group("start + `true` + teardown (one shot)")
    v = [("hutch run -- true", lambda: hutch.run(true))]
    if bwrap:
        v.append(("bwrap ... true", lambda: bwrap.run(true)))
    for o in peers_oci:
        v.append(("%s run (true)" % o.name, lambda o=o: o.run(true)))
    v.append(("floor: unshare -UrmpinuC -f --mount-proc true",
              lambda: hutch.r.timed(["unshare", "-UrmpinuC", "-f", "--mount-proc", "true"])[0]))
    v.append(("floor: plain true", lambda: hutch.r.timed(["true"])[0]))
    interleave(g, v, n)
    g["pairs"] = [("hutch run -- true", "bwrap ... true", "<= 0.8"),
                  ("hutch run -- true", "crun run (true)", "<= 0.4"),
                  ("hutch run -- true", "runc run (true)", None)]
    if args.run_true:
        return

    # 2 + 4. create-to-ready and close: create, then close, each timed
    log("create-to-ready and close")
    gc = res.group("create-to-ready")
    gd = res.group("close")
    gc["order"] = ["hutch create"] + ["%s run -d (sleep)" % o.name for o in peers_oci]
    gd["order"] = ["hutch rm"] + ["%s delete -f" % o.name for o in peers_oci]
    gc["variants"] = {k: [] for k in gc["order"]}
    gd["variants"] = {k: [] for k in gd["order"]}

    def hutch_cycle(record=True):
        dt, sid = hutch.create()
        dd = hutch.rm(sid)
        if record:
            gc["variants"]["hutch create"].append(dt)
            gd["variants"]["hutch rm"].append(dd)

    def oci_cycle(o, record=True):
        dt, cid = o.start_idle()
        dd = o.delete(cid)
        if record:
            gc["variants"]["%s run -d (sleep)" % o.name].append(dt)
            gd["variants"]["%s delete -f" % o.name].append(dd)

    live = [("hutch", hutch_cycle)] + [(o.name, lambda record=True, o=o: oci_cycle(o, record))
                                       for o in peers_oci]
    for i in range(-1, n):  # round -1 is the warm-up, not recorded
        for j in range(len(live)):
            if not live:
                break
            name, fn = live[(i + j) % len(live)]
            try:
                fn(record=i >= 0)
            except PeerError as e:
                gc["errors"]["%s run -d (sleep)" % name] = str(e)
                live.remove((name, fn))
    gc["pairs"] = [("hutch create", "crun run -d (sleep)", "<= 0.8"),
                   ("hutch create", "runc run -d (sleep)", None)]
    gd["pairs"] = [("hutch rm", "crun delete -f", None),
                   ("hutch rm", "runc delete -f", None)]

    # 2b. create-to-ready per network mode: what each mode's wiring costs
    # (all: veth, addresses, nftables check; allow: listeners, local route)
    log("create-to-ready per network mode")
    gm = res.group("create-to-ready per network mode")

    def create_mode(*opts):
        dt, sid = hutch.create(*opts)
        hutch.rm(sid)
        return dt

    vm = [("hutch create --network %s" % m, lambda m=m: create_mode("--network", m))
          for m in ("none", "all", "allow:example.com")]
    interleave(gm, vm, n)
    gm["pairs"] = [("hutch create --network all", "hutch create --network none", None),
                   ("hutch create --network allow:example.com", "hutch create --network none",
                    None)]

    # 2c. create-to-ready from a warm pool (hutch pool): the CLI's claim and
    # the Python client's own claim (no CLI process), against a cold create.
    # Each sample waits until the keeper has refilled, so every claim finds
    # a ready sandbox and no refill runs during it.
    log("create-to-ready from a warm pool")
    gp = res.group("create-to-ready from a warm pool (target: <= 2 ms median)")
    hutch.r.timed([hutch.bin, "pool", "start", "--size", "2"], HutchError)
    try:
        sys.path.insert(0, os.path.join(REPO, "clients", "python"))
        os.environ["HUTCH_RUNTIME_DIR"] = hutch.r.env["HUTCH_RUNTIME_DIR"]
        os.environ["HUTCH_IMAGE_STORE"] = hutch.r.env["HUTCH_IMAGE_STORE"]
        from hutch import _pool as pypool, LocalSandbox

        def refilled():
            for _ in range(3000):
                _, out = hutch.r.timed([hutch.bin, "pool", "ls", "--json"], HutchError,
                                       capture=True)
                if all(p["ready"] >= p["size"] for p in json.loads(out)):
                    return
                time.sleep(0.01)
            raise HutchError("the pool did not refill in 30 s")

        def pool_cli():
            refilled()
            dt, sid = hutch.create()
            hutch.rm(sid)
            return dt

        py_sb = LocalSandbox()

        def pool_python():
            refilled()
            t0 = time.perf_counter()
            info = pypool.try_claim(hutch.bin, py_sb._cli_options())
            dt = time.perf_counter() - t0
            if not info:
                raise HutchError("the Python client found no pooled sandbox")
            hutch.ids.append(info["id"])
            hutch.rm(info["id"])
            return dt

        def cold():
            dt, sid = hutch.create("--instance-type", "small")  # no pool for small
            hutch.rm(sid)
            return dt

        def run_pool():
            refilled()
            return hutch.run(true)

        variants = [("hutch create (warm pool)", pool_cli),
                    ("Python LocalSandbox claim (warm pool)", pool_python),
                    ("hutch create (cold)", cold),
                    ("hutch run -- true (warm pool)", run_pool)]
        if bwrap:
            variants.append(("bwrap ... true", lambda: bwrap.run(true)))
        interleave(gp, variants, n)
        gp["pairs"] = [("hutch create (warm pool)", "hutch create (cold)", None),
                       ("Python LocalSandbox claim (warm pool)", "hutch create (cold)", None),
                       ("hutch run -- true (warm pool)", "bwrap ... true", "<= 0.8")]
    finally:
        subprocess.run([hutch.bin, "pool", "stop", "--all"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=hutch.r.env)

    # 2d. create-to-ready from an image (--image, issue 14) next to the
    # host-derived root: a small root of this host's own files (the tests'
    # rootimage.py: dash, coreutils, python3), imported into a store of
    # its own; cold, and from a warm pool of the image.
    measure_image(args, res, hutch, crun, tmpdir)

    # 3. one command on a live sandbox
    log("one command on a live sandbox")
    _, sid = hutch.create()
    api = ApiClient(hutch.socket(sid))
    live_oci = []
    bw_pid = None
    g3 = res.group("one `true` on a live sandbox")
    try:
        for o in peers_oci:
            try:
                _, cid = o.start_idle()
                live_oci.append((o, cid))
            except PeerError as e:
                g3["errors"]["%s exec" % o.name] = str(e)
        if bwrap and shutil.which("nsenter"):
            try:
                _, bw_pid = bwrap.start_idle()
            except PeerError as e:
                g3["errors"]["nsenter into bwrap"] = str(e)
        v = [("hutch exec ID -- true", lambda: hutch.exec(sid, true)),
             ("hutch API POST /run (kept-open connection)", lambda: api.run(true))]
        for o, cid in live_oci:
            v.append(("%s exec" % o.name, lambda o=o, cid=cid: o.exec(cid, true)))
        v.append(("floor: hutch version (CLI process start only)",
                  lambda: hutch.r.timed([hutch.bin, "version"], HutchError)[0]))
        # the CLI start's own floor, interleaved with it (issue 31: <= 1.2x)
        v.append(("floor: plain true", lambda: hutch.r.timed(["true"])[0]))
        if bw_pid:
            v.append(("nsenter into bwrap",
                      lambda: hutch.r.timed(["nsenter", "-t", str(bw_pid), "-a", "-r", "-w",
                                             "true"])[0]))
        interleave(g3, v, n, warmup=2)
        api.server_ms.clear()
        for _ in range(n):  # the server's own view: init's fork + exec + wait
            api.run(true)
        name = "  of which server-side duration_ms (fork/exec/wait in init)"
        g3["order"].insert(2, name)
        g3["variants"][name] = api.server_ms.get("true", [])
        g3["pairs"] = [("hutch exec ID -- true", "crun exec", "<= 0.3"),
                       ("floor: hutch version (CLI process start only)", "floor: plain true",
                        "<= 1.2"),
                       ("hutch exec ID -- true", "runc exec", None),
                       ("hutch exec ID -- true", "nsenter into bwrap", None),
                       ("hutch API POST /run (kept-open connection)", "crun exec", None),
                       ("hutch API POST /run (kept-open connection)", "nsenter into bwrap", None)]
        if api.reconnects > 0:
            res.notes.append("the API server closed the kept-open connection %d times; "
                             "those requests include a reconnect" % api.reconnects)

        # 6. python3 -c pass
        log("python3 -c pass")
        g6 = res.group("`python3 -c pass`")
        v = [("hutch API POST /run python3 -c pass (live sandbox)", lambda: api.run(pypass)),
             ("hutch exec ID -- python3 -c pass", lambda: hutch.exec(sid, pypass)),
             ("host: python3 -c pass", lambda: hutch.r.timed(pypass)[0]),
             ("hutch run -- python3 -c pass (fresh)", lambda: hutch.run(pypass))]
        if bwrap:
            v.append(("bwrap ... python3 -c pass (fresh)", lambda: bwrap.run(pypass)))
        for o in peers_oci:
            v.append(("%s run python3 -c pass (fresh)" % o.name, lambda o=o: o.run(pypass)))
        interleave(g6, v, n)
        g6["pairs"] = [("hutch API POST /run python3 -c pass (live sandbox)",
                        "host: python3 -c pass", "<= 1.1"),
                       ("hutch exec ID -- python3 -c pass", "host: python3 -c pass", None),
                       ("hutch run -- python3 -c pass (fresh)",
                        "bwrap ... python3 -c pass (fresh)", None),
                       ("hutch run -- python3 -c pass (fresh)",
                        "crun run python3 -c pass (fresh)", None)]
    finally:
        api.close()
        hutch.rm(sid)
        for o, cid in live_oci:
            try:
                o.delete(cid)
            except PeerError:
                pass
        bwrap and bwrap.cleanup()

    # 7. wake-up from idle sleep
    log("wake from idle sleep")
    measure_wake(args, res, hutch)
    log("executor contract /run")
    measure_executor(args, res, hutch)

    # 8. 1 GiB through raw PUT/GET /files
    log("1 GiB file through PUT/GET /files")
    measure_files(args, res, hutch)

    # 9. exec -i streams and echo
    log("exec -i: 1 GiB each way, echo round trip")
    measure_streams(args, res, hutch, bwrap, peers_oci)

    # 5. memory per idle sandbox
    log("host memory per idle sandbox (N=%d)" % args.sandboxes)
    measure_memory(args, res, hutch, bwrap, peers_oci)


def measure_wake(args, res, hutch):
    """Idle sleep: a sandbox with --idle-timeout 1 is frozen; the next request
    thaws it before it is served. Server side: request arrival -> thawed
    (GET /status idle.last_wake_ms; /status itself does not wake a sandbox).
    Client side: POST /run true on a sleeping and on an awake sandbox. Each
    sample waits > 1 s for the sleep, so at most 10 samples."""
    g = res.group("wake from idle sleep (target: thaw < 5 ms)")
    names = ["server: request arrival -> thawed",
             "POST /run true, sandbox asleep (includes the thaw)",
             "POST /run true, sandbox awake"]
    g["order"] = list(names)
    g["variants"] = {k: [] for k in names}
    _, sid = hutch.create("--idle-timeout", "1")
    sock = hutch.socket(sid)
    api = ApiClient(sock)

    def status():
        c = UnixHTTPConnection(sock)
        try:
            c.request("GET", "/status")
            return json.loads(c.getresponse().read())
        finally:
            c.close()
    try:
        for _ in range(max(3, min(args.iterations, 10))):
            end = time.monotonic() + 10
            while status().get("state") != "sleeping":
                if time.monotonic() > end:
                    raise HutchError("sandbox with --idle-timeout 1 did not sleep in 10 s")
                time.sleep(0.05)
            g["variants"][names[1]].append(api.run(["true"]))
            g["variants"][names[0]].append(status()["idle"]["last_wake_ms"] / 1000.0)
            g["variants"][names[2]].append(api.run(["true"]))
    finally:
        api.close()
        hutch.rm(sid)
