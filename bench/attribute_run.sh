#!/usr/bin/env bash
# Runs attribute_bench: queries on sparse product attributes through remold's
# attribute rule against the same queries on a flat collection, sent
# directly to the same backend.
#
# Usage: bash bench/attribute_run.sh [BUILD_DIR] [attribute_bench args...]
#   BUILD_DIR defaults to build; it must hold remold and attribute_bench.
#   Extra args go to attribute_bench (e.g. --sizes 10000 --seconds 1).
# Environment:
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend (e.g. a real mongod, which
#                                   has explain) instead of starting
#                                   mongo-java-server (tests/backend). The
#                                   bench drops bench_flat.products and
#                                   bench_attr.products on it.
#   REMOLD_BENCH_PROXY=HOST:PORT    use this remold instead of starting
#                                   BUILD_DIR/remold; it must run with the
#                                   rule below in its --rules directory.
# Everything this script starts is stopped on exit (trap), and its logs are
# printed if a start fails. Exit status is attribute_bench's.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init attribute_bench remold-attribute-bench "$@"

# The attribute rule the bench expects (attribute_bench prints it too).
bench_rule products.yaml <<'YAML'
namespace: bench_attr.products
pattern: attribute
attribute:
  array: specs
  except: [name, price, category]
YAML

bench_start_endpoints
bench_run_with_cpu
