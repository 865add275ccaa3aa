# Flint's entry points. `make demo` and `make test` are the README's two commands.

CARGO ?= cargo
FLINT := target/release/flint
DEMO := target/demo

.PHONY: build host examples setup-build setup-test demo test lint bench fuzz image clean

## build: the flint binary (target/release/flint) and every example component
build: host examples

host:
	$(CARGO) build --release -p flint-cli

## the wasm32-wasip2 target (rustup adds a toolchain file's targets only when it installs
## the toolchain itself); setup-test adds the tools the tests drive (tests/setup.sh)
setup-build:
	@bash tests/setup.sh build

setup-test:
	@bash tests/setup.sh test

examples: setup-build
	cd examples && $(CARGO) build --release

## demo: word count over a few MB of generated text (folded, then as map/reduce across
## two executors: the same answer), then Monte Carlo pi
demo: build
	@mkdir -p $(DEMO)
	@echo "generating $(DEMO)/corpus.txt"
	@awk 'BEGIN { srand(42); for (i = 0; i < 120000; i++) { n = int(rand() * 12); line = ""; \
		for (j = 0; j < n; j++) { w = int(1000 * rand() * rand()); line = line (j ? " " : "") "w" w } print line } }' \
		> $(DEMO)/corpus.txt
	@ls -l $(DEMO)/corpus.txt
	$(FLINT) run examples/word-count --input $(DEMO)/corpus.txt --executors 2 --cores 1
	$(FLINT) run examples/word-count-mr --input $(DEMO)/corpus.txt --executors 2 --cores 1 --reduce-partitions 4
	$(FLINT) run examples/pi --conf points=10000000 --partitions 16

## test: unit tests, runtime tests on the real example components, CLI end-to-end tests, and
## the program examples' own tests (natively, through the SDK's Local)
test: setup-test build
	$(CARGO) test --release --workspace
	cd examples && $(CARGO) test --target $$(rustc -vV | sed -n 's/^host: //p') -p top-words -p tpch-q3
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --release -p flint-guest --no-deps

## lint: formatting, clippy and the API docs' links, host and guests
lint: setup-build
	$(CARGO) fmt --all --check
	cd examples && $(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	cd examples && $(CARGO) clippy --release -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --release --workspace --no-deps

## bench: start-up, instantiation and compute figures against same-run references
bench: build
	bash tests/setup.sh bench
	$(CARGO) bench -p flint-tests --bench bench

## fuzz: every decoder of outside bytes (wire frames, bundles, manifests) under libFuzzer,
## FUZZ_SECONDS each (cargo-fuzz is installed on first use; stable toolchain, no sanitizer)
FUZZ_SECONDS ?= 30
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd host/fuzz && for target in wire bundle manifest; do \
		CARGO_TARGET_DIR=$(CURDIR)/target/fuzz $(CARGO) fuzz run --fuzz-dir . -s none $$target -- \
			-max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

## image: the container image flint:latest, FROM scratch: the stripped binary, the
## libraries it links and a non-root user (podman; docker builds the same context)
IMAGE ?= flint:latest
image: host
	bash host/cli/image/stage.sh $(FLINT) target/image
	podman build -t $(IMAGE) -f target/image/Containerfile target/image

clean:
	$(CARGO) clean
