"""The table of bench/compare.sh: per row the median of each side's launches,
new/old, and each side's spread (max - min) / median."""
import glob, os, re, statistics, sys
def parse(path):
    rows = {}; start = end = None; sect = 0
    for line in open(path):
        line = line.rstrip('\n')
        m = re.search(r'(ladle_ms|dist_ms|ms/step)', line)
        if m and not line.startswith('#'):
            start, end = m.start(), m.end(); sect += 1; continue
        if start is None or not line.strip() or line.startswith('#') or len(line) < end:
            continue
        key = '%d|%s' % (sect, line[:start].rstrip())
        try:
            rows[key] = float(line[start - 4:end + 1].split()[-1])
        except ValueError:
            pass
    return rows
for kind in ('layers', 'dist'):
    runs = {v: [parse(p) for p in sorted(glob.glob(os.path.join(sys.argv[1], '%s-%s-*.txt' % (v, kind))))] for v in ('old', 'new')}
    keys = [k for k in runs['old'][0] if all(k in r for v in runs for r in runs[v])]
    print('%-52s %9s %9s %6s %9s %9s' % (kind + ' row', 'old_ms', 'new_ms', 'new/old', 'old_sprd', 'new_sprd'))
    for k in keys:
        o = [r[k] for r in runs['old']]; n = [r[k] for r in runs['new']]
        mo, mn = statistics.median(o), statistics.median(n)
        so = (max(o) - min(o)) / mo if mo else 0; sn = (max(n) - min(n)) / mn if mn else 0
        print('%-52s %9.3f %9.3f %6.2f %8.0f%% %8.0f%%' % (k.split('|', 1)[1][:52], mo, mn, mn / mo if mo else 0, 100 * so, 100 * sn))
