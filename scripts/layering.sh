#!/usr/bin/env bash
# The floor plan, checked: every folder that holds C is a floor (or a room
# of one), and code uses only its own room and the floors below it.
#
# FLOORS below is the plan, from the ground up, and the one place it is
# written: the Makefile builds the library from the folders of the floors
# marked "lib" (scripts/layering.sh --folders), docs/architecture.md draws
# it. A file's floor is read off its folder; a folder holding C that no
# floor names fails the check, so a new folder is placed before it is used.
#
# Rooms of one floor do not use each other, with the ground floor's two
# stated arrows: a backend (src/backends/<name>/) uses core, and core's
# registry (src/core/backend.c, the one file that names the backends) takes
# each backend's table; the guarded test device wraps the CPU's kernels.
# Everything else reaches a backend through the table in src/core/backend.h.
#
# Three checks, so that nothing goes upward unseen:
#   - includes: every quoted #include (beside the file, then from the
#     repository root, then include/) resolves to the file's own room or a
#     lower floor; public headers (include/) include only public headers and
#     are open to every floor; above the library (tools and up) only public
#     headers and the floors above the library may be included: the
#     library's inside is closed to its users;
#   - symbols: every symbol a library object leaves undefined that another
#     library object defines is defined in the same room or a lower floor;
#   - cycles: no two files include each other, and no two library objects
#     of different rooms use each other's symbols (nor any longer loop):
#     within a room, objects are one unit.
# test/ is outside the plan: tests may reach into any floor.
#
# Usage: scripts/layering.sh [--root DIR] [--includes-only] BUILD_DIR [VARIANT_OBJ_DIR]
#        scripts/layering.sh --folders     the library's folders, ground floor first
#        scripts/layering.sh --rooms       every room: "rank kind folder", ground first
# BUILD_DIR holds the library's objects (a CUDA build's own objects, which
# stand beside or replace the plain ones, are in the second folder); --root
# checks the sources of another tree (test/layering_test.sh plants
# violations in a copy).
# There are no exceptions: a dependency the wrong way is a design error.
set -u

