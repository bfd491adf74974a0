#!/usr/bin/env bash
# Build the rillet:dev image: the base image from Debian packages (build-base.sh), the wheel
# built on the host (maturin, through pip) with its dependencies' wheels, installed offline.
#
#   docker/build.sh            # -> rillet:dev
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${RILLET_IMAGE:-rillet:dev}
"$here/build-base.sh"
rm -rf "$here/wheels"
python -m pip wheel -q --wheel-dir "$here/wheels" "$here/.."
docker build -q -t "$image" "$here"
echo "built $image"
