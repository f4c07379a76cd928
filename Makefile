# nvmf-gateway build.  `make` builds build/nvmf-gateway; see README for the rest.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
DESTDIR ?=

BUILD ?= build
CC ?= cc
PKG_CONFIG ?= pkg-config
# Libraries of the design card, added here as their modules land.
PKGS := liburing libconfig fuse3 libnl-genl-3.0 libibverbs librdmacm
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

.PHONY: all asan unit-bins check unit func interop test deps demo \
	install clean asan-unit

all: $(BUILD)/nvmf-gateway

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libgateway.a: $(MODULE_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/nvmf-gateway: $(BUILD)/gateway/main.o $(BUILD)/libgateway.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/tests/unit/%: tests/unit/%.c $(UNIT_HELPERS) $(BUILD)/libgateway.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(UNIT_HELPERS) $(BUILD)/libgateway.a \
		$(CHECK_LIBS) $(LDLIBS_ALL)

unit-bins: $(UNIT_BINS)

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
	$(MAKE) asan-unit
	tests/summary.sh $(BUILD)/results build-asan/results

install: all
	install -D -m 0755 $(BUILD)/nvmf-gateway $(DESTDIR)$(BINDIR)/nvmf-gateway
	install -d $(DESTDIR)$(SYSCONFDIR)/nvmf-gateway
	[ -e $(DESTDIR)$(SYSCONFDIR)/nvmf-gateway/nvmf-gateway.conf ] || \
		install -m 0644 etc/nvmf-gateway.conf $(DESTDIR)$(SYSCONFDIR)/nvmf-gateway/nvmf-gateway.conf

clean:
	rm -rf build build-asan build-fuzz

-include $(MODULE_OBJS:.o=.d) $(BUILD)/gateway/main.d
