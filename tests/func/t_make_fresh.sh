#!/usr/bin/env bash
# The README's two commands on a machine where nothing is installed yet,
# without needing one: a PKG_CONFIG that knows no library until a stand-in
# for tests/deps.sh has run (as on a fresh Debian 12, where `make demo`
# once compiled without fuse3's include path because the Makefile read
# pkg-config when parsed, before deps), then
#  1. make demo (the demo script replaced by `true`) builds the gateway;
#  2. a build without deps stops with the remedy, not a compiler error;
#  3. make test builds after its deps step too, runs every suite although
#     one fails, prints every suite and the total line, and exits non-zero;
#     a suite that leaves no results fails it as well; all passing is 0.
# func: alone (make -j2 in the source tree; see run.sh)
set -u
: "${TOP:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"
command -v pkg-config > /dev/null || skip "no pkg-config"
tmp_dir gw-fresh

cat > "$tmp/pkg-config" << EOF
#!/bin/sh
# Knows nothing until deps ran; counts the calls made before then.
[ -e "$tmp/deps-done" ] && exec pkg-config "\$@"
echo early >> "$tmp/early-calls"
echo "Package was not found in the pkg-config search path" >&2
exit 1
EOF
printf '#!/bin/sh\necho "fake deps: installing"\ntouch "%s/deps-done"\n' "$tmp" > "$tmp/deps"
chmod +x "$tmp/pkg-config" "$tmp/deps"
mk() { make -C "$TOP" --no-print-directory PKG_CONFIG="$tmp/pkg-config" DEPS="$tmp/deps" "$@"; }

# 1. make demo, first run.
mk -j2 BUILD="$tmp/b1" DEMO=true demo > "$tmp/demo.log" 2>&1; st=$?
tail -5 "$tmp/demo.log"
[ $st = 0 ] || { cat "$tmp/demo.log" | grep -E 'error|Error' | head; fail "make demo on a fresh machine: exit $st"; }
"$tmp/b1/nvmf-gateway" --version | grep -q '^nvmf-gateway ' || fail "make demo built no working binary"
echo "1. make demo: built, $(wc -l < "$tmp/early-calls" 2> /dev/null || echo 0) pkg-config call(s) before deps"

# 2. No deps: the build refuses with the remedy.
rm -f "$tmp/deps-done"
mk BUILD="$tmp/b2" all > "$tmp/nodeps.log" 2>&1 && fail "a build without the libraries succeeded"
grep -q "run 'make deps'" "$tmp/nodeps.log" || { cat "$tmp/nodeps.log"; fail "no remedy in the error"; }
grep -q 'No such file' "$tmp/nodeps.log" && fail "the compiler ran without the libraries' flags"
echo "2. without deps: $(grep -o "pkg-config.*deps'" "$tmp/nodeps.log" | head -1)"

# 3. make test with stand-in suites (MAKEFILES reaches every sub-make):
# fake-build compiles the file that failed on the fresh machine.
cat > "$tmp/suites.mk" << 'EOF'
fake-build: $(BUILD)/fuse/fs.o
	@mkdir -p $(BUILD)/results; echo 'PASS fs.o' > $(BUILD)/results/fbuild.res
fake-fail:
	@mkdir -p $(BUILD)/results; echo 'FAIL one: on purpose' > $(BUILD)/results/ffail.res; exit 1
fake-pass:
	@mkdir -p $(BUILD)/results; echo 'PASS two' > $(BUILD)/results/fpass.res
fake-silent:
	@true
EOF
mt() {	# mt BUILD SUITES RESULTS...
	local b=$1 s=$2
	shift 2
	MAKEFILES="$tmp/suites.mk" mk BUILD="$b" TEST_SUITES="$s" TEST_RESULTS="$*" test
}
rm -f "$tmp/deps-done"
mt "$tmp/b3" "fake-build fake-fail fake-pass" "$tmp/b3/results/fbuild.res" \
	"$tmp/b3/results/ffail.res" "$tmp/b3/results/fpass.res" > "$tmp/test1.log" 2>&1; st=$?
cat "$tmp/test1.log" | grep -vE '^(cc|make)'
[ $st != 0 ] || fail "make test exited 0 with a failed test"
grep -q 'fs.o' "$tmp/b3/results/fbuild.res" 2> /dev/null || fail "make test did not build after deps"
[ -e "$tmp/b3/results/fpass.res" ] || fail "the suite after a failing one did not run"
grep -qx 'total: 2 passed, 1 failed, 0 skipped, 1 step(s) failed or without results' "$tmp/test1.log" ||
	fail "no or wrong total line"
grep -q 'STEP FAILED fake-fail: exit 2' "$tmp/test1.log" || fail "the failed step is not named"
echo "3a. make test with a failing suite: exit $st, every suite ran, total printed"

mt "$tmp/b3" "fake-pass fake-silent" "$tmp/b3/results/fpass.res" "$tmp/b3/results/fsilent.res" \
	> "$tmp/test2.log" 2>&1; st=$?
grep -vE '^(cc|make)' "$tmp/test2.log"
[ $st != 0 ] || fail "make test exited 0 with a suite that reported nothing"
grep -q "NO RESULTS $tmp/b3/results/fsilent.res" "$tmp/test2.log" || fail "the silent suite is not named"
echo "3b. make test with a suite without results: exit $st"

mt "$tmp/b3" "fake-build fake-pass" "$tmp/b3/results/fbuild.res" "$tmp/b3/results/fpass.res" \
	> "$tmp/test3.log" 2>&1; st=$?
grep -vE '^(cc|make)' "$tmp/test3.log"
[ $st = 0 ] || fail "make test failed with every suite passing: exit $st"
grep -qx 'total: 2 passed, 0 failed, 0 skipped' "$tmp/test3.log" || fail "wrong total line when all pass"
echo "3c. make test, all passing: exit 0"
