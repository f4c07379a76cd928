# nvmf-gateway build.  `make` builds build/nvmf-gateway; see README for the rest.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/nvmf-gateway
DESTDIR ?=

BUILD ?= build
CC ?= cc
PKG_CONFIG ?= pkg-config
# Libraries of the design card, added here as their modules land.
# libcrypto (OpenSSL, Debian's standard crypto library): HMAC, SHA-2 and the
# FFDHE named groups that DH-HMAC-CHAP authentication needs, via EVP_PKEY.
PKGS := liburing libconfig fuse3 libnl-genl-3.0 libnl-route-3.0 libibverbs librdmacm libcrypto
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

OPT ?= -O2
SAN ?=
CFLAGS_ALL := -std=gnu11 -Wall -Wextra -Werror $(OPT) -g -D_GNU_SOURCE \
	-DNVMF_GATEWAY_VERSION='"$(VERSION)"' -I. -MMD -MP \
	$(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null) $(SAN) $(CFLAGS)
LDLIBS_ALL := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lpthread $(LDLIBS)

# Every module's .c is part of the core library that the binary, the unit
# tests and the fuzzers link; only main.c is the binary's own.
MODULE_SRCS := $(sort $(filter-out gateway/main.c,$(wildcard gateway/*.c transports/*.c nbd/*.c fuse/*.c)))
MODULE_OBJS := $(MODULE_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
UNIT_HELPERS := $(filter-out $(UNIT_SRCS),$(wildcard tests/unit/*.c))
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
# Fuzzers: every tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput and
# has its seeds in tests/fuzz/corpus/NAME/; built with clang into build-fuzz.
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/%)
FUZZ_HELPERS := tests/unit/tcp_fixture.c $(filter-out $(FUZZ_SRCS),$(wildcard tests/fuzz/*.c))
FUZZ_TIME ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

.PHONY: all asan unit-bins check unit func interop test deps demo \
	install uninstall clean asan-unit fuzz fuzz-bins test-systemd

all: $(BUILD)/nvmf-gateway $(BUILD)/nvmf-test-target

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libgateway.a: $(MODULE_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/nvmf-gateway: $(BUILD)/gateway/main.o $(BUILD)/libgateway.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# The fault-injecting NVMe/TCP test target (tests/target/): a test tool, not
# part of the gateway; it shares only the wire structures, CRC32C and the logging API.
TARGET_SRCS := $(sort $(wildcard tests/target/*.c))
TARGET_OBJS := $(TARGET_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/transports/crc32c.o $(BUILD)/gateway/log.o
$(BUILD)/nvmf-test-target: $(TARGET_OBJS)
	$(CC) $(CFLAGS_ALL) -o $@ $^

$(BUILD)/tests/unit/%: tests/unit/%.c $(UNIT_HELPERS) $(BUILD)/libgateway.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(UNIT_HELPERS) $(BUILD)/libgateway.a \
		$(CHECK_LIBS) $(LDLIBS_ALL)

unit-bins: $(UNIT_BINS)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_HELPERS) $(BUILD)/libgateway.a
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $< $(FUZZ_HELPERS) $(BUILD)/libgateway.a \
		$(LDLIBS_ALL)

fuzz-bins: $(FUZZ_BINS)

# Each fuzzer for FUZZ_TIME seconds on a copy of its corpus; any crash,
# leak or broken invariant fails, and so does a fuzzer that did not build
# (run.sh reports it).  One result line per fuzzer.
fuzz:
	@rm -rf build-fuzz/results
	-$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 \
		SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins
	tests/fuzz/run.sh build-fuzz $(FUZZ_TIME)

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		all unit-bins

unit: all unit-bins
	tests/unit/run.sh $(BUILD)

func: all
	tests/func/run.sh $(BUILD)

check: unit func

interop: all
	tests/interop/run.sh $(BUILD)

# The service under a real systemd: a guest with systemd as PID 1 (Debian 12
# root from debootstrap, cached in /var/tmp/nvmf-gateway-sysd), the unit
# installed, nvmet in the guest.  SYSD_DEB=FILE.deb installs that package.
test-systemd: all
	tests/systemd/run.sh $(BUILD)

asan-unit:
	@rm -rf build-asan/results
	$(MAKE) asan
	tests/unit/run.sh build-asan

deps:
	tests/deps.sh

demo: deps all
	tests/demo.sh $(BUILD)

# The one command of the README: everything, on a fresh Debian 12 machine.
test:
	tests/deps.sh
	@rm -rf $(BUILD)/results
	$(MAKE) all unit-bins
	$(MAKE) check
	$(MAKE) interop
	$(MAKE) test-systemd
	$(MAKE) asan-unit
	-$(MAKE) fuzz
	tests/summary.sh $(BUILD)/results build-asan/results build-fuzz/results

# The example configuration is installed only where none exists (mode
# 0600: it is where DH-HMAC-CHAP secrets go); the drop-ins are examples
# for the admin to copy, not active.
install: all
	install -D -m 0755 $(BUILD)/nvmf-gateway $(DESTDIR)$(BINDIR)/nvmf-gateway
	install -d $(DESTDIR)$(SYSCONFDIR)/nvmf-gateway $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(DOCDIR)
	sed 's|/usr/local/bin/|$(BINDIR)/|g; s|/etc/nvmf-gateway/|$(SYSCONFDIR)/nvmf-gateway/|g' \
		systemd/nvmf-gateway.service > $(DESTDIR)$(UNITDIR)/nvmf-gateway.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/nvmf-gateway.service
	install -m 0644 man/nvmf-gateway.8 $(DESTDIR)$(MANDIR)/man8/nvmf-gateway.8
	install -m 0644 man/nvmf-gateway.conf.5 $(DESTDIR)$(MANDIR)/man5/nvmf-gateway.conf.5
	install -m 0644 systemd/nvmf-gateway-nbd-only.conf systemd/nvmf-gateway-fuse-host.conf \
		systemd/vm-host-ordering.conf $(DESTDIR)$(DOCDIR)/
	[ -e $(DESTDIR)$(SYSCONFDIR)/nvmf-gateway/nvmf-gateway.conf ] || \
		install -m 0600 etc/nvmf-gateway.conf $(DESTDIR)$(SYSCONFDIR)/nvmf-gateway/nvmf-gateway.conf

# Leaves the configuration: it is the admin's.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/nvmf-gateway $(DESTDIR)$(UNITDIR)/nvmf-gateway.service \
		$(DESTDIR)$(MANDIR)/man8/nvmf-gateway.8 $(DESTDIR)$(MANDIR)/man5/nvmf-gateway.conf.5 \
		$(DESTDIR)$(DOCDIR)/nvmf-gateway-nbd-only.conf \
		$(DESTDIR)$(DOCDIR)/nvmf-gateway-fuse-host.conf $(DESTDIR)$(DOCDIR)/vm-host-ordering.conf
	-rmdir $(DESTDIR)$(DOCDIR)

clean:
	rm -rf build build-asan build-fuzz

-include $(MODULE_OBJS:.o=.d) $(BUILD)/gateway/main.d $(TARGET_SRCS:%.c=$(BUILD)/%.d)
