# lockgate -- build, run, test.
#
#   make              build build/lockgate and build/lockctl
#   make run          install what is missing, build, serve on 127.0.0.1:8080
#   make test         install what is missing, build, run every test
#   make test SANITIZE=1   the same under AddressSanitizer + UBSan
#   make bench        the benchmark tables (bench/RESULTS.md), the fleet targets
#                     (bench/fleet.sh), then each Redis mode
#   make ui-test      the status page (/ui/) in a real browser (chromium)
#   make image        the container image, built with buildah
#   make image-test   run the image and check it from the host
#   make fuzz         each libFuzzer harness (tests/fuzz/) for FUZZ_SECONDS (30)
#   make format       apply .clang-format to every C file
#   make format-check fail if any C file is not formatted (CI runs it)

SANITIZE ?=
ifeq ($(SANITIZE),1)
BUILD    ?= build/sanitize
SANFLAGS  = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SANITIZE),fuzz)
# make fuzz: clang's libFuzzer with ASan + UBSan over the same sources.
BUILD    ?= build/fuzz
CC        = clang
SANFLAGS  = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
else
BUILD    ?= build
SANFLAGS  =
endif

CC       ?= cc
PKGS      = libmicrohttpd hiredis libcjson gnutls
CPPFLAGS += -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I. -I$(BUILD)/gen
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter -pthread $(SANFLAGS) \
            $(shell pkg-config --cflags $(PKGS) libcurl 2>/dev/null)
LDFLAGS  += -pthread $(SANFLAGS)
LIBS      = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CURL_LIBS = $(shell pkg-config --libs libcurl 2>/dev/null)

