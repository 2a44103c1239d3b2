#!/usr/bin/env bash
# The public API's habits, checked in the headers themselves (STYLE.md,
# "Comments and docs" and "Names"):
#
#   (a) every LADLE_API prototype's doc block says whether the call is
#       collective: a sentence that starts "Collective over ..." or
#       "Local." ("Local," and "Local;" too, for "Local; collective when
#       ..."). The doc block is the comment directly above the prototype
#       (consecutive comments count as one), or the comment above a group
#       of prototypes declared one after the other without a blank line;
#       a header's opening comment or a section's does not count;
#   (b) functions with more than 7 parameters;
#   (c) functions whose name ends in _ex;
#   (d) option structs named *_opts or *_options (the convention is
#       ladle_X_desc).
#
# (a) fails the check; (b), (c) and (d) are counted and listed, and fail it
# only with --strict (which make check and make api-lint pass: 0.2 has
# none). include/ladle/deprecated.h is skipped: what it declares is on its
# way out.
#
# Usage: scripts/api-lint.sh [--strict] [DIR]   DIR: the headers (include/)
#        scripts/api-lint.sh --list [DIR]      every prototype: file:line, name,
#                                              1 when its block states collectivity
set -u

strict=0
listing=0
dir=""
while [ $# -gt 0 ]; do
    case $1 in
    --strict) strict=1; shift ;;
    --list) listing=1; shift ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "api-lint: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "api-lint: one folder only" >&2; exit 2; }; dir=$1; shift ;;
    esac
done
if [ -z "$dir" ]; then
    dir=$(cd "$(dirname "$0")/.." && pwd)/include
    cd "$dir/.." || exit 2
    dir=include
fi
[ -d "$dir" ] || { echo "api-lint: $dir is not a folder" >&2; exit 2; }

headers=$(find "$dir" -name '*.h' ! -path '*/ladle/deprecated.h' | LC_ALL=C sort)
[ -n "$headers" ] || { echo "api-lint: no headers under $dir" >&2; exit 2; }

# one line per finding, "kind<TAB>file:line<TAB>text", and "proto<TAB>..." per prototype
# shellcheck disable=SC2086
findings=$(awk '
function flush_proto(   name, params, depth, i, c, n, empty, stated) {
    # proto: the declaration joined, from LADLE_API to its ";"
    name = proto
    sub(/\(.*/, "", name)
    sub(/.*[^A-Za-z0-9_]/, "", name)
    params = proto
    sub(/^[^(]*\(/, "", params)
    # the parameter list: up to the ")" that closes the first "("
    depth = 1; n = 0; empty = 1
    for (i = 1; i <= length(params); i++) {
        c = substr(params, i, 1)
        if (c == "(") depth++
        else if (c == ")") { if (--depth == 0) break }
        else if (c == "," && depth == 1) n++
        else if (c !~ /[ \t]/) empty = 0
    }
    params = substr(params, 1, i - 1)
    gsub(/^[ \t]+|[ \t]+$/, "", params)
    n = (empty || params == "void") ? 0 : n + 1
    stated = (doc != "" && stated_in(doc))
    printf "proto\t%s:%d\t%s\t%d\n", FILENAME, proto_line, name, stated
    if (!stated)
        printf "nodoc\t%s:%d\t%s\n", FILENAME, proto_line, name
    if (n > 7)
        printf "params\t%s:%d\t%s (%d parameters)\n", FILENAME, proto_line, name, n
    if (name ~ /_ex$/)
        printf "ex\t%s:%d\t%s\n", FILENAME, proto_line, name
}
function stated_in(text) {
    # a sentence (or a parenthesis) that starts with the statement
    return text ~ /(^[ \t]*|[.;:!?|][ \t]+|\([ \t]*)(Collective over |Local[.,;])/
}
FNR == 1 { in_comment = 0; in_proto = 0; doc = ""; block = ""; attached = 0; prev_comment = 0 }
{
    line = $0
    if (in_proto) {
        proto = proto " " line
        if (line ~ /;/) { in_proto = 0; flush_proto() }
        next
    }
    if (in_comment) {
        t = line
        if (line ~ /\*\//) sub(/\*\/.*/, "", t)
        sub(/^[ \t]*\*+[ \t]?/, "", t)
        # an empty line ends a paragraph, and so a sentence
        if (t ~ /^[ \t]*$/) t = "|"
        if (line ~ /\*\//) {
            block = block " " t
            in_comment = 0
            doc = block; attached = 1; prev_comment = 1
        } else block = block " " t
        next
    }
    if (line ~ /^[ \t]*\/\*/) {
        t = line
        sub(/^[ \t]*\/\*+[ \t]*/, "", t)
        # consecutive comments, with no blank line between, are one block
        if (!prev_comment) block = ""
        if (t ~ /\*\//) {
            sub(/\*\/.*/, "", t)
            block = block " " t
            doc = block; attached = 1; prev_comment = 1
        } else { block = block " " t; in_comment = 1 }
        next
    }
    prev_comment = 0
    if (line ~ /^[ \t]*LADLE_API[ \t]/) {
        if (!attached) doc = ""
        proto = line; proto_line = FNR
        sub(/^[ \t]*LADLE_API[ \t]+/, "", proto)
        if (line ~ /;/) flush_proto(); else in_proto = 1
        next # the block stays attached to the prototypes that follow it
    }
    if (line ~ /^[ \t]*(typedef[ \t]+)?struct[ \t]+[A-Za-z0-9_]*_(opts|options)[ \t]*(\{|$)/) {
        s = line
        sub(/^[ \t]*(typedef[ \t]+)?struct[ \t]+/, "", s)
        sub(/[^A-Za-z0-9_].*/, "", s)
        printf "opts\t%s:%d\t%s\n", FILENAME, FNR, s
    }
    # anything else (a blank line, a type, a macro) ends the group
    attached = 0; doc = ""
}
' $headers)

if [ $listing = 1 ]; then
    printf '%s\n' "$findings" | awk -F'\t' '$1 == "proto" { print $2, $3, $4 }'
    exit 0
fi

count() { printf '%s\n' "$findings" | awk -F'\t' -v k="$1" '$1 == k' | wc -l | tr -d ' '; }
list() { printf '%s\n' "$findings" | awk -F'\t' -v k="$1" '$1 == k { print "  " $2 ": " $3 }'; }

nproto=$(count proto)
nnodoc=$(count nodoc)
nparams=$(count params)
nex=$(count ex)
nopts=$(count opts)

if [ "$nnodoc" -gt 0 ]; then
    echo "api-lint: prototypes whose doc block does not say \"Collective over ...\" or \"Local.\":"
    list nodoc
fi
if [ "$nparams" -gt 0 ]; then
    echo "api-lint: functions with more than 7 parameters:"
    list params
fi
if [ "$nex" -gt 0 ]; then
    echo "api-lint: functions named *_ex:"
    list ex
fi
if [ "$nopts" -gt 0 ]; then
    echo "api-lint: option structs named *_opts or *_options (the convention is ladle_X_desc):"
    list opts
fi
echo "api-lint: collectivity stated on $((nproto - nnodoc)) of $nproto prototypes"
echo "api-lint: $nparams with more than 7 parameters, $nex named *_ex, $nopts option structs *_opts/*_options$([ $strict = 1 ] || echo " (fail only with --strict)")"
status=0
[ "$nnodoc" -eq 0 ] || status=1
if [ $strict = 1 ] && [ $((nparams + nex + nopts)) -gt 0 ]; then status=1; fi
[ $status = 0 ] && echo "api-lint: ok" || echo "api-lint: FAILED"
exit $status
