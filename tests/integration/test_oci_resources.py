# SPDX-License-Identifier: Apache-2.0
"""A bundle's linux.resources beyond memory, cpu quota and pids (issue 19):
each field hutch honours is read back from the container's cgroup on the
host; a value above the instance type's is lowered to it; what hutch refuses
on purpose, and what this host cannot do, fails create naming the field;
`oci update -r` takes the same JSON through the same parser and writer.

Written for this machine's cgroup v1 controllers (the v2 paths' pure logic,
shares to weight and the unified key check, is in tests/unit/test_cgroup.c).
"""
import json
import os
import subprocess

import pytest

from conftest import HUTCH, cgroup_dirs_named, wait_until
from test_oci import NAMESPACES, _root_base, config, oci, pytestmark  # noqa: F401

HOST_V2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
v1_only = pytest.mark.skipif(HOST_V2, reason="cgroup v1 knobs (this machine's)")


def mounted(ctrl):
    """A v1 hierarchy of ctrl is mounted under /sys/fs/cgroup."""
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            parts = ln.split()
            sep = parts.index("-")
            if parts[sep + 1] == "cgroup" and ctrl in parts[sep + 3].split(","):
                return True
    return False


def knob(sandbox, name):
    """Knob name's text in the one cgroup dir of sandbox that has it."""
    found = [os.path.join(d, name) for d in cgroup_dirs_named(sandbox)
             if os.path.exists(os.path.join(d, name))]
    assert len(found) == 1, (name, cgroup_dirs_named(sandbox))
    with open(found[0]) as f:
        return f.read()


def root_dev():
    """major:minor of the block device holding / (a real disk here)."""
    st = os.stat("/")
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(f"/sys/dev/block/{dev}"):
        pytest.skip(f"/ is on {dev}, not a block device")
    return os.major(st.st_dev), os.minor(st.st_dev)


def lx(resources, **more):
    d = {"namespaces": list(NAMESPACES), "resources": resources}
    d.update(more)
    return d


def run(oci, cid, resources, annotations=None, **more):
    b = oci.bundle(["sleep", "1000"], linux=lx(resources, **more),
                   annotations=annotations or {"run.hutch.instance-type": "small"})
    r = oci("run", "-d", "--bundle", b, cid)
    assert r.returncode == 0, r.output
    return oci.status_file(cid)["sandbox"]


def stop(oci, cid, sandbox):
    assert oci("delete", "--force", cid).returncode == 0
    assert wait_until(lambda: not cgroup_dirs_named(sandbox)), cgroup_dirs_named(sandbox)


@v1_only
def test_cpu_memory_fields_in_the_cgroup(oci):
    """cpu.shares, cpus/mems (a cpuset cgroup of its own, its cpus and mems
    filled), memory reservation, swappiness, kernelTCP, disableOOMKiller:
    each one in the container's cgroup; the process is in the cpuset
    cgroup; all of it goes with delete."""
    mib = 1 << 20
    sandbox = run(oci, "r1", {
        "cpu": {"shares": 512, "cpus": "0", "mems": "0", "quota": 50000, "period": 100000},
        "memory": {"limit": 64 * mib, "reservation": 32 * mib, "swap": 64 * mib,
                   "kernel": 64 * mib, "kernelTCP": 16 * mib, "swappiness": 10,
                   "disableOOMKiller": True},
    })
    assert knob(sandbox, "cpu.shares").strip() == "512"
    assert knob(sandbox, "cpuset.cpus").strip() == "0"
    assert knob(sandbox, "cpuset.mems").strip() == "0"
    assert int(knob(sandbox, "memory.soft_limit_in_bytes")) == 32 * mib
    assert int(knob(sandbox, "memory.limit_in_bytes")) == 64 * mib
    assert int(knob(sandbox, "memory.swappiness")) == 10
    assert int(knob(sandbox, "memory.kmem.tcp.limit_in_bytes")) == 16 * mib
    assert "oom_kill_disable 1" in knob(sandbox, "memory.oom_control")
    pid = oci.state("r1")["pid"]
    with open(f"/proc/{pid}/cgroup") as f:
        cpuset = [ln for ln in f if ":cpuset:" in ln]
    assert cpuset and cpuset[0].rstrip().endswith(f"/hutch-{sandbox}"), cpuset
    stop(oci, "r1", sandbox)


