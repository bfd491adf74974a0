#!/usr/bin/env bash
# The base image, from Debian packages: no container registry is reachable here, so a minimal
# Debian bookworm (Python 3.11) is made with debootstrap and imported with `docker import`.
# Idempotent: an existing image is kept. Needs root (debootstrap) and a Docker engine.
#
#   docker/build-base.sh                 # -> rillet-base:bookworm
#   DEBIAN_MIRROR=http://... docker/build-base.sh
set -euo pipefail
IMAGE=${RILLET_BASE_IMAGE:-rillet-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image $IMAGE exists"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,iproute2,procps \
    bookworm "$root" "$MIRROR"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$IMAGE"
echo "built base image $IMAGE"
