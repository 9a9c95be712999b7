# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# What the documentation generators share (sourced by gen-config-doc.sh
# and gen-mca-doc.sh): print what gen prints, or put it between a file's
# markers, or check that it is there.
# usage: gen_doc_run TOOL MODE FILE MARKER WHAT
#   TOOL    the generator's name, for messages ("gen-config-doc")
#   MODE    print, update or check
#   MARKER  the markers' name: <!-- MARKER:begin ... --> and <!-- MARKER:end -->,
#           each at the start of a line, after spaces
#   WHAT    what the part between them is, for the message when it is out of date
# The caller defines gen(), which prints the generated part.
gen_doc_run() {
    local tool=$1 mode=$2 file=$3 marker=$4 what=$5 new
    case $mode in
    print) gen; return ;;
    esac
    local begin="^ *<!-- $marker:begin" end="^ *<!-- $marker:end -->"
    grep -q "$begin" "$file" || { echo "$tool: no '<!-- $marker:begin' marker in $file" >&2; exit 1; }
    grep -q "$end" "$file" || { echo "$tool: no '<!-- $marker:end -->' marker in $file" >&2; exit 1; }
    new=$(mktemp)
    { sed "/$begin/q" "$file"
      gen
      sed -n "/$end/,\$p" "$file"; } > "$new"
    if [ "$mode" = update ]; then
        cp "$new" "$file"
    elif ! cmp -s "$new" "$file"; then
        echo "$tool: $what in $file is out of date:" >&2
        diff -u "$file" "$new" | head -40 >&2
        echo "run: contrib/$tool.sh --update $file" >&2
        rm -f "$new"
        exit 1
    fi
    rm -f "$new"
}
