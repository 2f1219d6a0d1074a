#!/usr/bin/env bash
# .ci/deps.sh - installs what shardgate needs on Debian 12, only what is
# missing (so a second run costs nothing). `build` = compile and run the
# gateway; `test` = also the real clients and tools the test suite drives.
# Keep this list in step with docker/Dockerfile.
set -euo pipefail
want=(build-essential cmake pkg-config libmicrohttpd-dev liburing-dev libjansson-dev
      libxml2-dev libssl-dev libcurl4-openssl-dev
      libisal-dev    # ISA-L: CRC-32 / CRC-32C of common/crc.c
      zlib1g-dev)    # zlib: bench/crc_speed's reference row (configured with the tree)
if [ "${1:-build}" = test ]; then
  want+=(libcunit1-dev python3 python3-boto3 awscli curl clang libclang-rt-14-dev
         nginx wrk s3cmd)
  # test_deploy_files: compose.yaml, `systemd-analyze verify` and the unit's syscall filter
  want+=(python3-yaml systemd python3-seccomp)
  want+=(mount)   # test_readonly_data: a read-only bind mount (unshare, setpriv: util-linux)
  # test_cold_rgw: a one-node Ceph with the RADOS Gateway as the cold tier
  want+=(ceph-mon ceph-osd radosgw ceph-common)
fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
