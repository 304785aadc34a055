# Statistics over benchmark rounds, shared by bench/host-measures.sh and
# bench/device-measures.sh; sourced with tmp (a scratch directory) set. A failed
# run's line is "-": left out, and so is a round's ratio with one in it. median: of the first column on standard input ("-"
# when nothing is left); ratios FILE FILE2: min / median / max of the per-round ratio
# of FILE's first column to FILE2's.
median() { awk '$1 != "-" { print $1 }' | sort -g | awk '{ v[NR] = $1 }
    END { if (!NR) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratios() {
    paste "$1" "$2" | awk -v n="$(awk 'END { print NF }' "$1")" \
        '$1 != "-" && $(n + 1) != "-" && $(n + 1) > 0 { printf "%.2f\n", $1 / $(n + 1) }' | sort -g >"$tmp/r"
    [ -s "$tmp/r" ] || { echo "-"; return; }
    echo "$(head -n 1 "$tmp/r") / $(median <"$tmp/r" | awk '{ printf "%.2f", $1 }') / $(tail -n 1 "$tmp/r")"
}
