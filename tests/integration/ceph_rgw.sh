#!/usr/bin/env bash
# tests/integration/ceph_rgw.sh - a throw-away single-node Ceph cluster with
# the RADOS Gateway (S3), for testing shardgate against a real S3 backend.
#
#   ceph_rgw.sh start DIR PORT   one mon, one OSD (memstore), one radosgw on
#                                127.0.0.1:PORT; everything lives under DIR
#                                (a fresh directory); exits 0 once an
#                                authenticated S3 ListBuckets succeeds.
#   ceph_rgw.sh stop DIR         stops every daemon that start left running.
#
# Needs Debian's packages (Debian 12: Ceph 16.2 Pacific; no ceph-mgr needed):
#   apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw ceph-common
# Exits 77 (skip) when those binaries are missing.
#
# Ports: the monitor listens on 127.0.0.1:PORT+1 (msgr v2 only); the OSD picks
# free ports in 127.0.0.1:[PORT+2, PORT+30]. So instances need PORTs at least
# 31 apart, and PORT+30 must be <= 65535.
#
# Environment:
#   RGW_ACCESS_KEY, RGW_SECRET_KEY  keys of the S3 user (defaults below)
#   RGW_UID                         its uid (default: shardgate)
#   CEPH_RGW_TIMEOUT                overall start deadline in s (default 180)
#   CEPH_RGW_STOP_GRACE             s each daemon gets after SIGTERM before
#                                   SIGKILL (default 10)
#   CEPH_RGW_MEMSTORE_BYTES         size the memstore OSD reports (default 4 GiB;
#                                   object data is kept in the OSD's RAM)
#   PYTHON                          interpreter with boto3 (default: python3)
#
# After a successful start, DIR/s3.env holds RGW_ENDPOINT, RGW_ACCESS_KEY,
# RGW_SECRET_KEY and RGW_REGION; DIR/pids/{mon,osd,rgw}.pid the daemons' pids;
# DIR/log/ every log. `ceph --conf DIR/ceph.conf -s` works while it runs.
#
# Nothing is written outside DIR: every path (config, keyring, data, logs,
# admin sockets, pid files, crash dir) is set in DIR/ceph.conf, and each
# command gets --conf DIR/ceph.conf. Daemons run as root.
#
# Known behaviour of this RGW (16.2): no ceph-mgr runs, so after ~2 minutes
# `ceph health` says HEALTH_WARN (MGR_DOWN) and `ceph -s` shows no pool/pg
# stats; S3 is not affected. RGW 16.2 ignores x-amz-checksum-* headers (does
# not store, return or verify them), answers 411 MissingContentLength to
# bodies without Content-Length (HTTP chunked / aws-chunked with trailer,
# what boto3 >= 1.36 sends over https by default), returns an empty <ETag/>
# in CompleteMultipartUploadResult (HEAD/GET/List show the right "md5-N"),
# and sends error XML with an empty <Message/>.

set -u

SKIP=77
DEFAULT_ACCESS_KEY="SGCEPHACCESSKEY00001"
DEFAULT_SECRET_KEY="sgceph/Secret+Key/0123456789abcdefghijklmn"

die() { echo "ceph_rgw.sh: $*" >&2; exit 1; }
say() { echo "ceph_rgw.sh: $*" >&2; }

usage() {
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
}

need_binaries() {
    local missing="" b
    for b in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool; do
        command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
    done
    if [ -n "$missing" ]; then
        echo "ceph_rgw.sh: SKIP: Ceph binaries not found:$missing" >&2
        echo "ceph_rgw.sh: install with: apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw ceph-common" >&2
        exit $SKIP
    fi
}

# pid recorded in DIR/pids/NAME.pid, alive and really ours (its command line
# names our config file)?
pid_is_ours() {
    local pid=$1 conf=$2
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$conf"
}

# ---------------------------------------------------------------- stop

