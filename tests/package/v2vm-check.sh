# SPDX-License-Identifier: Apache-2.0
# The Debian packages on pure cgroup v2 under systemd, in ../shared/v2vm:
# apt install, hutch run, the gc timer and service, hutch-pool@ (ready,
# claim, stop, a conf file, a bad configuration not restarted, a killed
# keeper restarted), purge. The packages come in the tree's v2pkg/:
#   scripts/test-package --keep v2pkg
#   flock /run/lock/hutch-suite.lock ../shared/v2vm/v2vm run --src . \
#       --out /tmp/v2pkg --script tests/package/v2vm-check.sh
# (v2pkg/ is untracked, so v2vm copies it in.) Last line: "v2pkg: OK".
set -u
step() { echo; echo "=== $*"; }
fail=0
check() { if "$@"; then echo "ok: $*"; else echo "FAIL: $*"; fail=1; fi; }
step install
apt-get install -y ./v2pkg/hutch_*.deb ./v2pkg/python3-hutch_*.deb 2>&1 | tail -4
check test -x /usr/bin/hutch
step run
check hutch run -- true
hutch run --json -- sh -c 'echo hi' | head -5
step gc timer
systemctl is-enabled hutch-gc.timer; systemctl is-active hutch-gc.timer
check systemctl is-enabled -q hutch-gc.timer
check systemctl is-active -q hutch-gc.timer
systemctl list-timers hutch-gc.timer --no-pager
check systemctl start hutch-gc.service
systemctl show -p Result,ExecMainStatus hutch-gc.service
journalctl -u hutch-gc.service --no-pager | tail -3
step pool nano
time systemctl start hutch-pool@nano.service
check systemctl is-active -q hutch-pool@nano.service
systemctl status hutch-pool@nano.service --no-pager | head -20
hutch pool ls
hutch ls
pooled=$(hutch ls -q -f status=pooled | sort | tr '\n' ' ')
echo "pooled: $pooled"
id=$(hutch create --instance-type nano)
echo "claimed: $id"
check sh -c "echo '$pooled' | grep -q '$id'"
sp=$(hutch inspect "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["supervisor_pid"])')
echo "supervisor cgroup: $(cat /proc/$sp/cgroup)"
# Each pooled sandbox in a delegated scope of its own, not in the unit's
# cgroup (which must stay restartable: see the killed keeper below).
check grep -q "/hutch-$id.scope/" /proc/$sp/cgroup
check test "$(cat /sys/fs/cgroup/system.slice/system-hutch\\x2dpool.slice/hutch-pool@nano.service/cgroup.subtree_control)" = ""
hutch inspect "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("cgroup_version"))'
cat /run/hutch/$id/state.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cgroup"])'
check hutch exec "$id" -- python3 -c 'print("in the claimed one")'
sleep 1
hutch ls
check systemctl stop hutch-pool@nano.service
systemctl show -p Result,ExecMainStatus,ActiveState hutch-pool@nano.service
hutch ls
check test "$(hutch ls -q -f status=pooled | wc -l)" = 0
check hutch exec "$id" -- echo claimed one still runs
check hutch rm "$id"
step pool from /etc/hutch/pools/web.conf
mkdir -p /etc/hutch/pools
printf 'HUTCH_POOL_SIZE=2\nHUTCH_POOL_OPTIONS=--instance-type micro --network none\n' >/etc/hutch/pools/web.conf
check systemctl start hutch-pool@web.service
hutch pool ls
check test "$(hutch ls -q -f instance-type=micro -f status=pooled | wc -l)" = 2
check systemctl stop hutch-pool@web.service
check test "$(hutch ls -q | wc -l)" = 0
step bad pool: not restarted
systemctl start hutch-pool@huge.service; echo "start: $?"
sleep 12
systemctl show -p Result,ExecMainStatus,NRestarts,ActiveState hutch-pool@huge.service
check test "$(systemctl show -p NRestarts --value hutch-pool@huge.service)" = 0
journalctl -u hutch-pool@huge.service --no-pager | tail -3
step a killed keeper is restarted and takes its ready sandboxes
systemctl start hutch-pool@nano.service
before=$(hutch ls -q -f status=pooled | sort | tr '\n' ' ')
echo "pooled before: $before"
kill -9 "$(systemctl show -p MainPID --value hutch-pool@nano.service)"
# RestartSec=10s, then the new keeper reports ready: wait for a restart
# that took (bounded: 60 s), not a fixed sleep.
for _ in $(seq 120); do
	[ "$(systemctl show -p NRestarts --value hutch-pool@nano.service)" -ge 1 ] &&
		systemctl is-active -q hutch-pool@nano.service && break
	sleep 0.5
done
systemctl show -p NRestarts,ActiveState,Result,ExecMainStatus hutch-pool@nano.service
journalctl -u hutch-pool@nano.service --no-pager | tail -5
check systemctl is-active -q hutch-pool@nano.service
check test "$(systemctl show -p NRestarts --value hutch-pool@nano.service)" -ge 1
after=$(hutch ls -q -f status=pooled | sort | tr '\n' ' ')
echo "pooled after: $after"
check test "$before" = "$after"
hutch pool ls
for p in $after; do
	dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cgroup"]["dirs"][0])' /run/hutch/$p/state.json)
	echo "$p: $dir cpu.max $(cat "$dir/cpu.max")"
	check sh -c "echo '$dir' | grep -q '/hutch-$p.scope/'"
	check test "$(cut -d' ' -f1 "$dir/cpu.max")" != max
done
id=$(hutch create --instance-type nano)
check sh -c "echo '$after' | grep -q '$id'"
check hutch exec "$id" -- echo claimed after the restart
check hutch rm "$id"
step gc after a stopped pool
systemctl stop hutch-pool@nano.service
systemctl start hutch-gc.service
hutch ls; hutch pool ls
step purge
apt-get purge -y python3-hutch hutch 2>&1 | tail -2
check test ! -e /lib/systemd/system/hutch-gc.timer
check test ! -e /etc/systemd/system/timers.target.wants/hutch-gc.timer
ls /sys/fs/cgroup/system.slice | grep -i hutch
echo "v2pkg: $([ $fail = 0 ] && echo OK || echo FAILED)"
exit $fail
