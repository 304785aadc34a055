# Syscalls per event from two `strace -c` summaries of the same program, a short
# run and a long one (in that order), n = the difference of their event counts:
# prints the total per event, then by name those with at least 0.05 per event,
# e.g. "3.00 (read 1.00, write 1.00, io_uring_enter 1.00)". Setup counts in both
# runs alike, so it cancels out.
FNR == 1 { file++ }
$NF != "total" && $4 ~ /^[0-9]+$/ { c[$NF] += (file == 1 ? -$4 : $4) }
END {
    for (s in c)
        if (c[s] / n >= 0.05) {
            t += c[s]
            parts = parts sprintf("%s%s %.2f", parts == "" ? "" : ", ", s, c[s] / n)
        }
    printf "%.2f (%s)", t / n, parts
}
