# warren build. `make` builds the binaries into build/bin; `make check`
# runs every test; `make demo` is the README's first command.
#
# Each folder under src/ is a module built into build/lib/lib<module>.a from
# all of its .c files except main.c, which is a binary's entry point.

CC      := gcc
CLANG   ?= clang
BUILD   ?= build
PREFIX  ?= /usr/local

PKGS    := libuv jansson libseccomp sqlite3 openssl libcurl libcares libnftables \
           libzstd
WARN    := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes \
           -Wstrict-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS  ?= -O2 -g
override CFLAGS += -std=gnu11 $(WARN) -D_GNU_SOURCE -fstack-protector-strong \
           -D_FORTIFY_SOURCE=2 -fPIE -Isrc
override LDFLAGS += -pie -Wl,-z,relro,-z,now
LIBS    := -lhttp_parser $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

MODULES := common init runtime store api net cli gitremote projects daemon
# Link order: a module comes before the modules it uses.
DAEMON_LIBS := daemon projects gitremote cli net api store runtime init common
CLI_LIBS    := cli api init common
GITREMOTE_LIBS := gitremote $(CLI_LIBS)

lib_srcs = $(filter-out src/$(1)/main.c,$(wildcard src/$(1)/*.c))
lib_objs = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(call lib_srcs,$(1)))

BINS := $(BUILD)/bin/warrend $(BUILD)/bin/warren $(BUILD)/bin/warren-init \
        $(BUILD)/bin/git-remote-warren
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/helpers/%,$(HELPER_SRCS))
# Data files (policy presets, ...) sit in share/warren beside bin/, as
# they are installed, so that warrend finds them in the build tree too.
DATA_SRCS := $(shell find data -type f 2>/dev/null)
DATA := $(patsubst data/%,$(BUILD)/share/warren/%,$(DATA_SRCS))

.PHONY: all deps check unit e2e security asan fuzz bench demo install clean \
        format lint
all: $(BINS) $(HELPERS) $(BUILD)/bench/wrbench $(BUILD)/bench/tiers $(DATA)

deps:
	@scripts/install-deps

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

define module_rule
$(BUILD)/lib/lib$(1).a: $(call lib_objs,$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@
	$$(if $$^,ar rcs $$@ $$^,ar rcs $$@)
endef
$(foreach m,$(MODULES),$(eval $(call module_rule,$(m))))

libs_of = $(foreach m,$(1),$(BUILD)/lib/lib$(m).a)

$(BUILD)/bin/warrend: $(BUILD)/obj/daemon/main.o $(call libs_of,$(DAEMON_LIBS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# The CLI starts for every command a user types, and loading libcrypto.so
# (its relocations and constructors) was most of that: 3.7 ms of CPU per
# command dynamic, 0.7 ms static. Its libc lookups (getaddrinfo for a TCP
# WARREN_HOST) still load the host's NSS modules.
CLI_LINK ?= -static-pie
CLI_LDLIBS := -lhttp_parser -ljansson -lcrypto -lpthread -lm
$(BUILD)/bin/warren: $(BUILD)/obj/cli/main.o $(call libs_of,$(CLI_LIBS))
	@mkdir -p $(dir $@)
	@rm -f $@
	$(CC) $(LDFLAGS) $(CLI_LINK) -o $@ $^ $(CLI_LDLIBS) 2>&1 | \
	  { grep -v "getaddrinfo' in statically linked\|in function .connect_tcp" >&2 || true; }; \
	  test -x $@

# git runs git-remote-warren for remotes whose URL is warren::NAME; it must
# be on PATH (make install puts it beside warren).
$(BUILD)/bin/git-remote-warren: $(BUILD)/obj/gitremote/main.o \
    $(call libs_of,$(GITREMOTE_LIBS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# warren-init is static: it runs inside sandboxes from a sealed memfd and
# must not depend on anything in the sandbox's image.
$(BUILD)/bin/warren-init: $(BUILD)/obj/init/main.o $(call libs_of,init common)
	@mkdir -p $(dir $@)
	$(CC) -static -o $@ $^

$(BUILD)/share/warren/%: data/%
	@mkdir -p $(dir $@)
	install -m 0644 $< $@

$(BUILD)/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -static -D_GNU_SOURCE -Wall -Wextra -Werror -o $@ $<

# ---- tests -------------------------------------------------------------

TEST_LIBS := $(DAEMON_LIBS)
$(BUILD)/tests/%: tests/unit/%.c $(call libs_of,$(TEST_LIBS))
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-missing-prototypes $(LDFLAGS) -o $@ $< \
	  $(call libs_of,$(TEST_LIBS)) $(LIBS) -lcmocka

# test_init runs warren-init; sanitizer builds use the normal static one.
INIT_BIN ?= $(BUILD)/bin/warren-init
unit: $(TESTS) $(INIT_BIN)
	@tests/run-unit $(TESTS)

check: deps
	$(MAKE) lint
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) asan
	$(MAKE) fuzz
	tests/run-e2e tests/e2e/*.sh tests/security/*.sh

e2e: all
	tests/run-e2e tests/e2e/*.sh

# The adversarial suite: hostile programs and clients (docs/security.md).
security: all
	tests/run-e2e tests/security/*.sh

# The unit tests again, built with AddressSanitizer and UBSan.
asan: $(BUILD)/bin/warren-init
	$(MAKE) BUILD=build-asan CC=$(CLANG) INIT_BIN=$(BUILD)/bin/warren-init \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined" unit

# Every fuzz target, for a bounded number of runs.
FUZZ_RUNS ?= 20000
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZERS := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(FUZZ_SRCS))
FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined \
  -fno-omit-frame-pointer
fuzz:
	$(MAKE) BUILD=build-fuzz CC=$(CLANG) CFLAGS="$(FUZZ_CFLAGS)" \
	  LDFLAGS="-fsanitize=address,undefined" fuzzers
	tests/run-fuzz $(FUZZ_RUNS) $(FUZZERS)

fuzzers: $(FUZZERS)
FUZZ_LIBS := $(DAEMON_LIBS)
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(call libs_of,$(FUZZ_LIBS))
	$(CC) $(CFLAGS) -Wno-missing-prototypes -fsanitize=fuzzer -o $@ $< \
	  $(call libs_of,$(FUZZ_LIBS)) $(LIBS)

$(BUILD)/bench/wrbench: bench/wrbench.c $(call libs_of,api common)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_of,api common) $(LIBS)

# The month of 10,000 projects on the real planner and store.
$(BUILD)/bench/tiers: bench/tiers.c $(call libs_of,projects store common)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_of,projects store common) \
	  $(LIBS)

bench: all $(BUILD)/bench/wrbench
	bench/run

# git finds git-remote-warren on PATH only, so the demo installs it.
demo: deps
	$(MAKE) all
	install -D -m 0755 $(BUILD)/bin/git-remote-warren \
	  $(DESTDIR)$(PREFIX)/bin/git-remote-warren
	scripts/demo

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/warren
	install -m 0755 $(BUILD)/bin/warren $(BUILD)/bin/warrend \
	  $(BUILD)/bin/git-remote-warren $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/bin/warren-init $(DESTDIR)$(PREFIX)/lib/warren/
	for f in $(patsubst data/%,%,$(DATA_SRCS)); do \
	  install -D -m 0644 data/$$f $(DESTDIR)$(PREFIX)/share/warren/$$f || exit 1; \
	done

format:
	clang-format -i $$(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'bench/*.c')

lint:
	clang-format --dry-run --Werror $$(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'bench/*.c')

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