@v1_only
def test_blkio_throttle_in_the_cgroup(oci):
    """blockIO's throttle lists, one line per device, in blkio.throttle.*."""
    major, minor = root_dev()
    dev = {"major": major, "minor": minor}
    sandbox = run(oci, "r2", {"blockIO": {
        "throttleReadBpsDevice": [dict(dev, rate=1048576)],
        "throttleWriteBpsDevice": [dict(dev, rate=2097152)],
        "throttleReadIOPSDevice": [dict(dev, rate=100)],
        "throttleWriteIOPSDevice": [dict(dev, rate=200)],
    }})
    for name, v in (("read_bps_device", 1048576), ("write_bps_device", 2097152),
                    ("read_iops_device", 100), ("write_iops_device", 200)):
        assert knob(sandbox, f"blkio.throttle.{name}").strip() == f"{major}:{minor} {v}"
    stop(oci, "r2", sandbox)


@v1_only
def test_cpuset_under_a_made_cgroups_path(oci):
    """A cgroupsPath whose parents hutch makes: each new cpuset parent gets
    its parent's cpus and mems (else nothing could join), and goes after."""
    path = f"hutch-res-{os.getpid()}/pod/c1"
    sandbox = run(oci, "r3", {"cpu": {"cpus": "0"}}, cgroupsPath=path)
    pid = oci.state("r3")["pid"]
    with open(f"/proc/{pid}/cgroup") as f:
        assert any(":cpuset:" in ln and ln.rstrip().endswith(path) for ln in f)
    own = open("/proc/self/cgroup").read()
    own_cpuset = [ln.split(":", 2)[2].strip() for ln in own.splitlines() if ":cpuset:" in ln][0]
    base = "/sys/fs/cgroup/cpuset" + own_cpuset.rstrip("/")
    with open(f"{base}/{path}/cpuset.cpus") as f:
        assert f.read().strip() == "0"
    with open(f"{base}/hutch-res-{os.getpid()}/pod/cpuset.cpus") as f:
        assert f.read().strip() != ""
    assert oci("delete", "--force", "r3").returncode == 0
    assert wait_until(lambda: not os.path.exists(f"{base}/hutch-res-{os.getpid()}"))


@v1_only
def test_swap_zero_or_above_the_limit_is_no_swap(oci):
    """memory.swap 0 (unset, as engines send it) or above the limit (podman
    gives twice the limit): accepted, and the container still has no swap."""
    for cid, swap in (("s0", 0), ("s1", 128 << 20)):
        sandbox = run(oci, cid, {"memory": {"limit": 64 << 20, "swap": swap}})
        assert int(knob(sandbox, "memory.memsw.limit_in_bytes")) == 64 << 20
        stop(oci, cid, sandbox)


@v1_only
def test_reservation_lowered_to_the_limit(oci):
    """A reservation above the memory limit (the bundle's, else the
    instance type's) is lowered to it: a sandbox never reserves more than
    it may use."""
    sandbox = run(oci, "r4", {"memory": {"reservation": 1 << 40}},
                  annotations={"run.hutch.instance-type": "nano"})
    limit = int(knob(sandbox, "memory.limit_in_bytes"))
    assert int(knob(sandbox, "memory.soft_limit_in_bytes")) == limit
    assert limit < 1 << 40
    stop(oci, "r4", sandbox)


def refused(oci, tmp_path, resources, **more):
    c = config(["true"], linux=lx(resources, **more))
    b = oci.bundle(["true"])
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(c, f)
    r = oci("create", "--bundle", b, "x1")
    assert r.returncode == 1
    assert not os.path.exists(os.path.join(oci.root, "x1"))
    return r.output


