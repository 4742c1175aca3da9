# shellcheck shell=bash
# tools/lib/bench.sh: helpers the tools/bench-*.sh scripts share. Sourced,
# never run: `. "$ROOT/tools/lib/bench.sh"`.

# require_int PROG FLAG VALUE LO HI: exit 2 with one error line unless VALUE
# is an integer in LO..HI.
require_int() {
    [[ $3 =~ ^[0-9]+$ && $3 -ge $4 && $3 -le $5 ]] ||
        { echo "$1: error: $2 takes an integer in $4..$5, got '$3'" >&2; exit 2; }
}

# ratio A B [DIGITS]: A / B to DIGITS decimals (default 2), n/a when B is
# not positive.
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b > 0) printf "%.*f", d, a / b; else print "n/a" }'; }

# median V...: the median of the numbers in the words of its arguments
# (so a space-separated list may come as one word); the mean of the middle
# two for an even count; empty for none.
median() {
    tr ' ' '\n' <<<"$*" | grep . | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# jnum V: V as a JSON number, null when it is not one (n/a, empty).
jnum() {
    if [[ $1 =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then printf '%s' "$1"; else printf null; fi
}

# jstr S: S as a JSON string (quotes and backslashes escaped).
jstr() {
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}