# ---- sources ---------------------------------------------------------------
LUA      := $(sort $(wildcard lua/*.lua))
CORE_SRC := $(sort $(wildcard common/*.c server/*.c handlers/*.c idgen/*.c))
CORE_SRC := $(filter-out server/main.c,$(CORE_SRC))
CORE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC))
# lockctl links cli/ and common/ only: the rules it shares with the gateway.
CLI_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard cli/*.c)))
COMMON_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard common/*.c)))
UI       := $(sort $(wildcard ui/*))
GEN      := $(BUILD)/gen/lua_scripts.h $(BUILD)/gen/openapi_yaml.h $(BUILD)/gen/ui_files.h

UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
INTEG_SRC:= $(sort $(wildcard tests/integration/test_*.c))
INTEG_BIN:= $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(INTEG_SRC))
HARNESS  := $(BUILD)/obj/tests/integration/harness.o
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_SECONDS ?= 30

# Keep test objects: they are not intermediate files to throw away.
.SECONDARY:

.PHONY: all deps run test test-unit test-integration bench image image-test install clean format format-check ui-test fuzz fuzz-build
all: $(BUILD)/lockgate $(BUILD)/lockctl

deps:
	@scripts/deps.sh

# ---- generated C from lua/*.lua and openapi.yaml (xxd -i, not NUL-terminated)
# A line `--@include _x.lua` in a script is replaced by lua/_x.lua.
$(BUILD)/gen/lua_scripts.h: $(LUA) Makefile
	@mkdir -p $(BUILD)/gen/lua
	@for f in lua/[a-z]*.lua; do b=$$(basename $$f .lua); \
	  awk '/^--@include / { f = "lua/" $$2; while ((getline l < f) > 0) print l; close(f); next } \
	       { print }' $$f > $(BUILD)/gen/lua/$$b.lua; done
	@(cd $(BUILD)/gen/lua && for f in *.lua; do xxd -i $$f; done) > $@.tmp && mv $@.tmp $@

# The status page (/ui/): every file of ui/, as ui_<name>_<ext>[_len].
$(BUILD)/gen/ui_files.h: $(UI)
	@mkdir -p $(dir $@)
	@(cd ui && for f in *; do xxd -i $$f; done) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/openapi_yaml.h: openapi.yaml
	@mkdir -p $(dir $@)
	@xxd -i openapi.yaml > $@.tmp && mv $@.tmp $@

# ---- objects ----------------------------------------------------------------
$(BUILD)/obj/%.o: %.c $(GEN) $(wildcard common/*.h server/*.h server/*.inc handlers/*.h idgen/*.h cli/*.h tests/*.h tests/integration/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/lockgate: $(BUILD)/obj/server/main.o $(CORE_OBJ)
	$(CC) $(LDFLAGS) $^ $(LIBS) -o $@

$(BUILD)/lockctl: $(CLI_OBJ) $(COMMON_OBJ)
	$(CC) $(LDFLAGS) $^ $(CURL_LIBS) $(shell pkg-config --libs libcjson) -o $@

# ---- tests ------------------------------------------------------------------
$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LIBS) -o $@

# A unit test of lockctl's parts (test_cli_*) links the part it tests, not
# the gateway.
$(BUILD)/tests/test_cli_sse: $(BUILD)/obj/tests/unit/test_cli_sse.o $(BUILD)/obj/cli/sse.o $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(shell pkg-config --libs libcjson) -o $@

# An LD_PRELOAD shim for redis-server (test_idloss): never under the
# sanitizers, whose runtime redis-server does not load.
TIMESHIFT := $(BUILD)/tests/timeshift.so
$(TIMESHIFT): tests/integration/timeshift.c
	@mkdir -p $(dir $@)
	cc -O2 -shared -fPIC -Wall -Wextra $< -ldl -o $@

$(INTEG_BIN): $(BUILD)/tests/%: $(BUILD)/obj/tests/integration/%.o $(HARNESS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(CURL_LIBS) $(shell pkg-config --libs libcjson) -o $@

$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer $^ $(LIBS) -o $@

fuzz-build: $(FUZZ_BIN)

# Each harness runs FUZZ_SECONDS on its seed corpus (tests/fuzz/corpus/),
# new inputs kept under build/fuzz; a crash, leak or UB fails the target.
fuzz: deps
	@scripts/deps.sh clang libclang-rt-dev
	@$(MAKE) --no-print-directory SANITIZE=fuzz fuzz-build
	@BUILD=build/fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh

test: deps
	@$(MAKE) --no-print-directory all $(UNIT_BIN) $(INTEG_BIN) $(TIMESHIFT)
	@BUILD=$(BUILD) tests/run.sh

# The status page in a real browser: Debian's chromium, playwright-core
# from npm (tests/ui/package.json, pinned), a real gateway and Redis.
# Writes docs/ui.png and docs/ui-phone.png, which docs/operations.md shows.
ui-test: deps
	@scripts/deps.sh chromium
	@command -v node >/dev/null || scripts/deps.sh nodejs
	@command -v npm >/dev/null || scripts/deps.sh npm
	@$(MAKE) --no-print-directory all
	@cd tests/ui && npm install --no-audit --no-fund --silent
	@BUILD=$(BUILD) node tests/ui/ui_test.js

run: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) scripts/run.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) bench/run.sh
	@BUILD=$(BUILD) bench/fleet.sh
	@BUILD=$(BUILD) bench/modes.sh
	@BUILD=$(BUILD) bench/tls.sh
	@BUILD=$(BUILD) bench/redis_tls.sh

image:
	@scripts/image.sh

image-test: image
	@scripts/image-test.sh

PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/lockgate $(BUILD)/lockctl $(DESTDIR)$(PREFIX)/bin/
	install -m 644 cli/lockctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/

# ---- formatting (clang-format from Debian; .clang-format at the root) -------
C_FILES = $(shell find server handlers idgen cli common tests -name '*.[ch]' 2>/dev/null)

format:
	@command -v clang-format >/dev/null || scripts/deps.sh clang-format
	clang-format -i $(C_FILES)

format-check:
	@command -v clang-format >/dev/null || scripts/deps.sh clang-format
	clang-format --dry-run -Werror $(C_FILES)

clean:
	rm -rf build
