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
step gc after a killed pool
systemctl start hutch-pool@nano.service
kill -9 "$(systemctl show -p MainPID --value hutch-pool@nano.service)"
sleep 12
systemctl show -p NRestarts,ActiveState hutch-pool@nano.service
check systemctl is-active -q hutch-pool@nano.service
hutch pool ls
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
