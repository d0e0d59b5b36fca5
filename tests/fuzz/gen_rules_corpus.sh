#!/usr/bin/env bash
# Writes the seed corpus of fuzz_rules: every distinct rule file of the
# golden cases (tests/golden/cases: rules the engine runs) and of the
# loader cases (tests/golden/loader: one mistake each, with its message), as
# DIR/golden_<pattern>_<case> and DIR/loader_<pattern>_<case>. A rules/
# directory becomes one input, its *.yaml / *.yml files in name order joined
# by the separator line fuzz_rules splits at.
#   tests/fuzz/gen_rules_corpus.sh DIR
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
out=$1
root=$(cd "$(dirname "$0")/../golden" && pwd)
separator='#--- next file ---'
mkdir -p "$out"

# The input of one case folder on stdout.
case_input() {
  local dir=$1
  if [ -f "$dir/rule.yaml" ]; then
    cat "$dir/rule.yaml"
    return
  fi
  local first=1
  for file in $(find "$dir/rules" -maxdepth 1 -type f \( -name '*.yaml' -o -name '*.yml' \) \
                  ! -name '.*' | sort); do
    [ "$first" = 1 ] || printf '\n%s\n' "$separator"
    cat "$file"
    first=0
  done
}

declare -A seen
written=0
for kind in cases loader; do
  prefix=$([ "$kind" = cases ] && echo golden || echo loader)
  for dir in "$root/$kind"/*/*/; do
    dir=${dir%/}
    [ -f "$dir/rule.yaml" ] || [ -d "$dir/rules" ] || continue
    text=$(case_input "$dir"; printf x)  # the x keeps trailing newlines
    text=${text%x}
    [ -n "$text" ] || continue
    sum=$(printf '%s' "$text" | sha1sum | cut -c1-40)
    [ -z "${seen[$sum]:-}" ] || continue
    seen[$sum]=1
    name="${prefix}_$(basename "$(dirname "$dir")")_$(basename "$dir")"
    printf '%s' "$text" >"$out/$name"
    written=$((written + 1))
  done
done
echo "gen_rules_corpus: $written inputs written to $out"
