# Median of repeated bench_primitives and bench_layers runs: reads their
# rows, prints one row per (ranks, primitive, direction, payload) with the
# median ladle time, the median MPI time and the median of the per-run
# ratios, then one row per layer and shape with the median ladle time, the
# median reference time (GEMM or memcpy) and the median ratio, and one row
# per bench_gpt layout with the medians over launches, and one row per
# bench_pipe rank count and schedule: measured against simulated.
function median(list,    n, v, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
            t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
        }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
$1 ~ /^[0-9]+$/ && NF >= 9 {
    name = $9 (NF > 9 ? " " $10 : "")
    key = sprintf("%5d  %-15s %-8s %5s %-3s", $1, $2, $3, $4, $5) SUBSEP name
    if (!(key in seen)) { seen[key] = 1; order[++n] = key; call[key] = name }
    lt[key] = lt[key] " " $6; mt[key] = mt[key] " " $7; rt[key] = rt[key] " " $8
    runs[key]++
}
# bench_layers rows: "%-8s %-34s" then ladle_ms ref_ms ladle_rate ref_rate ratio
/^(linear|conv2d|maxpool|avgpool|gavgpool|batchnorm|relu|gelu|leaky|sigmoid|tanh|gelutanh|softmax|layernorm|rmsnorm|dropout|xent|attn|mlp|pack|unpack) / && NF >= 7 {
    lkey = substr($0, 1, 43)
    sub(/ +$/, "", lkey)
    if (!(lkey in lseen)) { lseen[lkey] = 1; lorder[++ln] = lkey }
    split(substr($0, 44), f, " ")
    ll[lkey] = ll[lkey] " " f[1]; lr[lkey] = lr[lkey] " " f[2]; lq[lkey] = lq[lkey] " " f[5]
    lruns[lkey]++
}
# bench_layers' direct-convolution rows: "%-10s %-26s" then widest_ms
# 32B_ms column_ms col/widest col/32B
/^convdirect / && NF >= 8 {
    ckey = substr($0, 12, 26)
    sub(/ +$/, "", ckey)
    if (!(ckey in cseen)) { cseen[ckey] = 1; corder[++cn] = ckey }
    split(substr($0, 38), f, " ")
    cw[ckey] = cw[ckey] " " f[1]; c32[ckey] = c32[ckey] " " f[2]; cc[ckey] = cc[ckey] " " f[3]
    cqw[ckey] = cqw[ckey] " " f[4]; cq32[ckey] = cq32[ckey] " " f[5]
    cruns[ckey]++
}
# bench_dist rows, keyed by the launch's rank count
/^# f32, [0-9]+ ranks, median/ { dranks = $3 }
/^(conv-halo|halo-ovl|dp-sync|vocab-loss|lenet) / {
    dkey = sprintf("%2d  %s", dranks, substr($0, 1, 45))
    sub(/ +$/, "", dkey)
    if (!(dkey in dseen)) { dseen[dkey] = 1; dorder[++dn] = dkey }
    split(substr($0, 46), f, " ")
    da[dkey] = da[dkey] " " f[1]; db[dkey] = db[dkey] " " f[2]; dc[dkey] = dc[dkey] " " f[3]
    dd[dkey] = f[4] (f[5] != "" ? " " f[5] " " f[6] : "")
    if ($1 == "conv-halo" && f[4] == "(exchange")
        dd[dkey] = "(exchange alone " f[6] " ms)"
    druns[dkey]++
}
# bench_gpt rows: a layout name of 16 columns, then ranks ms/step tokens/s
# vs-1-rank params-MiB other-MiB; and the pipeline's simulated speedup
/^(1 rank|data parallel|tensor parallel|pipeline 1F1B|pipe x TP 2) / && NF >= 7 {
    gkey = substr($0, 1, 16)
    sub(/ +$/, "", gkey)
    if (!(gkey in gseen)) { gseen[gkey] = 1; gorder[++gn] = gkey }
    split(substr($0, 17), f, " ")
    granks[gkey] = f[1]; gms[gkey] = gms[gkey] " " f[2]; gtok[gkey] = gtok[gkey] " " f[3]
    gvs[gkey] = gvs[gkey] " " f[4]; gmem[gkey] = f[6]
    gruns[gkey]++
}
/^# pipeline 1F1B: .* simulated/ { gsim = gsim " " $9 }
# bench_pipe rows, keyed by the launch's rank count: schedule ms/step
# images/s vs-1F1B bubble sim-ms sim-bubble sim/1F1B replay-ms replay-bubble
# [compute-only-sim-ms]
/^bench_pipe: [0-9]+ ranks/ { pranks = $2 }
# bench_pipe's planner: its plan's gain over 1F1B, modelled and measured
/^  the planner's plan against 1F1B: / && pranks != "" {
    if (!(pranks in plseen)) { plseen[pranks] = 1; plorder[++pln] = pranks }
    v = $0; sub(/.*1F1B: /, "", v); split(v, pv, /[x ,]+/)
    plmod[pranks] = plmod[pranks] " " pv[1]; plmeas[pranks] = plmeas[pranks] " " pv[3]
}
/^(gpipe|1f1b|zbh1|hybrid) / && NF >= 10 && pranks != "" {
    pkey = sprintf("%5d  %-8s", pranks, $1)
    if (!(pkey in pseen)) { pseen[pkey] = 1; porder[++pn] = pkey }
    pms[pkey] = pms[pkey] " " $2; psim[pkey] = psim[pkey] " " $6
    pmeas[pkey] = pmeas[pkey] " " $2 / $6; pvs[pkey] = pvs[pkey] " " $4
    psvs[pkey] = psvs[pkey] " " $8
    prep[pkey] = prep[pkey] " " $2 / $9
    pruns[pkey]++
}
END {
    if (gn) {
        printf "\n%-16s %5s %10s %10s %9s %10s %5s\n", "GPT step layout", "ranks", "ms/step",
            "tokens/s", "vs 1 rank", "other MiB", "runs"
        for (i = 1; i <= gn; i++) {
            k = gorder[i]
            printf "%-16s %5d %10.2f %10.0f %9.2f %10.2f %5d\n", k, granks[k], median(gms[k]),
                median(gtok[k]), median(gvs[k]), gmem[k], gruns[k]
        }
        if (gsim != "")
            printf "pipeline 1F1B simulated: %.2f x one rank (median)\n", median(gsim)
    }
    if (pn) {
        printf "\n%5s  %-8s %9s %9s %9s %9s %8s %8s %5s\n", "ranks", "schedule", "ms/step",
            "sim ms", "meas/sim", "meas/rep", "vs 1F1B", "sim vs", "runs"
        for (i = 1; i <= pn; i++) {
            k = porder[i]
            printf "%s %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f %5d\n", k, median(pms[k]),
                median(psim[k]), median(pmeas[k]), median(prep[k]), median(pvs[k]),
                median(psvs[k]), pruns[k]
        }
        for (i = 1; i <= pln; i++)
            printf "%5d  planner's plan over 1F1B: %.2fx modelled, %.2fx measured (medians)\n",
                plorder[i], median(plmod[plorder[i]]), median(plmeas[plorder[i]])
        printf "(pipeline schedules: medians over launches; meas/sim is each launch's measured\n"
        printf " step over its simulated one, meas/rep over the simulation with the run's own\n"
        printf " action times; vs 1F1B, measured and simulated, is the speed-up)\n"
    }
    if (n)
        printf "%5s  %-15s %-8s %9s %12s %12s %7s %5s   %s\n", "ranks", "primitive", "dir",
            "payload", "ladle_us", "mpi_us", "ratio", "runs", "raw MPI call"
    for (i = 1; i <= n; i++) {
        k = order[i]
        split(k, head, SUBSEP)
        printf "%s %12.1f %12.1f %7.2f %5d   %s\n", head[1], median(lt[k]), median(mt[k]),
            median(rt[k]), runs[k], call[k]
    }
    if (ln) {
        printf "\n%-43s %9s %9s %6s %5s   %s\n", "layer (fwd+bwd, f32, 1 thread)", "ladle_ms",
            "ref_ms", "ratio", "runs", "ref: GEMMs of the same flops, or memcpy of the same bytes"
        for (i = 1; i <= ln; i++) {
            k = lorder[i]
            printf "%-43s %9.3f %9.3f %6.2f %5d\n", k, median(ll[k]), median(lr[k]),
                median(lq[k]), lruns[k]
        }
    }
    if (cn) {
        printf "\n%-26s %9s %9s %9s %10s %8s %5s\n", "direct conv (fwd+bwd, f32)", "widest_ms",
            "32B_ms", "column_ms", "col/widest", "col/32B", "runs"
        for (i = 1; i <= cn; i++) {
            k = corder[i]
            printf "%-26s %9.3f %9.3f %9.3f %10.2f %8.2f %5d\n", k, median(cw[k]), median(c32[k]),
                median(cc[k]), median(cqw[k]), median(cq32[k]), cruns[k]
        }
    }
    if (dn) {
        printf "\n%2s  %-45s %9s %9s %7s %5s   %s\n", "n", "distributed row", "a", "b", "c",
            "runs", "(conv-halo/dp-sync/vocab-loss: dist_ms local_ms ratio; halo-ovl: overlapped_ms plain_ms ratio; lenet: ms/step images/s speedup)"
        for (i = 1; i <= dn; i++) {
            k = dorder[i]
            printf "%-49s %9.3f %9.3f %7.2f %5d   %s\n", k, median(da[k]), median(db[k]),
                median(dc[k]), druns[k], dd[k]
        }
    }
}