# rank  kind  folders (a trailing /* makes each subfolder a room)
FLOORS='
0 lib src/core src/backends/*
1 lib src/comm
2 lib src/op
3 lib primitives
4 lib layers/sequential
5 lib layers/distributed
6 lib train
7 lib pipeline
8 app tools
9 app bench examples bindings/*
'

folders() { # every floor's folders, globs expanded against the tree
    echo "$FLOORS" | awk -v want="$1" 'NF && (want == "" || $2 == want) {
        for (i = 3; i <= NF; i++) print $i }' | while read -r f; do
        case $f in
        */\*) for d in "${f%/\*}"/*/; do [ -d "$d" ] && echo "${d%/}"; done ;;
        *) echo "$f" ;;
        esac
    done
}

root=$(cd "$(dirname "$0")/.." && pwd)
includes_only=0
list=""
while [ $# -gt 0 ]; do
    case $1 in
    --root) root=$(realpath "${2:?--root needs a folder}") || exit 2; shift 2 ;;
    --includes-only) includes_only=1; shift ;;
    --folders | --rooms) list=$1; shift ;;
    -*) echo "layering: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
build=${1:-}
overlay=${2:-}
if [ $includes_only = 0 ] && [ -z "$list" ]; then
    [ -n "$build" ] || { echo "usage: layering.sh [--root DIR] [--includes-only] BUILD_DIR [VARIANT_OBJ_DIR]" >&2; exit 2; }
    build=$(realpath "$build") || exit 2
    [ -z "$overlay" ] || overlay=$(realpath "$overlay") || exit 2
fi
cd "$root" || exit 2

# path -> "rank kind room", the room being the deepest floor folder above it
ROOMS=$(for k in lib app; do
    echo "$FLOORS" | awk -v k=$k 'NF && $2 == k { for (i = 3; i <= NF; i++) print $1, $2, $i }' |
        while read -r r kind f; do
            case $f in
            */\*) for d in "${f%/\*}"/*/; do [ -d "$d" ] && echo "$r $kind ${d%/}"; done ;;
            *) echo "$r $kind $f" ;;
            esac
        done
done | awk '{ print length($3), $0 }' | sort -rn | cut -d' ' -f2-)
case $list in
--folders) folders lib; exit 0 ;;
--rooms) echo "$ROOMS" | sort -n -k1,1 -s; exit 0 ;;
esac
room_of() {
    case $1 in include/*) echo "-1 public include"; return ;; esac
    while read -r r kind f; do
        case $1 in "$f"/*) echo "$r $kind $f"; return ;; esac
    done <<<"$ROOMS"
}

# may room $3 (rank $1, kind $2) use room $6 (rank $4, kind $5)? $7: the using file
allowed() {
    [ "$3" = "$6" ] && return 0
    [ "$6" = include ] && return 0
    [ "$3" = include ] && return 1 # a public header includes only public headers
    if [ "$2" = app ] && [ "$5" = lib ]; then return 1; fi # above the library: the public API only
    if [ "$1" = "$4" ]; then # rooms of one floor: the ground floor's arrows only
        case $3:$6 in
        src/backends/*:src/core) return 0 ;;
        src/backends/guarded:src/backends/cpu) return 0 ;;
        src/core:src/backends/*) [ "${7%.o}" = src/core/backend ] && return 0 ;;
        esac
        return 1
    fi
    [ "$4" -lt "$1" ]
}
why() { # the reason a use of room $2 by room $1 is refused
    if [ "$1" = include ]; then echo "a public header includes only public headers"
    elif [ "$(room_of "$1/x" | cut -d' ' -f2)" = app ] && [ "$2" != include ]; then
        echo "above the library only the public API: $1 may not use $2"
    else echo "$1 may not use $2"; fi
}

violations=$(mktemp)
edges=$(mktemp)
trap 'rm -f "$violations" "$edges"' EXIT

# every C source outside test/ and the build folders must be on a floor
sources=$(find . -path ./.git -prune -o -path ./test -prune -o -path './build*' -prune -o \
    -path ./lib -prune -o -path ./bin -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cc' -o -name '*.cpp' \) \
    -print | sed 's#^\./##' | sort)
for f in $sources; do
    read -r r k s <<<"$(room_of "$f")"
    if [ -z "${s:-}" ]; then
        echo "floor $f: its folder is on no floor (add it to FLOORS in scripts/layering.sh)"
        continue
    fi
    grep -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$f" | sed 's/.*"\(.*\)"$/\1/' |
        while read -r inc; do
            if [ -f "$(dirname "$f")/$inc" ]; then
                target=$(realpath -m --relative-to=. "$(dirname "$f")/$inc")
            elif [ -f "$inc" ]; then
                target=$inc
            elif [ -f "include/$inc" ]; then
                target=include/$inc
            else
                continue # a system or generated header
            fi
            [ "$target" = "$f" ] && continue
            echo "$f $target" >>"$edges"
            read -r rt kt st <<<"$(room_of "$target")"
            [ -n "${st:-}" ] || continue # test/ and the like: outside the plan
            allowed "$r" "$k" "$s" "$rt" "$kt" "$st" "$f" ||
                echo "include $f -> $target ($(why "$s" "$st"))"
        done
    s=""
done >>"$violations"
# no two files include each other (nor any longer loop)
loop=$(tsort "$edges" 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //')
[ -z "$loop" ] || echo "cycle of includes: $(echo $loop)" >>"$violations"

nobj=0
if [ $includes_only = 0 ] && [ -z "$list" ]; then
    command -v nm >/dev/null || { echo "layering: nm (binutils) is needed" >&2; exit 2; }
    lib=$(cd "$root" && folders lib)
    objects=$( (for d in $lib; do [ -d "$build/$d" ] && (cd "$build" && ls "$d"/*.o 2>/dev/null); done
        if [ -n "$overlay" ]; then
            for d in $lib; do [ -d "$overlay/$d" ] && (cd "$overlay" && find "$d" -name '*.o'); done
        fi) | sort -u)
    if [ -z "$objects" ]; then
        echo "layering: no objects under $build (build the library first)" >&2
        exit 2
    fi
    nobj=$(echo "$objects" | wc -w)
    obj() { if [ -n "$overlay" ] && [ -f "$overlay/$1" ]; then echo "$overlay/$1"; else echo "$build/$1"; fi; }
    # symbol -> defining object
    defs=$(for o in $objects; do nm -g --defined-only "$(obj "$o")" | awk -v o="$o" 'NF==3{print $3, o}'; done | sort -k1,1)
    : >"$edges"
    for o in $objects; do
        read -r r k s <<<"$(room_of "$o")"
        nm -u "$(obj "$o")" | awk '{print $NF}' | sort -u | join - <(echo "$defs") |
            while read -r sym def; do
                [ "$def" = "$o" ] && continue
                read -r rt kt st <<<"$(room_of "$def")"
                # a room's objects are one unit (a backend's table and its
                # kernels use each other); loops between rooms are refused
                [ "$s" = "$st" ] || echo "${o%.o} ${def%.o}" >>"$edges"
                allowed "$r" "$k" "$s" "$rt" "$kt" "$st" "$o" ||
                    echo "symbol ${o%.o} -> ${def%.o} $sym ($(why "$s" "$st"))"
            done
    done >>"$violations"
    loop=$(sort -u "$edges" | tsort 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //')
    [ -z "$loop" ] || echo "cycle of objects using each other's symbols: $(echo $loop)" >>"$violations"
fi

unexpected=$(sort -u "$violations")
if [ -n "$unexpected" ]; then
    echo "layering: dependencies that go the wrong way:"
    echo "$unexpected" | sed 's/^/  /'
    exit 1
fi
echo "layering: ok ($(echo "$sources" | wc -w) sources$([ $includes_only = 1 ] || echo ", $nobj objects") on $(echo "$FLOORS" | awk 'NF' | wc -l) floors)"