@pytest.mark.parametrize("resources,msg", [
    ({"cpu": {"realtimeRuntime": 950000}},
     "linux.resources.cpu.realtimeRuntime: refused (hutch gives a sandbox no realtime"),
    ({"cpu": {"realtimePeriod": 1000000}}, "linux.resources.cpu.realtimePeriod: refused"),
    ({"cpu": {"idle": 1}}, "linux.resources.cpu.idle: refused"),
    ({"rdma": {"mlx5_0": {"hcaHandles": 1}}}, "linux.resources.rdma: refused"),
    ({"cpu": {"shares": 262145}}, "linux.resources.cpu.shares: not a whole number from 0 to"),
    ({"cpu": {"cpus": "0;1"}}, "linux.resources.cpu.cpus: not a list of numbers"),
    ({"memory": {"limit": 64 << 20, "swap": 32 << 20}},
     "linux.resources.memory.swap: 33554432 is below memory.limit"),
    ({"memory": {"swappiness": 101}}, "linux.resources.memory.swappiness: not a whole number"),
    ({"memory": {"limit": 64 << 20, "swap": 1}},
     "linux.resources.memory.swap: 1 is below memory.limit"),
    ({"blockIO": {"weight": 5}}, "linux.resources.blockIO.weight: a weight is 10 to 1000"),
    ({"blockIO": {"throttleReadBpsDevice": [{"major": 8, "minor": 0, "rate": 1}] * 17}},
     "linux.resources.blockIO.throttleReadBpsDevice: more than 16"),
    ({"blockIO": {"throttleReadBpsDevice": [{"rate": 1}]}},
     "linux.resources.blockIO.throttleReadBpsDevice[0]: no major or minor"),
    ({"hugepageLimits": [{"pageSize": "2XB", "limit": 0}]},
     "linux.resources.hugepageLimits[0].pageSize: not a size"),
    ({"network": {"priorities": [{"name": "eth0/../x", "priority": 1}]}},
     "linux.resources.network.priorities[0].name: not an interface name"),
    ({"unified": {"../memory.max": "1"}}, "linux.resources.unified.../memory.max: not a cgroup"),
    ({"unified": {"cgroup.procs": "1"}},
     "linux.resources.unified.cgroup.procs: not a knob of a controller hutch allows"),
    ({"unified": {"memory.oom.group": "1"}}, "linux.resources.unified.memory.oom.group: hutch's"),
    ({"unified": {f"memory.k{i}": "1" for i in range(17)}},
     "linux.resources.unified: more than 16 keys"),
    ({"devices": [{"access": "rwm"}]}, "linux.resources.devices[0]: no boolean allow"),
])
def test_refusals_name_the_field(oci, tmp_path, resources, msg):
    out = refused(oci, tmp_path, resources)
    assert msg in out, out


@v1_only
@pytest.mark.parametrize("resources,msg", [
    # cgroup v2's keys on a v1 host: nowhere to write them.
    ({"unified": {"memory.max": "max"}},
     "linux.resources.unified.memory.max: cgroup v2 keys, and this host has cgroup v1"),
    # Controllers or knobs this host lacks: the field and the fix.
    pytest.param({"hugepageLimits": [{"pageSize": "2MB", "limit": 0}]},
                 "linux.resources.hugepageLimits: this host has no cgroup v1 hugetlb",
                 marks=pytest.mark.skipif(mounted("hugetlb"), reason="hugetlb mounted")),
    pytest.param({"network": {"classID": 42}},
                 "linux.resources.network.classID: this host has no cgroup v1 net_cls",
                 marks=pytest.mark.skipif(mounted("net_cls"), reason="net_cls mounted")),
    pytest.param({"network": {"priorities": [{"name": "eth0", "priority": 1}]}},
                 "linux.resources.network.priorities: this host has no cgroup v1 net_prio",
                 marks=pytest.mark.skipif(mounted("net_prio"), reason="net_prio mounted")),
    pytest.param({"blockIO": {"weight": 500}},
                 "linux.resources.blockIO.weight: this host's cgroup",
                 marks=pytest.mark.skipif(os.path.exists("/sys/fs/cgroup/blkio/blkio.weight"),
                                          reason="this kernel has blkio.weight")),
])
def test_host_cannot_names_the_field(oci, tmp_path, resources, msg):
    out = refused(oci, tmp_path, resources)
    assert msg in out, out
    assert "drop the field" in out, out


@v1_only
def test_devices_accepted_not_granted(oci):
    """linux.resources.devices (an engine's deny-all then allow list) is
    accepted; /dev stays hutch's default set whatever it allows."""
    b = oci.bundle(["sh", "-c", "ls /dev; echo done"],
                   linux=lx({"devices": [{"allow": False, "access": "rwm"},
                                         {"allow": True, "type": "b", "major": 254,
                                          "minor": 0, "access": "rwm"}]}))
    r = oci("run", "--bundle", b, "d1")
    assert r.returncode == 0, r.output
    assert "null" in r.output and "vda" not in r.output and "done" in r.output, r.output


