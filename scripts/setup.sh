#!/usr/bin/env bash
# Sets up a development/CI machine (Debian 12, root): system packages, the reference
# implementation's Python dependencies, and a virtualenv in .venv with cloudseed installed
# in editable mode with its development extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # building seeds and images, booting VMs
  qemu-system-x86 qemu-utils debootstrap e2fsprogs dosfstools mtools xorriso genisoimage
  udftools  # mkudffs/udfinfo: other UDF writers and readers beside cloudseed's (Azure's media)
  socat openssh-client busybox-static
  # the shell generator's processes counted (tests/agent/test_generator_shell.py, bench/generator_processes.py)
  strace
  # network namespaces, DHCP, real network tools
  iproute2 dnsmasq-base isc-dhcp-client
  # the metadata server's PostgreSQL backend and the load generator / static baseline
  postgresql wrk lighttpd
  # several servers behind a load balancer (PROXY protocol v2), tests and bench
  haproxy nftables
  # EC2 instance identity: the signing key and per-instance PKCS#7 signatures
  openssl
  # Debian's cloud-init 22.4 (the reference) runs with Debian's python3 and these
  python3 python3-yaml python3-jinja2 python3-jsonschema python3-requests python3-configobj
  python3-jsonpatch python3-netifaces python3-oauthlib
  # the Debian package (dpkg-buildpackage, lintian) and the RPM spec (rpmbuild)
  dpkg-dev debhelper dh-python pybuild-plugin-pyproject python3-all python3-setuptools lintian fakeroot rpm
  # the fleet pages and the lab's HTML report are tested in a real browser (headless, DevTools protocol)
  chromium
  # the metadata server's C fast path (cloudseed/provider/server/engine/fast_path.c), built below
  gcc python3-dev
  # the real tools that check rendered files
  netplan.io ifupdown
  # growpart and resizefs tests grow a real partition
  cloud-guest-utils fdisk
  # package tests: build, index and sign a real apt repository (dpkg-deb, apt-ftparchive, gpg)
  dpkg-dev apt-utils gpg rpm createrepo-c  # and rpms for the real dnf test
  # disk_setup/fs_setup/mounts/ntp/rsyslog tests: real partitioners, mkfs and config checkers
  gdisk xfsprogs btrfs-progs chrony rsyslog
  # Azure resource disk tests: a real NTFS (mkntfs) and its userspace lister (ntfsls)
  ntfs-3g
  # wireguard tests: wg-quick parses the written configuration
  wireguard-tools
  # yum_add_repo tests: dnf reads the written .repo files
  dnf
  # configuration-management tests: a real ansible-pull from git daemon, puppet config print,
  # MCollective's own server.cfg loader
  ansible-core git puppet-agent mcollective
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # daemons among these (chrony, rsyslog, postgresql...) are only tools for the tests: none is
  # started by the install (chronyd would try to reach public NTP servers)
  guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && guard=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get install -y -qq "${missing[@]}" >/dev/null
  if [ -n "$guard" ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
# the metadata server's fast path for new connections, in C (optional: without it every
# connection takes the Python path); built again when a source is newer than the module
FAST_DIR=cloudseed/provider/server/engine
FAST_SO="$FAST_DIR/_fast_path$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
if [ ! -e "$FAST_SO" ] || [ -n "$(find "$FAST_DIR" -maxdepth 1 -name 'fast_path*.[ch]' -newer "$FAST_SO")" ]; then
  gcc -O2 -Wall -shared -fPIC -I"$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
    -o "$FAST_SO" "$FAST_DIR/fast_path.c" "$FAST_DIR/fast_path_answer.c" \
    || echo "setup: the server's C fast path could not be built; the server runs the Python path"
fi
# cloudbase-init, a real client in tests/provider/server/test_cloudbase_init_clients.py, in a venv
# of its own (it brings its own oslo/requests versions); ~10 s; its tests skip if this fails
CBI_VENV=${CLOUDSEED_CBI_VENV:-$HOME/.cache/cloudseed-cbi-venv}
if ! "$CBI_VENV/bin/python" -c "import cloudbaseinit" 2>/dev/null; then
  { "$PY" -m venv "$CBI_VENV" && "$CBI_VENV/bin/python" -m pip install -q cloudbase-init==1.1.9 >/dev/null 2>&1; } \
    || echo "setup: cloudbase-init could not be installed in $CBI_VENV; its client tests will skip"
fi
# the OCI CLI, a real client in tests/provider/server/test_oci_sdk.py, in a venv of its own (it pins
# PyYAML and certifi below the dev venv's); ~1 min; its test skips if this fails
OCI_CLI_VENV=${CLOUDSEED_OCI_CLI_VENV:-$HOME/.cache/cloudseed-oci-cli-venv}
if ! "$OCI_CLI_VENV/bin/python" -c "import oci_cli" 2>/dev/null; then
  { "$PY" -m venv "$OCI_CLI_VENV" && "$OCI_CLI_VENV/bin/python" -m pip install -q oci-cli==3.95.1 >/dev/null 2>&1; } \
    || echo "setup: the OCI CLI could not be installed in $OCI_CLI_VENV; its client test will skip"
fi
# real Node.js metadata clients (gcp-metadata, google-auth-library, the AWS SDK's IMDS clients,
# @azure/identity) for tests/provider/server/test_node_clients.py: Node and npm from apt unless
# there (a nodesource Node brings its own npm), then the exact versions of node_clients/package.json
# in a cache directory, Node 20 itself among them (Debian 12's Node 18 is too old for @azure/identity),
# installed again only when that file changes; ~20 s; its tests skip if this fails
NODE_CLIENTS=${CLOUDSEED_NODE_CLIENTS:-$HOME/.cache/cloudseed-node-clients}
NODE_PINS=tests/provider/server/node_clients/package.json
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; } \
    || echo "setup: nodejs and npm could not be installed; the Node client tests will skip"
fi
if command -v npm >/dev/null && ! cmp -s "$NODE_PINS" "$NODE_CLIENTS/installed.json"; then
  mkdir -p "$NODE_CLIENTS" && cp "$NODE_PINS" "$NODE_CLIENTS/package.json"
  { (cd "$NODE_CLIENTS" && npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1) \
      && cp "$NODE_PINS" "$NODE_CLIENTS/installed.json"; } \
    || echo "setup: the Node clients could not be installed in $NODE_CLIENTS; their tests will skip"
fi
echo "setup: ready (.venv/bin/cloudseed $(.venv/bin/cloudseed --version))"
