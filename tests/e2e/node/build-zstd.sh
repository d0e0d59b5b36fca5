#!/usr/bin/env bash
# Builds the native addon of @mongodb-js/zstd (the Node.js driver's zstd
# compressor) in node_modules beside this file (or in DIR's, e.g.
# tests/e2e/node-latest), from the package's own sources, against
# Debian's libzstd (libzstd-dev) and the Node-API headers of the
# node-api-headers package. The package's install script cannot do it here:
# it downloads a prebuilt addon from GitHub, then falls back to a script its
# npm release does not ship. scripts/install-deps.sh runs `npm ci
# --ignore-scripts` and then this.
#
#   NODE=/path/to/node tests/e2e/node/build-zstd.sh [DIR]
set -euo pipefail
here="$(cd "${1:-$(dirname "$0")}" && pwd)"
node="${NODE:-node}"
pkg="$here/node_modules/@mongodb-js/zstd"
include() {  # the include directory an installed npm package names (node-addon-api's is relative)
  (cd "$here" && "$node" -p "require('path').resolve(require('$1').include_dir)")
}
[ -f "$pkg/addon/zstd.cpp" ] || { echo "build-zstd.sh: $pkg is not installed (npm ci first)" >&2; exit 1; }
mkdir -p "$pkg/build/Release"
# As the package's binding.gyp: ZSTD_STATIC_LINKING_ONLY, C++ exceptions on.
g++ -std=c++17 -O2 -shared -fPIC -fvisibility=hidden \
  -DNAPI_CPP_EXCEPTIONS -DZSTD_STATIC_LINKING_ONLY \
  -I"$(include node-addon-api)" -I"$(include node-api-headers)" \
  "$pkg/addon/zstd.cpp" "$pkg/addon/compression.cpp" \
  -lzstd -o "$pkg/build/Release/zstd.node.tmp"
mv "$pkg/build/Release/zstd.node.tmp" "$pkg/build/Release/zstd.node"
(cd "$here" && "$node" -e "
  const z = require('@mongodb-js/zstd');
  const data = Buffer.from('remold '.repeat(100));
  z.compress(data).then(z.decompress).then((back) => {
    if (!back.equals(data)) { console.error('build-zstd.sh: round trip failed'); process.exit(1); }
  });
")
