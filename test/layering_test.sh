#!/usr/bin/env bash
# scripts/layering.sh must catch what it is there to catch. In a copy of the
# sources it plants, for every floor of the plan, an include that reaches
# one floor up (above the library, one of the library's inside), and beside
# them the other things the check refuses: a sibling room's header, a public
# header that includes an internal one, two headers that include each other
# and a C file in a folder on no floor. Then, over a made-up build folder of
# small objects, a symbol used upward and two objects that use each other.
# Every planted fault must be named in the check's report, and the real
# tree must pass.
#
#   test/layering_test.sh          (make check runs it after make layering)
set -u
cd "$(dirname "$0")/.." || exit 2
check=scripts/layering.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -z "${KEEP:-}" ] || trap "echo kept $tmp" EXIT
fail=0
say() { echo "$*"; }
bad() { echo "FAIL: $*"; fail=1; }

# a C file or header of a room, the first by name
first_file() { find "$1" -maxdepth 1 -type f \( -name '*.c' -o -name '*.cu' -o -name '*.h' \) | sort | head -1; }
first_header() { find "$1" -maxdepth 1 -type f -name '*.h' | sort | head -1; }

rooms=$($check --rooms)
[ -n "$rooms" ] || { echo "layering_test: no rooms from $check --rooms"; exit 2; }

for d in include src primitives layers train pipeline tools bench examples bindings scripts; do
    [ -e "$d" ] && cp -r "$d" "$tmp/"
done

expect=$tmp/expect
: >"$expect"
plant() { # file target: append an include of target to file, expect it reported
    printf '#include "%s"\n' "$2" >>"$tmp/$1"
    echo "include $1 -> $2 " >>"$expect"
}

# one floor up from every floor (the first room holding C of each rank)
ranks=$(echo "$rooms" | awk '{print $1}' | sort -un)
lib_header=$(first_header src/core)
for r in $ranks; do
    from=""
    for room in $(echo "$rooms" | awk -v r="$r" '$1 == r {print $3}'); do
        from=$(first_file "$room")
        [ -n "$from" ] && break
    done
    [ -n "$from" ] || continue
    up=""
    for room in $(echo "$rooms" | awk -v r="$r" '$1 > r {print $1, $3}' | sort -n | awk '{print $2}'); do
        up=$(first_header "$room")
        [ -n "$up" ] && break
    done
    kind=$(echo "$rooms" | awk -v r="$r" '$1 == r {print $2; exit}')
    if [ "$kind" = app ]; then
        plant "$from" "$lib_header" # above the library: the inside is closed
    fi
    [ -n "$up" ] && plant "$from" "$up"
done
# a sibling room of the ground floor
plant "$(first_file src/backends/cpu)" "$(first_header src/backends/cuda)"
# a public header that includes an internal one
plant "include/ladle/core.h" "$lib_header"
# two headers of one room that include each other
printf '#include "src/comm/loop_b.h"\n' >"$tmp/src/comm/loop_a.h"
printf '#include "src/comm/loop_a.h"\n' >"$tmp/src/comm/loop_b.h"
# a folder on no floor
mkdir -p "$tmp/stray"
echo 'int stray;' >"$tmp/stray/stray.c"

out=$($check --root "$tmp" --includes-only 2>&1)
st=$?
[ $st = 1 ] || bad "the planted includes: status $st, not 1"
n=0
while read -r line; do
    n=$((n + 1))
    grep -qF "  $line" <<<"$out" || bad "not reported: ${line% }"
done <"$expect"
grep -q 'cycle of includes: .*src/comm/loop_a.h' <<<"$out" || bad "the include cycle was not reported"
grep -q 'floor stray/stray.c: its folder is on no floor' <<<"$out" || bad "the stray folder was not reported"
say "planted $n upward includes, a cycle and a stray folder: $(grep -c '^  ' <<<"$out") lines reported"

# symbols: a made-up build folder, an object of core using one of the
# primitives, and two objects of comm using each other
cc=${CC:-cc}
obj() { # folder name source
    mkdir -p "$tmp/build/$1"
    printf '%s\n' "$3" >"$tmp/build/$1/$2.c"
    $cc -c "$tmp/build/$1/$2.c" -o "$tmp/build/$1/$2.o" || { echo "layering_test: $cc failed"; exit 2; }
}
obj src/core up 'int planted_up(void); int core_calls(void) { return planted_up(); }'
obj primitives prim 'int planted_up(void) { return 1; }'
# the registry and a backend may use each other's symbols one at a time
# (both arrows are stated), but not in a loop
obj src/core backend 'int planted_pong(void); int planted_ping(void) { return planted_pong(); }'
obj src/backends/cpu pong 'int planted_ping(void); int planted_pong(void) { return planted_ping(); }'
# two objects of one room are one unit: no loop reported
obj src/comm tick 'int planted_tock(void); int planted_tick(void) { return planted_tock(); }'
obj src/comm tock 'int planted_tick(void); int planted_tock(void) { return planted_tick(); }'
real=$tmp/real
mkdir -p "$real"
for d in include src primitives layers train pipeline tools bench examples bindings scripts; do
    [ -e "$d" ] && cp -r "$d" "$real/"
done
out=$($check --root "$real" "$tmp/build" 2>&1)
st=$?
[ $st = 1 ] || bad "the planted symbols: status $st, not 1"
grep -q 'symbol src/core/up -> primitives/prim planted_up (src/core may not use primitives)' <<<"$out" ||
    bad "the upward symbol was not reported"
grep -q 'cycle of objects using each other.s symbols: .*src/backends/cpu/pong' <<<"$out" ||
    bad "the object cycle between two rooms was not reported"
! grep -q 'src/comm/t[io]ck' <<<"$out" || bad "a loop inside one room was reported"

# and the real tree passes its include check
out=$($check --includes-only 2>&1) || bad "the tree itself: $out"

if [ $fail = 0 ]; then echo "layering_test: ok"; else echo "$out" | sed 's/^/  | /'; fi
exit $fail
