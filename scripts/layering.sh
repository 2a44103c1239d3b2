#!/usr/bin/env bash
# The layering rule, checked: dependencies run one way,
#
#   core <- comm <- op <- primitives <- layers <- train <- pipeline
#
# and a backend (src/backends/<name>/) is reached only through the backend
# table: it may use core, and only the registry (src/core/backend.c) may name
# its symbols. The guarded test device is the CPU's kernels behind a fence,
# so it alone may also use the CPU backend. Two checks, so that neither an include nor a call can go
# upward unseen:
#   - includes: every quoted #include of a library source resolves (beside
#     the file, then from the repository root) to a file of its own
#     subsystem or a lower one; public headers (include/) are open to all;
#   - symbols: every symbol an object file leaves undefined that another
#     library object defines is defined in its own subsystem or a lower one.
# Usage: scripts/layering.sh BUILD_DIR [VARIANT_OBJ_DIR]   (after the library
# is built; a CUDA build's own objects, which stand beside or replace the
# plain ones, are in the second folder)
# There are no exceptions: a dependency the wrong way is a design error.
set -u
build=${1:?usage: layering.sh BUILD_DIR [VARIANT_OBJ_DIR]}
overlay=${2:-}
[ -z "$overlay" ] || overlay=$(realpath "$overlay") || exit 2
cd "$(dirname "$0")/.." || exit 2
# an object's file: the variant's where it has one
obj() { if [ -n "$overlay" ] && [ -f "$overlay/$1" ]; then echo "$overlay/$1"; else echo "$build/$1"; fi; }

rank_of() { # path -> "rank subsystem", or nothing outside the library
    case $1 in
    src/core/*) echo "0 core" ;;
    src/backends/*) b=${1#src/backends/}; echo "0 backend:${b%%/*}" ;;
    src/comm/*) echo "1 comm" ;;
    src/op/*) echo "2 op" ;;
    primitives/*) echo "3 primitives" ;;
    layers/*) echo "4 layers" ;;
    src/train/*) echo "5 train" ;;
    src/pipeline/*) echo "6 pipeline" ;;
    esac
}

# may code of subsystem $2 (rank $1) depend on subsystem $4 (rank $3)?
# $5: the depending file, for the registry's leave to name backends
allowed() {
    case $4 in
    backend:*) [ "$2" = "$4" ] || [ "$5" = src/core/backend.c ] ||
        { [ "$2" = backend:guarded ] && [ "$4" = backend:cpu ]; } ;;
    *) case $2 in backend:*) [ "$4" = core ] ;; *) [ "$3" -le "$1" ] ;; esac ;;
    esac
}

command -v nm >/dev/null || { echo "layering: nm (binutils) is needed" >&2; exit 2; }
violations=$(mktemp)
trap 'rm -f "$violations"' EXIT

sources=$(ls src/*/*.[ch] src/backends/*/*.[ch] src/backends/*/*.cu src/backends/*/*/*.h \
    src/backends/*/*/*.cc primitives/*.[ch] layers/*.[ch] 2>/dev/null)
for f in $sources; do
    read -r r s <<<"$(rank_of "$f")"
    grep -o '^#include "[^"]*"' "$f" | sed 's/^#include "\(.*\)"$/\1/' | while read -r inc; do
        if [ -f "$(dirname "$f")/$inc" ]; then
            target=$(realpath --relative-to=. "$(dirname "$f")/$inc")
        elif [ -f "$inc" ]; then
            target=$inc
        else
            continue # a public header through -Iinclude
        fi
        tr=$(rank_of "$target") || true
        [ -n "$tr" ] || continue
        read -r rt st <<<"$tr"
        allowed "$r" "$s" "$rt" "$st" "$f" || echo "include $f -> $target ($s may not use $st)"
    done
done >>"$violations"

objects=$( (cd "$build" && ls src/*/*.o src/backends/*/*.o primitives/*.o layers/*.o 2>/dev/null
    if [ -n "$overlay" ]; then
        cd "$overlay" && ls src/*/*.o src/backends/*/*.o src/backends/*/*/*.o 2>/dev/null
    fi) | sort -u)
if [ -z "$objects" ]; then
    echo "layering: no objects under $build (build the library first)" >&2
    exit 2
fi
# symbol -> defining object
defs=$(for o in $objects; do nm -g --defined-only "$(obj "$o")" | awk -v o="$o" 'NF==3{print $3, o}'; done)
for o in $objects; do
    read -r r s <<<"$(rank_of "$o")"
    nm -u "$(obj "$o")" | awk '{print $NF}' | sort -u | join - <(echo "$defs" | sort -k1,1) |
        while read -r sym def; do
            read -r rt st <<<"$(rank_of "$def")"
            src=${o%.o}.c # the registry's leave is by its source's name
            allowed "$r" "$s" "$rt" "$st" "$src" ||
                echo "symbol ${o%.o} -> ${def%.o} $sym ($s may not use $st)"
        done
done >>"$violations"

status=0
unexpected=$(sort -u "$violations")
if [ -n "$unexpected" ]; then
    echo "layering: dependencies that go the wrong way:"
    echo "$unexpected" | sed 's/^/  /'
    status=1
fi
[ $status -eq 0 ] && echo "layering: ok ($(echo "$objects" | wc -w) objects, $(echo "$sources" | wc -w) sources)"
exit $status