do_stop() {
    local dir=$1
    [ -d "$dir" ] || { say "stop: $dir: no such directory (nothing to stop)"; return 0; }
    dir=$(cd "$dir" && pwd)
    local conf="$dir/ceph.conf" name pid pids="" left grace
    # one at a time, radosgw first, then the OSD (which tells the still
    # running monitor that it is going down), then the monitor; each gets
    # a grace period, then SIGKILL
    for name in rgw osd mon; do
        [ -r "$dir/pids/$name.pid" ] || continue
        pid=$(cat "$dir/pids/$name.pid")
        pid_is_ours "$pid" "$conf" || continue
        pids="$pids $pid"
        kill -TERM "$pid" 2>/dev/null
        grace=${CEPH_RGW_STOP_GRACE:-10}
        for _ in $(seq 1 $(( grace * 10 ))); do
            pid_is_ours "$pid" "$conf" || break
            sleep 0.1
        done
        if pid_is_ours "$pid" "$conf"; then
            say "stop: $name (pid $pid) still running after ${grace}s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null
            for _ in $(seq 1 50); do
                pid_is_ours "$pid" "$conf" || break
                sleep 0.1
            done
            pid_is_ours "$pid" "$conf" && { say "stop: could not kill $name (pid $pid)"; return 1; }
        fi
    done
    # belt and braces: any other process still using our config (e.g. a
    # radosgw-admin left over from an interrupted start)
    local p
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = "$$" ] && continue
        if pid_is_ours "$pid" "$conf"; then
            case "$(cat "$p/comm" 2>/dev/null)" in
                ceph*|radosgw*|rados*|monmaptool)
                    kill -KILL "$pid" 2>/dev/null && say "stop: killed stray pid $pid ($(cat "$p/comm" 2>/dev/null))"
                    ;;
            esac
        fi
    done
    # the daemons' parent is init: give it a moment to reap them so that
    # no <defunct> entry is left for pgrep to see
    for _ in $(seq 1 50); do
        left=""
        for pid in $pids; do [ -e "/proc/$pid" ] && left="$left $pid"; done
        [ -z "$left" ] && break
        sleep 0.1
    done
    rm -f "$dir/pids/"*.pid
    return 0
}

# ---------------------------------------------------------------- start

DEADLINE=0
remaining() { echo $(( DEADLINE - $(date +%s) )); }

