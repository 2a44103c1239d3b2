#!/usr/bin/env python3
"""
Fit the scaled complementary error function erfcx(z) = e^{z^2} erfc(z) for
the double GELU (src/backends/cpu/fastmath.h, ladle_normal_cdf_f64) and check
the fit as the kernel evaluates it, in double.

erfcx is smooth and bounded on z >= 0, but as a function of z a polynomial
fits it badly (it decays as 1 / (z sqrt(pi))). With t = 1 / (1 + z / 2) in
(0, 1] it is nearly linear near t = 0, and with u = A t + B mapping
[t(ZMAX), 1] onto [-1, 1] a least-squares Chebyshev fit of degree DEGREE in u
converges geometrically: degree 16 / 20 / 24 / 28 reach 2e-10 / 5e-13 /
1e-15 / 1e-17 relative. Past ZMAX = 27, e^{-z^2} is below the smallest
double and the product is 0 whatever erfcx is.

Needs mpmath (a development tool, not a dependency of ladle):
    python3 scripts/fit-erfcx.py [DEGREE]
prints the coefficients (highest power of u first), A and B, and the
worst relative error of the double evaluation over z in bands.
"""
import random
import sys

import mpmath as mp

mp.mp.dps = 50
ZMAX = 27


def usage(msg):
    print("fit-erfcx.py: %s; usage: fit-erfcx.py [DEGREE] (4..60, default 26)" % msg,
          file=sys.stderr)
    sys.exit(2)


if len(sys.argv) > 2:
    usage("one argument at most")
if len(sys.argv) == 2 and not (sys.argv[1].isdigit() and 4 <= int(sys.argv[1]) <= 60):
    usage("DEGREE %r is not a whole number in 4..60" % sys.argv[1])
DEGREE = int(sys.argv[1]) if len(sys.argv) > 1 else 26
ta, tb = 1 / (1 + mp.mpf(ZMAX) / 2), mp.mpf(1)


def erfcx_of_u(u):
    t = (u * (tb - ta) + (tb + ta)) / 2
    z = 2 / t - 2
    return mp.erfc(z) * mp.exp(z * z)


poly = mp.chebyfit(erfcx_of_u, [-1, 1], DEGREE + 1)
coef = [float(c) for c in poly]
A, B = float(2 / (tb - ta)), float(-(tb + ta) / (tb - ta))


def kernel(z):
    """erfcx(z) as the C code evaluates it, in double."""
    u = (1.0 / (1.0 + z * 0.5)) * A + B
    v = 0.0
    for c in coef:
        v = v * u + c
    return v


print("/* erfcx(z) = p(u), u = A / (1 + z / 2) + B: scripts/fit-erfcx.py %d */" % DEGREE)
print("A = %.17g, B = %.17g" % (A, B))
for c in coef:
    print("%.17g," % c)
random.seed(1)
for lo, hi in [(0, 1), (1, 3), (3, 6), (6, 12), (12, ZMAX)]:
    worst = 0
    for z in [lo + (hi - lo) * i / 3000 for i in range(3001)] + [
        random.uniform(lo, hi) for _ in range(3000)
    ]:
        ref = mp.erfc(mp.mpf(z)) * mp.exp(mp.mpf(z) ** 2)
        worst = max(worst, abs(mp.mpf(kernel(z)) / ref - 1))
    print("z in [%g, %g]: worst relative error %s" % (lo, hi, mp.nstr(worst, 3)))
