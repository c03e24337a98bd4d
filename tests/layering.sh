#!/usr/bin/env bash
# layering.sh: checks the house the code draws. Every quoted #include under the library and CLI
# folders must point to the file's own folder or to a folder below it in
#
#   loader -> model -> sim -> {backend, db} -> {verify, planner} -> cli
#
# (backend and db are siblings, as are verify and planner: neither of a pair includes the
# other). Ranks strictly fall along every include that leaves a folder, so the folder graph has
# no circles. tests/ and bench/ use everything and are not checked. scenarios/ holds data only.
# Usage: tests/layering.sh [ROOT]; exits 1 listing every violation.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

rank() {
    case $1 in
    loader) echo 0 ;; model) echo 1 ;; sim) echo 2 ;; backend | db) echo 3 ;;
    verify | planner) echo 4 ;; cli) echo 5 ;; *) echo -1 ;;
    esac
}

bad=0
files=0
for f in $(find loader model sim backend db verify planner cli -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort); do
    files=$((files + 1))
    from=${f%%/*}
    rf=$(rank "$from")
    dir=$(dirname "$f")
    # Quoted includes only: system headers (<...>) are not part of the house.
    while IFS=: read -r line inc; do
        [ -n "$inc" ] || continue
        target=$(realpath -m --relative-to=. "$dir/$inc")
        to=${target%%/*}
        if [ ! -e "$target" ]; then
            echo "$f:$line: includes \"$inc\", which does not exist ($target)"
            bad=$((bad + 1))
            continue
        fi
        [ "$to" = "$from" ] && continue
        rt=$(rank "$to")
        if [ "$rt" -lt 0 ]; then
            echo "$f:$line: includes \"$inc\" from $to/, which is outside the library folders"
            bad=$((bad + 1))
        elif [ "$rt" -ge "$rf" ]; then
            if [ "$rt" -eq "$rf" ]; then how="a sibling folder"; else how="a folder above it"; fi
            echo "$f:$line: $from/ includes $to/ (\"$inc\"): $how in loader -> model -> sim -> {backend, db} -> {verify, planner} -> cli"
            bad=$((bad + 1))
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p; t; s/.*//p' "$f" |
             awk '{ if ($0 != "") print NR ":" $0 }')
done

code=$(find scenarios -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) 2>/dev/null)
if [ -n "$code" ]; then
    echo "scenarios/ is shipped data only; it holds code: $code"
    bad=$((bad + 1))
fi

if [ "$files" -eq 0 ]; then echo "layering: no sources found under $root"; exit 2; fi
if [ "$bad" -ne 0 ]; then echo "layering: $bad violation(s) in $files files"; exit 1; fi
echo "layering: $files files, every include points down loader -> model -> sim -> {backend, db} -> {verify, planner} -> cli"