fail_start() {
    say "start failed: $*"
    local f
    for f in "$DIR"/log/*.log "$DIR"/log/*.out; do
        [ -s "$f" ] || continue
        echo "----- last lines of $f -----" >&2
        tail -n 10 "$f" >&2
    done
    do_stop "$DIR" >/dev/null 2>&1
    exit 1
}

# run the ceph CLI with a bounded time
cephc() {
    local r; r=$(remaining)
    [ "$r" -gt 0 ] || return 124
    [ "$r" -gt 30 ] && r=30
    timeout -k 2 "$r" ceph --conf "$CONF" --connect-timeout 10 "$@"
}

# start a daemon in its own session, stdout/stderr to DIR/log/NAME.out
spawn() {
    local name=$1; shift
    setsid "$@" </dev/null >"$DIR/log/$name.out" 2>&1 &
    echo $! >"$DIR/pids/$name.pid"
}

alive() {
    local pid
    pid=$(cat "$DIR/pids/$1.pid" 2>/dev/null) || return 1
    pid_is_ours "$pid" "$CONF"
}

write_conf() {
    cat >"$CONF" <<EOF
# generated by ceph_rgw.sh for a throw-away test cluster
[global]
fsid = $FSID
mon_host = [v2:127.0.0.1:$MON_PORT]
mon_initial_members = a
public_addr = 127.0.0.1
public_network = 127.0.0.0/8
ms_bind_ipv4 = true
ms_bind_ipv6 = false
ms_bind_msgr1 = false
ms_bind_msgr2 = true
ms_bind_port_min = $OSD_PORT_MIN
ms_bind_port_max = $OSD_PORT_MAX

auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = $DIR/keyring

run_dir = $DIR/run
crash_dir = $DIR/crash
log_file = $DIR/log/\$name.log
mon_cluster_log_file = $DIR/log/cluster.log
log_to_syslog = false
err_to_syslog = false
clog_to_syslog = false
log_to_stderr = false
err_to_stderr = true
log_max_recent = 500
debug_ms = 0/0

osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 1000

[mon]
mon_data = $DIR/mon/\$cluster-\$id
admin_socket = $DIR/run/\$name.asok
pid_file = $DIR/run/\$name.pid
mon_data_avail_warn = 2
mon_data_avail_crit = 1
# commit map changes quickly (default 1 s per proposal makes each of RGW's
# pool creations cost a second or two)
paxos_propose_interval = 0.05
paxos_min_wait = 0.01
mon_warn_on_insecure_global_id_reclaim = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
auth_allow_insecure_global_id_reclaim = false

[mon.a]
public_addr = v2:127.0.0.1:$MON_PORT

[osd]
osd_data = $DIR/osd/\$cluster-\$id
admin_socket = $DIR/run/\$name.asok
pid_file = $DIR/run/\$name.pid
osd_objectstore = memstore
memstore_device_bytes = $MEMSTORE_BYTES
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
osd_crush_update_on_start = true
osd_class_update_on_start = false
osd_heartbeat_grace = 60

[client.rgw.gw]
admin_socket = $DIR/run/\$name.asok
pid_file = $DIR/run/\$name.pid
rgw_data = $DIR/rgw/\$cluster-\$id
rgw_frontends = beast endpoint=127.0.0.1:$PORT
rgw_thread_pool_size = 32
rgw_dns_name = 127.0.0.1
rgw_enable_usage_log = false
rgw_enable_ops_log = false
rgw_crypt_require_ssl = false
rgw_gc_obj_min_wait = 30
rgw_lc_debug_interval = -1
# one lifecycle worker: with the default 3 they contend for the lc.N locks and
# back off 5 s at a time, which also delays shutdown
rgw_lc_max_worker = 1

[client]
log_file = $DIR/log/\$name.log
EOF
}

do_start() {
    DIR=$1 PORT=$2
    need_binaries
    case "$PORT" in ''|*[!0-9]*) die "PORT must be a number: '$PORT'";; esac
    if [ "$PORT" -lt 1024 ] || [ "$PORT" -gt $((65535 - 30)) ]; then die "PORT must be in 1024..65505"; fi
    mkdir -p "$DIR" || die "cannot create $DIR"
    DIR=$(cd "$DIR" && pwd)
    CONF="$DIR/ceph.conf"
    if [ -e "$CONF" ] || [ -e "$DIR/mon" ]; then
        die "$DIR already holds a cluster (stop it and give a fresh directory)"
    fi
    for p in "$DIR"/pids/*.pid; do
        [ -r "$p" ] && pid_is_ours "$(cat "$p")" "$CONF" && die "$DIR: daemons still running"
    done

    local timeout_s=${CEPH_RGW_TIMEOUT:-180}
    local t0; t0=$(date +%s)
    DEADLINE=$(( t0 + timeout_s ))
    MON_PORT=$(( PORT + 1 ))
    OSD_PORT_MIN=$(( PORT + 2 ))
    OSD_PORT_MAX=$(( PORT + 30 ))
    MEMSTORE_BYTES=${CEPH_RGW_MEMSTORE_BYTES:-4294967296}
    local access=${RGW_ACCESS_KEY:-$DEFAULT_ACCESS_KEY}
    local secret=${RGW_SECRET_KEY:-$DEFAULT_SECRET_KEY}
    local uid=${RGW_UID:-shardgate}
    local py=${PYTHON:-python3}
    "$py" -c 'import boto3' 2>/dev/null || die "$py cannot import boto3 (needed for the readiness check)"

    # the ports we need must be free (fail fast with a clear message)
    local port
    for port in "$PORT" "$MON_PORT"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            die "127.0.0.1:$port is already in use"
        fi
    done

    mkdir -p "$DIR"/{mon,osd,rgw,run,log,crash,pids} || die "cannot create directories in $DIR"
    FSID=$(cat /proc/sys/kernel/random/uuid)
    write_conf

    # ---- keys: mon., client.admin, osd.0, client.rgw.gw in one keyring; the
    # monitor imports all of them at mkfs.
    local kr="$DIR/keyring"
    ceph-authtool --create-keyring "$kr" --gen-key -n mon. --cap mon 'allow *' >/dev/null ||
        fail_start "ceph-authtool (mon.)"
    ceph-authtool "$kr" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null ||
        fail_start "ceph-authtool (client.admin)"
    ceph-authtool "$kr" --gen-key -n osd.0 \
        --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' >/dev/null ||
        fail_start "ceph-authtool (osd.0)"
    ceph-authtool "$kr" --gen-key -n client.rgw.gw \
        --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null ||
        fail_start "ceph-authtool (client.rgw.gw)"
    chmod 600 "$kr"

    # ---- monitor
    monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" \
        "$DIR/monmap" >"$DIR/log/monmaptool.out" 2>&1 || fail_start "monmaptool"
    ceph-mon --conf "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$kr" \
        --setuser root --setgroup root >"$DIR/log/mon-mkfs.out" 2>&1 || fail_start "ceph-mon --mkfs"
    spawn mon ceph-mon --conf "$CONF" -f -i a --setuser root --setgroup root
    local ok=""
    while [ "$(remaining)" -gt 0 ]; do
        alive mon || fail_start "ceph-mon exited"
        if cephc mon stat >/dev/null 2>&1; then ok=1; break; fi
        sleep 0.5
    done
    [ -n "$ok" ] || fail_start "monitor did not answer within ${timeout_s}s"
    local t_mon=$(( $(date +%s) - t0 ))

    # ---- OSD 0 (memstore), key already known to the monitor
    local osd_uuid; osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    local id; id=$(cephc osd create "$osd_uuid" 2>"$DIR/log/osd-create.out") ||
        fail_start "ceph osd create: $(cat "$DIR/log/osd-create.out")"
    [ "$id" = 0 ] || fail_start "ceph osd create gave id '$id', wanted 0"
    mkdir -p "$DIR/osd/ceph-0"
    ceph-osd --conf "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" \
        --setuser root --setgroup root >"$DIR/log/osd-mkfs.out" 2>&1 || fail_start "ceph-osd --mkfs"
    spawn osd ceph-osd --conf "$CONF" -f -i 0 --setuser root --setgroup root
    ok=""
    while [ "$(remaining)" -gt 0 ]; do
        alive osd || fail_start "ceph-osd exited"
        if cephc osd dump -f json 2>/dev/null | grep -q '"up":1'; then ok=1; break; fi
        sleep 0.5
    done
    [ -n "$ok" ] || fail_start "OSD not up within ${timeout_s}s"
    local t_osd=$(( $(date +%s) - t0 ))

    # ---- radosgw (creates its pools on first start)
    spawn rgw radosgw --conf "$CONF" -f -n client.rgw.gw --setuser root --setgroup root
    ok=""
    while [ "$(remaining)" -gt 0 ]; do
        alive rgw || fail_start "radosgw exited"
        if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then ok=1; break; fi
        sleep 0.5
    done
    [ -n "$ok" ] || fail_start "radosgw not listening on 127.0.0.1:$PORT within ${timeout_s}s"
    local t_rgw=$(( $(date +%s) - t0 ))

    # ---- S3 user
    local r; r=$(remaining)
    [ "$r" -gt 0 ] || fail_start "timed out before creating the S3 user"
    timeout -k 2 "$r" radosgw-admin --conf "$CONF" user create --uid="$uid" \
        --display-name="shardgate test" --access-key="$access" --secret="$secret" \
        >"$DIR/log/user-create.out" 2>&1 ||
        fail_start "radosgw-admin user create: $(tail -n 5 "$DIR/log/user-create.out")"

    # ---- authenticated request (SigV4, path style)
    local why=""
    ok=""
    while [ "$(remaining)" -gt 0 ]; do
        alive rgw || fail_start "radosgw exited"
        why=$(RGW_EP="http://127.0.0.1:$PORT" RGW_AK="$access" RGW_SK="$secret" \
              timeout -k 2 20 "$py" - 2>&1 <<'PYEOF'
import os, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["RGW_EP"], region_name="us-east-1",
                  aws_access_key_id=os.environ["RGW_AK"],
                  aws_secret_access_key=os.environ["RGW_SK"],
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                retries={"max_attempts": 1},
                                connect_timeout=5, read_timeout=10))
s3.list_buckets()
PYEOF
        ) && { ok=1; break; }
        sleep 1
    done
    [ -n "$ok" ] || fail_start "authenticated ListBuckets did not succeed within ${timeout_s}s: $(echo "$why" | tail -n 3)"
    local t_ready=$(( $(date +%s) - t0 ))

    cat >"$DIR/s3.env" <<EOF
RGW_ENDPOINT=http://127.0.0.1:$PORT
RGW_ACCESS_KEY=$access
RGW_SECRET_KEY=$secret
RGW_REGION=us-east-1
EOF
    say "ready: S3 at http://127.0.0.1:$PORT (mon up ${t_mon}s, osd up ${t_osd}s, rgw listening ${t_rgw}s, ready ${t_ready}s); pids in $DIR/pids, logs in $DIR/log"
    return 0
}

case "${1:-}" in
    start) [ $# -eq 3 ] || usage; do_start "$2" "$3" ;;
    stop)  [ $# -eq 2 ] || usage; do_stop "$2" ;;
    *) usage ;;
esac