@v1_only
def test_update_takes_the_same_fields(oci, tmp_path):
    """oci update -r: the same parser and writer; a reservation above the
    limit is lowered; a hierarchy not given at create is an error naming
    the field, not silence; a refusal names the field."""
    sandbox = run(oci, "u1", {"cpu": {"shares": 256}, "memory": {"limit": 64 << 20}})
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"cpu": {"shares": 768},
                               "memory": {"reservation": 1 << 40, "swappiness": 30}}))
    r = oci("update", "-r", str(res), "u1")
    assert r.returncode == 0, r.output
    assert knob(sandbox, "cpu.shares").strip() == "768"
    assert int(knob(sandbox, "memory.soft_limit_in_bytes")) == 64 << 20
    assert int(knob(sandbox, "memory.swappiness")) == 30
    res.write_text(json.dumps({"cpu": {"cpus": "0"}}))
    r = oci("update", "-r", str(res), "u1")
    assert r.returncode == 1 and "linux.resources: cpu.cpus/mems was not given at create" \
        in r.output, r.output
    res.write_text(json.dumps({"cpu": {"realtimeRuntime": 10}}))
    with open(res) as f:
        r = subprocess.run([HUTCH, "oci", "--root", oci.root, "update", "-r", "-", "u1"],
                           stdin=f, capture_output=True, env=oci.env, timeout=60)
    assert r.returncode == 1 and b"linux.resources.cpu.realtimeRuntime" in r.stderr, r.stderr
    assert knob(sandbox, "cpu.shares").strip() == "768"
    stop(oci, "u1", sandbox)


@v1_only
@pytest.mark.parametrize("quota,period,itype,want", [
    (50000, 500000, "small", 50000),    # 100 millis at its own period, exact
    (33333, 100000, "small", 33333),    # not rounded to whole millis
    (400000, 500000, "nano", 125000),   # 800 millis lowered to nano's 250
])
def test_cpu_quota_at_its_own_period(oci, quota, period, itype, want):
    """cpu.quota stays at the bundle's cpu.period (runtime-tools reads both
    back); above the instance type's share it is lowered at that period."""
    sandbox = run(oci, "p1", {"cpu": {"quota": quota, "period": period}},
                  annotations={"run.hutch.instance-type": itype})
    assert int(knob(sandbox, "cpu.cfs_period_us")) == period
    assert int(knob(sandbox, "cpu.cfs_quota_us")) == want
    stop(oci, "p1", sandbox)


v2_only = pytest.mark.skipif(not HOST_V2, reason="cgroup v2 knobs (the v2 VM's)")


@v2_only
def test_v2_fields_in_the_cgroup(oci):
    """v2: shares as cpu.weight (runc's conversion), the reservation as
    memory.low, the quota at its period in cpu.max, unified keys written
    and those naming hutch's limits lowered to them."""
    mib = 1 << 20
    sandbox = run(oci, "v1", {
        "cpu": {"shares": 512, "quota": 50000, "period": 500000},
        "memory": {"limit": 64 * mib, "reservation": 32 * mib},
        "unified": {"memory.high": "max", "pids.max": "max", "memory.swap.max": "max"},
    })
    assert knob(sandbox, "cpu.weight").strip() == "20"
    assert int(knob(sandbox, "memory.low")) == 32 * mib
    assert knob(sandbox, "cpu.max").strip() == "50000 500000"
    assert int(knob(sandbox, "memory.high")) == 64 * mib
    assert int(knob(sandbox, "pids.max")) == 1024  # small's
    if any(os.path.exists(os.path.join(d, "memory.swap.max"))
           for d in cgroup_dirs_named(sandbox)):
        assert knob(sandbox, "memory.swap.max").strip() == "0"
    stop(oci, "v1", sandbox)


@v2_only
@pytest.mark.parametrize("resources,field", [
    ({"memory": {"swappiness": 10}}, "memory.swappiness"),
    ({"memory": {"disableOOMKiller": True}}, "memory.disableOOMKiller"),
    ({"memory": {"kernelTCP": 1 << 20}}, "memory.kernelTCP"),
    ({"network": {"classID": 42}}, "network.classID"),
    ({"blockIO": {"leafWeight": 100}}, "blockIO.leafWeight"),
])
def test_v2_refuses_v1_only_fields(oci, tmp_path, resources, field):
    out = refused(oci, tmp_path, resources)
    assert f"linux.resources.{field}: cgroup v2 has no such knob" in out, out
