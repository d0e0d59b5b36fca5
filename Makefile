# The commands of the README:
#   make run   build, install what is missing, start a local backend with
#              remold and the example rules (examples/rules) in front of it,
#              print the connection string and a command to try per rule.
#              BACKEND=documentdb: in front of DocumentDB, the real engine,
#              instead of the in-memory stand-in.
#   make demo  build, then measure what the example rules change against
#              plain collections (examples/demo.py; about 15 s).
#   make test  build and run every test (unit, golden, e2e with pymongo and
#              mongo-c-driver, the driver matrix: Node.js, mongosh, Go and
#              Java drivers; malformed input, and a 60 s run of each
#              libFuzzer target: codec, rules, rewrite).
# And for the fuzz targets (tests/fuzz/):
#   make fuzz-long [FUZZ_SECONDS=3600] [FUZZ_TARGETS="codec rules rewrite"] [FUZZ_FORK=1]
#              run each target for FUZZ_SECONDS, one after the other, and
#              merge the inputs that reach new coverage into its corpus,
#              tests/fuzz/corpus/<target>/ (commit them). FUZZ_FORK=N runs
#              N processes of each at once (libFuzzer's -fork=N).
BUILD ?= build
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
BACKEND ?= stand-in
FUZZ_SECONDS ?= 3600
FUZZ_TARGETS ?= codec rules rewrite
FUZZ_FORK ?= 1

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS) --target remold remold-reconcile

build-all: configure
	cmake --build $(BUILD) -j $(JOBS)

fuzz-build: deps
	CXX=clang++-14 cmake -S tests/fuzz -B $(FUZZ_BUILD) -G Ninja >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Every target runs even when one fails; any failure fails the whole.
fuzz-long: fuzz-build
	@status=0; for target in $(FUZZ_TARGETS); do \
	  FUZZ_FORK=$(FUZZ_FORK) tests/fuzz/run.sh $(FUZZ_BUILD)/fuzz_$$target $(FUZZ_SECONDS) merge || status=1; \
	done; exit $$status

# On failure, the failing tests' own summary lines again at the very end
# (a CI log is often read from its tail).
test: build-all fuzz-build
	cd $(BUILD) && ctest --output-on-failure -j 1 || { \
	  echo '--- failing cases (from Testing/Temporary/LastTest.log):'; \
	  grep -E '^(FAILED|ERROR) |\[  FAILED  \]' Testing/Temporary/LastTest.log | sort -u | head -40; \
	  exit 1; }

run: build
	@REMOLD_RUN_BACKEND=$(BACKEND) bash scripts/run-local.sh $(BUILD)/remold

demo: build
	@.venv/bin/python examples/demo.py --build $(BUILD)

bench: build-all
	@bash bench/pass_through/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)

.PHONY: all deps configure build build-all fuzz-build fuzz-long test run demo bench clean
