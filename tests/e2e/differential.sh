#!/bin/sh
# The long differential run (issue 11), outside `make test`:
#   tests/e2e/differential.sh --rule attribute --seed 7 --ops 100000
# Options: --rule bucket|attribute|computed|subset|extended_reference|versioned|polymorphic|outlier|history
# (repeatable; default all),
# --seed N, --ops N (per rule), --length N (per sequence), --minimize-budget N.
# Uses build/remold (or $REMOLD_BINARY) and the bundled backend, or
# DocumentDB with REMOLD_TEST_BACKEND=documentdb (or $REMOLD_TEST_BACKEND_URI). Exit status 1 if an unexplained difference was found.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
export REMOLD_SOURCE_DIR="${REMOLD_SOURCE_DIR:-$source_dir}"
export REMOLD_BINARY="${REMOLD_BINARY:-$source_dir/build/remold}"
cd "$here/python"
exec "$source_dir/.venv/bin/python" -m differential "$@"
