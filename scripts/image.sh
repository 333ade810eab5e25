#!/usr/bin/env bash
# Builds the Recallatron image with rootful podman, on a machine that reaches
# Debian's package mirror and PyPI but no container registry (docs/kubernetes.md,
# "Building here, without a registry").
#
#   scripts/image.sh install   podman, runc and mmdebstrap from Debian (if missing)
#   scripts/image.sh conf      writes .tools/podman/containers.conf, prints its path
#   scripts/image.sh base      the python:3.11-slim-bookworm stand-in (if missing)
#   scripts/image.sh build     all of the above, then the image itself
#
# Where a registry is reachable, plain `podman build -t recallatron:dev .` (or
# docker) uses the real python:3.11-slim-bookworm and needs none of this.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tag the smoke test runs (tests/k8s/test_image.py reads the same variable).
IMAGE=${RECALLATRON_IMAGE:-localhost/recallatron:dev}
BASE_IMAGE=${BASE_IMAGE:-localhost/recallatron-base:bookworm}
SUITE=bookworm
CONF_DIR=$PWD/.tools/podman
export CONTAINERS_CONF=$CONF_DIR/containers.conf

install() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if ((${#missing[@]})); then
    apt-get update -qq
    # runc named with podman satisfies its "crun | runc" dependency, so crun
    # (which refuses this kernel's hybrid cgroup layout) is never installed;
    # no recommends: the rootless helpers are not wanted.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}

conf() {
  mkdir -p "$CONF_DIR"
  # runc, not crun; cgroupfs and file logs (no systemd or journald here); and
  # ulimits the host can grant: podman's defaults for root are higher than
  # this machine allows, and every container then fails setrlimit.
  local nofile nproc
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [[ $nofile == unlimited ]] && nofile=1048576
  # podman lowers its own RLIMIT_NPROC to 32768 (seen here), and a container
  # cannot be given more than the podman process has.
  [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
  cat >"$CONTAINERS_CONF.tmp" <<EOF
# Written by scripts/image.sh; used through CONTAINERS_CONF, /etc is untouched.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  mv "$CONTAINERS_CONF.tmp" "$CONTAINERS_CONF"
  echo "$CONTAINERS_CONF"
}

mirror() {
  # The Debian mirror this machine's apt already uses (DEBIAN_MIRROR overrides);
  # no host is named here, so a machine without one says so.
  local uri=${DEBIAN_MIRROR:-}
  if [ -z "$uri" ]; then
    uri=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' \
      /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1 |
      grep -oE 'https?://[^ ]+' || true)
  fi
  if [ -z "$uri" ]; then
    echo "no Debian mirror in this machine's apt sources: set DEBIAN_MIRROR" >&2
    return 1
  fi
  echo "$uri"
}

pip_index() {
  # The package index this machine's pip is configured with, if any; empty
  # leaves pip's own default.
  python3 -m pip config get global.index-url 2>/dev/null || true
}

base() {
  if podman image exists "$BASE_IMAGE"; then
    return
  fi
  local root
  root=$(mktemp -d /var/tmp/recallatron-base.XXXXXX)
  local from
  from=$(mirror)
  echo "bootstrapping $SUITE (minbase) from $from ..."
  # mmdebstrap, not debootstrap: the same minbase system from the same mirror,
  # but apt downloads it in 25 s where debootstrap's one-by-one fetches took
  # 100 s here. Its merged-usr hook makes /bin etc. links itself instead of
  # installing usrmerge, which would pull in perl (50 MB).
  if ! mmdebstrap --variant=minbase \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include=python3.11,python3.11-venv,python3-pip,ca-certificates,netbase \
    "$SUITE" "$root" "$from" >"$root.log" 2>&1; then
    tail -30 "$root.log"
    rm -rf "$root" "$root.log"
    exit 1
  fi
  rm -f "$root.log"
  # What the Dockerfile expects of python:3.11-slim: `python` on PATH, and pip
  # allowed to install outside a venv (the models stage does).
  ln -sf /usr/bin/python3.11 "$root/usr/local/bin/python"
  rm -f "$root"/usr/lib/python3.11/EXTERNALLY-MANAGED
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*
  tar -C "$root" --numeric-owner -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python"]' \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
  echo "base image $BASE_IMAGE imported"
}

build() {
  install
  conf >/dev/null
  base
  # torch comes from this machine's local CPU wheel through a read-only mount
  # and pip's find-links (never a layer); pip reaches PyPI through the host's
  # CA bundle. TORCH_INDEX_URL: this machine's pip index (empty: pip's default);
  # the wheel directory stands in for the CPU index.
  local wheels=${TORCH_WHEELS:-/opt/wheels}
  local ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
  podman build --jobs 2 --pull=never \
    --build-arg PYTHON_IMAGE="$BASE_IMAGE" \
    --build-arg TORCH_INDEX_URL="$(pip_index)" \
    --build-arg PIP_FIND_LINKS=/mnt/wheels \
    --build-arg PIP_CERT=/mnt/ca-bundle.crt \
    --volume "$wheels:/mnt/wheels:ro" \
    --volume "$ca:/mnt/ca-bundle.crt:ro" \
    -t "$IMAGE" .
  podman image ls "$IMAGE"
}

case "${1:-build}" in
  install) install ;;
  conf) conf ;;
  base) install && conf >/dev/null && base ;;
  build) build ;;
  *)
    echo "usage: $0 install|conf|base|build" >&2
    exit 2
    ;;
esac
