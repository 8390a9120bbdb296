# The toolchain's make targets. `make run` and `make test` are the two
# commands of the README; everything else is for developers.

SHELL := /bin/bash
GO ?= go
BIN := bin
ART := artifacts
DEVICE ?= $(ART)/ipu0
TOOLS := ipu-plan ipu-as ipu-dump ipu-diff ipu-pack ipu-load ipu-check
MODULES := formats libs tools scripts
# -count=1: the end-to-end test runs tool binaries it builds itself, which
# the test cache cannot see; never trust a cached pass.
GOFLAGS_TEST ?= -count=1

.PHONY: gendata all build run run-asm test test-go test-profile vet fmt-check bench fuzz verify clean deps-capnp

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./tools/,$(TOOLS))

# Until the compiler lands, `make run` runs the hand-written assembly demo.
run: run-asm

ASM_DEMO := testdata/asm/dot64
run-asm: build
	@mkdir -p $(ART)/dot64
	$(BIN)/ipu-as $(ASM_DEMO).s -o $(ART)/dot64/dot64.ipuobj
	$(BIN)/ipu-pack $(ART)/dot64/dot64.ipuobj -o $(ART)/dot64/dot64.ipuexe
	$(BIN)/ipu-load --device $(DEVICE) $(ART)/dot64/dot64.ipuexe
	$(BIN)/ipu-check --device $(DEVICE) --data $(ASM_DEMO)/test_data_set_0 \
		--profile $(ART)/dot64/dot64.capnp $(ART)/dot64/dot64.ipuexe
	$(BIN)/ipu-dump $(ART)/dot64/dot64.capnp | head -n 30

test: vet fmt-check deps-capnp test-go run-asm

test-go:
	for m in $(MODULES); do (cd $$m && $(GO) test $(GOFLAGS_TEST) ./...) || exit 1; done

vet:
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# capnp decodes profiles in the profile format's test; it comes from Debian.
deps-capnp:
	@command -v capnp >/dev/null 2>&1 || { \
		echo "installing capnproto (for capnp decode in tests)"; \
		(apt-get update -qq && apt-get install -y -qq capnproto >/dev/null) || \
		(sudo apt-get update -qq && sudo apt-get install -y -qq capnproto >/dev/null); }

bench: build
	$(GO) run ./scripts/bench

FUZZTIME ?= 30s
# Every fuzz target, FUZZTIME each: module, package, target.
FUZZ_TARGETS := \
	formats:./obj:FuzzRead formats:./ipuexe:FuzzRead formats:./profile:FuzzRead \
	formats:./plan:FuzzRead libs:./onnx:FuzzReadModel libs:./onnx:FuzzReadTensor \
	libs:./graph:FuzzBuild libs:./asm:FuzzAssemble libs:./sim:FuzzRun \
	libs:./sim:FuzzUnmarshalState libs:./device:FuzzParseHeader libs:./sched:FuzzSchedule
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		IFS=: read -r mod pkg fn <<< "$$t"; \
		echo "fuzz $$mod/$$pkg $$fn"; \
		(cd $$mod && $(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME)) || exit 1; \
	done

# verify: long checks: the differential simulator test at length.
verify:
	cd libs && $(GO) test ./simref -run Diff -long

clean:
	rm -rf $(BIN) $(ART)

# Regenerate the test data of the assembly programs (committed; a test
# checks it matches the generator).
gendata:
	cd scripts && $(GO) run ./gendata -out ../testdata/asm
	cd scripts && $(GO) run ./genmodels -out ../testdata/models
