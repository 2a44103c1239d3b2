#!/usr/bin/env bash
# scripts/api-lint.sh must catch what it is there to catch. In a copy of the
# public headers it strips the collectivity statement of a prototype of its
# own block, of a group of prototypes under one block and of a collective
# call, and adds a prototype whose only statement is a section comment's;
# each must be named (file:line and function) and fail the check. It then
# plants a function of 8 parameters, an _ex name and an *_opts struct:
# counted, failing only with --strict; and an undocumented prototype in
# include/ladle/deprecated.h, which is skipped. The real tree must pass.
#
#   test/api_lint_test.sh          (make api-lint runs it after the check)
set -u
cd "$(dirname "$0")/.." || exit 2
check=scripts/api-lint.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

out=$($check 2>&1) || bad "the real tree fails the check: $(echo "$out" | tail -3)"

fresh() { rm -rf "$tmp/include" && cp -r include "$tmp/"; }
# the line of the prototype of function $2 in header $1
line_of() { grep -n "LADLE_API.*[^a-z_]$2(" "$tmp/include/$1" | head -1 | cut -d: -f1; }
# $1 header, $2 sed program, $3.. functions that must be reported
expect_missing() {
    local h=$1 prog=$2 f n
    shift 2
    sed -i "$prog" "$tmp/include/$h"
    out=$($check "$tmp/include" 2>&1) && bad "$h ($prog): the check passed"
    for f in "$@"; do
        n=$(line_of "$h" "$f")
        echo "$out" | grep -q "^  $tmp/include/$h:$n: $f\$" ||
            bad "$h ($prog): $f (line $n) not reported"
    done
}

# a block of its own
fresh
expect_missing ladle/partition.h \
    's|^/\* 1 if the calling rank is a member, else 0 (also for p == NULL). Local. \*/|/* 1 if the calling rank is a member, else 0. */|' \
    ladle_partition_active
# one block over a group of prototypes: every one of them
fresh
expect_missing ladle/tensor.h '/^\/\* Accessors; each returns/,/\*\//s|^ \* Local\. \*/$| */|' \
    ladle_tensor_dtype ladle_tensor_device ladle_tensor_ndim ladle_tensor_data
# a collective call, its statement on a line of its own
fresh
expect_missing ladle/checkpoint.h '/^ \* caller.s integers (up to max_meta/,/\*\//{/^ \* Collective over comm\.$/d}' \
    ladle_checkpoint_load
# a statement in a section comment above, not in the prototype's block
fresh
cat >>"$tmp/include/ladle/layout.h" <<'EOF'
/* Every call below is local. */

/* Something new. */
LADLE_API int ladle_layout_planted(const ladle_layout *l);
EOF
out=$($check "$tmp/include" 2>&1) && bad "a section comment's statement counted"
echo "$out" | grep -q "layout.h:[0-9]*: ladle_layout_planted$" ||
    bad "ladle_layout_planted (statement only in a section comment) not reported"

# (b), (c), (d): counted, failing only with --strict; deprecated.h skipped
fresh
cat >>"$tmp/include/ladle/layout.h" <<'EOF'
/* Planted. Local. */
LADLE_API int ladle_layout_planted_ex(int a, int b, int c, int d, int e, int f, int g,
                                      int h);
typedef struct ladle_layout_opts {
    size_t size;
} ladle_layout_opts;
EOF
printf '/* old */\nLADLE_API int ladle_gone(void);\n' >"$tmp/include/ladle/deprecated.h"
out=$($check "$tmp/include" 2>&1) || bad "planted (b)-(d) failed the check without --strict"
echo "$out" | grep -q "layout.h:[0-9]*: ladle_layout_planted_ex (8 parameters)" ||
    bad "8 parameters not reported"
echo "$out" | grep -q "layout.h:[0-9]*: ladle_layout_planted_ex$" || bad "_ex not reported"
echo "$out" | grep -q "layout.h:[0-9]*: ladle_layout_opts$" || bad "*_opts not reported"
echo "$out" | grep -q ladle_gone && bad "deprecated.h was not skipped"
$check --strict "$tmp/include" >/dev/null 2>&1 && bad "--strict passed planted (b)-(d)"

[ $fail = 0 ] && echo "api_lint_test: ok (every planted fault reported, the real tree passes)"
exit $fail
