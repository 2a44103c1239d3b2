#!/bin/sh
# The shared library exports exactly the functions the public headers
# declare with LADLE_API: nothing internal leaks (the build hides every
# symbol by default), and nothing declared is missing.
#
#   scripts/check-symbols.sh LIB HEADER...
#   (make check: scripts/check-symbols.sh lib/libladle.so include/ladle.h include/ladle/*.h)
set -u
lib=${1:?usage: scripts/check-symbols.sh LIB HEADER...}
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# declarations may span lines: join them (preprocessor lines left out), then take each LADLE_API up to
# its parameter list's "(" and keep the name before it (a LADLE_DEPRECATED("...") between
# them is dropped first)
grep -hv "^[[:space:]]*#" "$@" | tr '\n' ' ' |
    sed 's/LADLE_DEPRECATED *( *"[^"]*" *)//g' | grep -o 'LADLE_API[^;{}()]*(' |
    sed -n 's/.*[^A-Za-z0-9_]\([A-Za-z_][A-Za-z0-9_]*\) *($/\1/p' | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/exported"
if [ ! -s "$tmp/declared" ] || [ ! -s "$tmp/exported" ]; then
    echo "check-symbols: nothing declared or nothing exported ($lib)"
    exit 1
fi
status=0
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
    echo "check-symbols: $lib exports symbols no header declares with LADLE_API:"
    echo "$extra" | sed 's/^/    /'
    status=1
fi
if [ -n "$missing" ]; then
    echo "check-symbols: declared with LADLE_API but not exported by $lib:"
    echo "$missing" | sed 's/^/    /'
    status=1
fi
[ $status = 0 ] && echo "check-symbols: $(wc -l <"$tmp/exported") symbols, exactly the declared ones"
exit $status
