/* The CPU backend's kernels against naive loops written here. These tests
 * are about the CPU itself: their tensors and buffers are on LADLE_CPU
 * whatever the suite's device, and are read directly. */
#include <math.h>
#include <string.h>

#include "src/core/backend.h"
#include "harness.h"

static const ladle_backend *cpu(void) { return ladle__backend(LADLE_CPU); }

/* Run a slot of the CPU backend, asserting it succeeds. */
#define K(slot, ...) LT_OK(cpu()->fn->slot(cpu(), __VA_ARGS__))

START_TEST(gemm_matches_naive_loops)
{
    const int64_t m = 7, n = 5, k = 9;
    double a[63], b[45], c[35], ref[35];
    float af[63], bf[45], cf[35];
    for (int i = 0; i < 63; i++)
        a[i] = af[i] = (float)((i * 37 % 17) - 8) / 4;
    for (int i = 0; i < 45; i++)
        b[i] = bf[i] = (float)((i * 11 % 13) - 6) / 2;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* A is m x k (stored k x m when transposed), B is k x n (n x k) */
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t q = 0; q < k; q++)
                        s += a[ta ? q * m + i : i * k + q] * b[tb ? j * k + q : q * n + j];
                    ref[i * n + j] = 2.0 * s + 0.5 * (double)(i - j);
                    c[i * n + j] = cf[i * n + j] = (float)(i - j);
                }
            K(gemm, LADLE_F64, ta, tb, m, n, k, 2.0, a, ta ? m : k, b, tb ? k : n, 0.5,
                        c, n);
            K(gemm, LADLE_F32, ta, tb, m, n, k, 2.0, af, ta ? m : k, bf, tb ? k : n,
                        0.5, cf, n);
            int ok = 1;
            for (int i = 0; i < 35; i++)
                ok &= fabs(c[i] - ref[i]) < 1e-12 && fabs(cf[i] - ref[i]) < 1e-4;
            LT_ASSERT(ok, "gemm trans_a=%d trans_b=%d", ta, tb);
        }
}
END_TEST

START_TEST(axpy_add_fill_copy)
{
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {1, 1, 1, 1, 1}, z[5];
    K(axpy, LADLE_F64, 5, -2.0, x, y);
    K(add, LADLE_F64, 5, x, y, z);
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= y[i] == 1 - 2 * (i + 1) && z[i] == 1 - (i + 1);
    LT_ASSERT(ok, "axpy then add");
    float f[4];
    K(fill, LADLE_F32, 4, 0.25, f);
    K(copy, LADLE_F32, 2, f, f + 1); /* overlapping: memmove semantics */
    LT_ASSERT(f[0] == 0.25f && f[3] == 0.25f, "fill and copy");
}
END_TEST

/* Dot2 carries rounding errors: 1e16 + 1 - 1e16 is 1, not 0. */
START_TEST(compensated_dot)
{
    double x[3] = {1e16, 1.0, -1e16}, ones[3] = {1, 1, 1}, pair[2];
    K(dot2, LADLE_F64, 3, x, ones, pair);
    LT_ASSERT(pair[0] + pair[1] == 1.0, "dot2 = %g + %g", pair[0], pair[1]);
    double d = 0.0;
    LT_OK(ladle__be_dot(cpu(), LADLE_F64, 3, x, ones, &d));
    LT_ASSERT(d == 1.0, "dot");
    float a[3] = {3, 4, 5}, b[3] = {1, 2, 3};
    LT_OK(ladle__be_dot(cpu(), LADLE_F32, 3, a, b, &d));
    LT_ASSERT(d == 26.0, "f32 accumulates in double");
}
END_TEST

/* copy_box, pack and unpack against index arithmetic written here. */
START_TEST(boxes)
{
    /* a 4x6x5 tensor; the box [1,3) x [2,5) x [0,4) */
    double t[120], packed[24], back[120] = {0};
    for (int i = 0; i < 120; i++)
        t[i] = i;
    int64_t ext[3] = {2, 3, 4}, str[3] = {30, 5, 1}, off = 1 * 30 + 2 * 5 + 0;
    K(pack, LADLE_F64, 3, ext, t + off, str, packed);
    int ok = 1, e = 0;
    for (int i = 1; i < 3; i++)
        for (int j = 2; j < 5; j++)
            for (int k = 0; k < 4; k++)
                ok &= packed[e++] == i * 30 + j * 5 + k;
    LT_ASSERT(ok, "pack");
    K(unpack, LADLE_F64, LADLE_BOX_COPY, 3, ext, packed, back + off, str);
    K(unpack, LADLE_F64, LADLE_BOX_ADD, 3, ext, packed, back + off, str);
    for (int i = 0; i < 120; i++) {
        int inside =
            i / 30 >= 1 && i / 30 < 3 && i % 30 / 5 >= 2 && i % 30 / 5 < 5 && i % 5 < 4;
        ok &= back[i] == (inside ? 2.0 * i : 0.0);
    }
    LT_ASSERT(ok, "unpack, then unpack adding");
    K(copy_box, LADLE_F64, LADLE_BOX_ZERO, 3, ext, NULL, str, back + off, str);
    for (int i = 0; i < 120; i++)
        ok &= back[i] == 0.0;
    LT_ASSERT(ok, "zero a box");
    /* a strided-to-strided copy: every other column of a 3x4 into a 3x2 */
    float src[12], dst[6];
    for (int i = 0; i < 12; i++)
        src[i] = (float)i;
    int64_t e2[2] = {3, 2}, s2[2] = {4, 2}, d2[2] = {2, 1};
    K(copy_box, LADLE_F32, LADLE_BOX_COPY, 2, e2, src + 1, s2, dst, d2);
    static const float want[6] = {1, 3, 5, 7, 9, 11};
    for (int i = 0; i < 6; i++)
        ok &= dst[i] == want[i];
    LT_ASSERT(ok, "strided copy");
}
END_TEST

/* copy_box on random boxes of random tensors (1 to 5 dimensions, extents
 * of 1 among them, parents as wide as the box or wider, innermost steps of
 * 1 or 2: dimensions that merge and dimensions that do not), in every
 * mode, against index arithmetic written here; every element of the
 * destination's parent is checked, inside the box and out. */
START_TEST(random_boxes)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;
#define PICK(lo, hi)                                                                       \
    (rng = rng * 6364136223846793005ull + 1442695040888963407ull,                          \
     (int64_t)(lo) + (int64_t)((rng >> 33) % (uint64_t)((hi) - (lo) + 1)))
    static double sd[4096], dd[4096], want[4096];
    static float sf[4096], df[4096];
    int ok = 1, merged = 0, kept = 0;
    for (int trial = 0; trial < 400 && ok; trial++) {
        int nd = (int)PICK(1, 5);
        ladle_dtype dt = trial % 2 ? LADLE_F32 : LADLE_F64;
        ladle_box_mode mode = (ladle_box_mode)(trial % 3 == 0   ? LADLE_BOX_COPY
                                               : trial % 3 == 1 ? LADLE_BOX_ADD
                                                                : LADLE_BOX_ZERO);
        int64_t ext[5], ps[5], pd[5], os[5], od[5], ss[5], ds[5];
        for (int d = 0; d < nd; d++) {
            ext[d] = PICK(1, 5);
            ps[d] = ext[d] + (PICK(0, 2) == 0 ? PICK(1, 2) : 0);
            pd[d] = ext[d] + (PICK(0, 2) == 0 ? PICK(1, 2) : 0);
            os[d] = PICK(0, ps[d] - ext[d]);
            od[d] = PICK(0, pd[d] - ext[d]);
        }
        /* strides of the parents, the innermost stepping 1 or 2 */
        int64_t stp_s = PICK(0, 3) == 0 ? 2 : 1, stp_d = PICK(0, 3) == 0 ? 2 : 1;
        int64_t ns = stp_s, nds = stp_d;
        for (int d = nd - 1; d >= 0; d--) {
            ss[d] = ns, ds[d] = nds;
            ns *= ps[d], nds *= pd[d];
        }
        if (ns > 4096 || nds > 4096)
            continue;
        int64_t so = 0, dof = 0, nbox = 1, flat = 1;
        for (int d = 0; d < nd; d++) {
            so += os[d] * ss[d], dof += od[d] * ds[d], nbox *= ext[d];
            flat &= d == 0 || (ps[d] == ext[d] && pd[d] == ext[d]);
        }
        merged += flat && nd > 1, kept += !flat;
        for (int64_t i = 0; i < nds; i++)
            dd[i] = want[i] = (double)(-1 - i), df[i] = (float)dd[i];
        for (int64_t i = 0; i < ns; i++)
            sd[i] = (double)(i + 1), sf[i] = (float)sd[i];
        for (int64_t b = 0; b < nbox; b++) { /* box element b, row-major */
            int64_t r = b, at_s = so, at_d = dof;
            for (int d = nd - 1; d >= 0; d--) {
                at_s += (r % ext[d]) * ss[d], at_d += (r % ext[d]) * ds[d];
                r /= ext[d];
            }
            want[at_d] = mode == LADLE_BOX_ZERO  ? 0.0
                         : mode == LADLE_BOX_ADD ? want[at_d] + sd[at_s]
                                                 : sd[at_s];
        }
        if (dt == LADLE_F64)
            K(copy_box, dt, mode, nd, ext, mode == LADLE_BOX_ZERO ? NULL : sd + so, ss,
              dd + dof, ds);
        else
            K(copy_box, dt, mode, nd, ext, mode == LADLE_BOX_ZERO ? NULL : sf + so, ss,
              df + dof, ds);
        for (int64_t i = 0; i < nds; i++)
            ok &= (dt == LADLE_F64 ? dd[i] : (double)df[i]) == want[i];
        LT_ASSERT(ok, "trial %d: %dd box, mode %d, %s", trial, nd, (int)mode,
                  ladle_dtype_name(dt));
    }
#undef PICK
    LT_ASSERT(merged > 10 && kept > 10, "boxes that merge whole %d, that do not %d", merged,
              kept);
}
END_TEST

START_TEST(planned_memory_is_zeroed_and_distinct)
{
    char *a = NULL, *b = NULL;
    K(alloc, 1 << 20, (void **)&a);
    K(alloc, 1 << 20, (void **)&b);
    int ok = a != NULL && b != NULL && ((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0;
    for (int i = 0; ok && i < (1 << 20); i += 4096)
        ok = a[i] == 0 && b[i] == 0;
    LT_ASSERT(ok, "zeroed, 64-byte aligned");
    K(free, a);
    K(free, b);
    K(free, NULL);
    void *none = &none;
    K(alloc, 0, &none);
    LT_ASSERT(none == NULL, "0 bytes give NULL");
    LT_ASSERT(ladle__backend(LADLE_CUDA) == NULL, "no CUDA backend in this build");
}
END_TEST

/* The copies between host and device (the same memory here), the ordering
 * slots and the optional ones through their helpers. */
START_TEST(host_copies_and_order)
{
    double h[4] = {1, 2, 3, 4}, back[4] = {0};
    void *dev = NULL, *ev = &ev;
    K(alloc, sizeof h, &dev);
    K(to_device, sizeof h, h, dev);
    K(to_host, sizeof h, dev, back);
    LT_OK(cpu()->fn->synchronize(cpu()));
    LT_ASSERT(back[0] == 1 && back[3] == 4, "a round trip keeps the values");
    LT_OK(ladle__be_event_create(cpu(), &ev));
    LT_OK(ladle__be_event_record(cpu(), ev));
    LT_OK(ladle__be_event_wait(cpu(), ev));
    LT_OK(ladle__be_event_sync(cpu(), ev));
    LT_OK(ladle__be_event_destroy(cpu(), ev));
    void *pinned = NULL;
    LT_OK(ladle__be_host_alloc(cpu(), 100, &pinned));
    LT_ASSERT(pinned != NULL && ((char *)pinned)[99] == 0, "host memory, zeroed");
    LT_OK(ladle__be_host_free(cpu(), pinned));
    K(free, dev);
    LT_ASSERT(cpu()->fn->version == LADLE_BACKEND_VERSION && cpu()->host_access,
              "the table's revision; CPU memory is host memory");
}
END_TEST

/* Random fills give element i (row-major) the generator's value i, strided
 * or not. */
START_TEST(random_fill_follows_the_counter)
{
    double x[12] = {0};
    int64_t shape[2] = {3, 2}, str[2] = {4, 2};
    K(fill_random, LADLE_F64, 2, shape, str, 7, 3, x);
    int ok = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ok &= x[i * 4 + j] ==
                  (j % 2 == 0 ? ladle__random_uniform(7, 3, (uint64_t)(i * 2 + j / 2)) : 0.0);
    LT_ASSERT(ok, "strided random fill");
}
END_TEST

/* What the BLAS cannot take is refused, not wrapped. */
START_TEST(gemm_refuses_sizes_past_int)
{
    double a = 1, b = 1, c = 0;
    LT_FAILS(cpu()->fn->gemm(cpu(), LADLE_F64, 0, 0, (int64_t)1 << 31, 1, 1, 1.0, &a, 1, &b, 1,
                             0.0, &c, 1),
             LADLE_ERR_ARG);
    LT_ASSERT(c == 0, "nothing was written");
}
END_TEST

/* Tensors are created on a device and read and written through it. */
START_TEST(tensors_on_a_device)
{
    ladle_tensor *t = NULL;
    int64_t shape[2] = {2, 3};
    LT_FAILS(ladle_tensor_create(LADLE_F32, LADLE_CUDA, 2, shape, &t), LADLE_ERR_DEVICE);
    LT_ASSERT(t == NULL, "no tensor on a device ladle was built without");
    LT_OK(ladle_tensor_create(LADLE_F32, LADLE_CPU, 2, shape, &t));
    float in[6] = {1, 2, 3, 4, 5, 6}, out[6] = {0};
    LT_OK(ladle_tensor_write(t, in));
    LT_OK(ladle_tensor_read(t, out));
    LT_ASSERT(out[0] == 1 && out[5] == 6 && ((float *)ladle_tensor_data(t))[4] == 5,
              "written and read back");
    LT_FAILS(ladle_tensor_read(t, NULL), LADLE_ERR_NULL);
    ladle_tensor *w = NULL;
    float mem[12];
    int64_t str[2] = {6, 2};
    LT_OK(ladle_tensor_wrap(LADLE_F32, LADLE_CPU, 2, shape, str, mem, &w));
    LT_FAILS(ladle_tensor_read(w, out), LADLE_ERR_UNSUPPORTED);
    LT_OK(ladle_tensor_fill(w, 2.5));
    LT_ASSERT(mem[0] == 2.5f && mem[4] == 2.5f && mem[10] == 2.5f, "a strided fill");
    LT_OK(ladle_tensor_copy(t, w));
    LT_OK(ladle_tensor_read(t, out));
    LT_ASSERT(out[0] == 2.5f && out[5] == 2.5f, "a strided copy");
    ladle_tensor_destroy(&w);
    ladle_tensor_destroy(&t);
}
END_TEST

/* lse_rows and exp_rows (the vocabulary-parallel loss's) against loops with
 * the C library's exp, over rows of lengths around the vector loops' 32
 * lanes, both dtypes; rows with a NaN, a +inf, all -inf; exponentials
 * below the dtype's range; y over x. */
START_TEST(row_statistics)
{
    enum { R = 10, L = 70 };
    static const int64_t lens[] = {0, 1, 5, 31, 32, 33, 70};
    uint64_t u = 12345;
    for (int f64 = 0; f64 < 2; f64++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            int64_t len = lens[li];
            ladle_dtype dt = f64 ? LADLE_F64 : LADLE_F32;
            double xv[R * L], lse[R], want[R], shift[R], scale[R], y[R * L];
            float xf[R * L], yf[R * L];
            for (int64_t i = 0; i < R * len; i++) {
                u = u * 6364136223846793005u + 1442695040888963407u;
                double r = (double)(u >> 11) / 9007199254740992.0; /* [0, 1) */
                xv[i] = (r - 0.5) * (i % 7 == 0 ? 200 : 20);
                xf[i] = (float)xv[i];
                if (!f64)
                    xv[i] = xf[i];
            }
            if (len > 0) { /* row 1 a NaN, row 2 a +inf, row 3 all -inf, row 4 one -inf */
                xv[1 * len + len / 2] = NAN;
                xv[2 * len + len - 1] = INFINITY;
                for (int64_t c = 0; c < len; c++)
                    xv[3 * len + c] = -INFINITY;
                xv[4 * len] = -INFINITY;
                for (int64_t i = 0; i < R * len; i++)
                    xf[i] = (float)xv[i];
            }
            for (int r = 0; r < R; r++) {
                const double *x = xv + r * len;
                double mx = -INFINITY, sum = 0;
                int nan = 0;
                for (int64_t c = 0; c < len; c++)
                    nan |= isnan(x[c]), mx = fmax(mx, x[c]);
                for (int64_t c = 0; c < len; c++)
                    sum += exp(x[c] - mx);
                want[r] = nan || mx == INFINITY ? NAN
                          : mx == -INFINITY     ? mx
                                                : mx + log(sum);
            }
            K(lse_rows, dt, R, len, f64 ? (void *)xv : (void *)xf, lse);
            double worst = 0;
            int ok = 1;
            for (int r = 0; r < R; r++) {
                if (isnan(want[r]) || isinf(want[r]))
                    ok &= isnan(want[r]) ? isnan(lse[r]) : lse[r] == want[r];
                else
                    worst = fmax(worst, fabs(lse[r] - want[r]) / fmax(1, fabs(want[r])));
                /* the shifts: the row's lse, or 3 below it (arguments up to 3) */
                shift[r] = isfinite(want[r]) ? want[r] - (r % 2 ? 3 : 0) : 0;
                scale[r] = 0.5 + r;
            }
            LT_ASSERT(ok && worst < (f64 ? 1e-15 : 1e-6),
                      "lse_rows %s, length %lld: specials %s, worst %.2e",
                      ladle_dtype_name(dt), (long long)len, ok ? "right" : "wrong", worst);
            for (int inplace = 0; inplace < 2; inplace++) {
                float xs[R * L];
                memcpy(xs, xf, sizeof xs);
                double xd[R * L];
                memcpy(xd, xv, sizeof xd);
                void *out = inplace ? (f64 ? (void *)xd : (void *)xs)
                                    : (f64 ? (void *)y : (void *)yf);
                K(exp_rows, dt, R, len, f64 ? (void *)xd : (void *)xs, shift, scale, out);
                worst = 0, ok = 1;
                for (int r = 0; r < R; r++)
                    for (int64_t c = 0; c < len; c++) {
                        int64_t i = r * len + c;
                        double a = xv[i] - shift[r],
                               got = f64 ? ((double *)out)[i] : ((float *)out)[i];
                        double ref = scale[r] * exp(a);
                        if (isnan(a) || a > 80)
                            continue; /* no promise there */
                        if (a < (f64 ? -708.39 : -87.0))
                            ok &= got == 0;
                        else if (a < (f64 ? -700 : -80)) /* near the range's end */
                            ok &= fabs(got - ref) <= 2e-6 * ref + (f64 ? 0 : 1e-37);
                        else
                            worst = fmax(worst, fabs(got - ref) / ref);
                    }
                LT_ASSERT(ok && worst < (f64 ? 1e-15 : 1e-6),
                          "exp_rows %s, length %lld%s: specials %s, worst %.2e",
                          ladle_dtype_name(dt), (long long)len, inplace ? " in place" : "",
                          ok ? "right" : "wrong", worst);
            }
        }
}
END_TEST

/* The guarded test device: host memory that nothing but its slots may
 * touch. Every tensor call works on it through the backend, and its answers
 * are the CPU's. (Under make asan a direct access is caught: see the
 * canary's device mode.) */
START_TEST(the_guarded_device)
{
    const ladle_backend *g = ladle__backend(LADLE_GUARDED);
    LT_ASSERT(g != NULL && !g->host_access && !g->mpi_access, "a device without host access");
    ladle_tensor *t = NULL, *c = NULL, *s = NULL;
    int64_t shape[2] = {3, 5}, n = 15;
    LT_OK(ladle_tensor_create(LADLE_F64, LADLE_GUARDED, 2, shape, &t));
    LT_OK(ladle_tensor_create(LADLE_F64, LADLE_CPU, 2, shape, &c));
    LT_ASSERT(ladle_tensor_device(t) == LADLE_GUARDED, "on the device it was made on");
    double in[15], out[15] = {0}, ref[15];
    for (int i = 0; i < n; i++)
        in[i] = 0.25 * i - 1;
    LT_OK(ladle_tensor_write(t, in));
    LT_OK(ladle_tensor_read(t, out));
    LT_ASSERT(memcmp(in, out, sizeof in) == 0, "written and read back");
    /* the same random values as on the CPU, element for element */
    LT_OK(ladle_tensor_fill_random(t, 7, 3));
    LT_OK(ladle_tensor_fill_random(c, 7, 3));
    LT_OK(ladle_tensor_read(t, out));
    LT_OK(ladle_tensor_read(c, ref));
    LT_ASSERT(memcmp(out, ref, sizeof out) == 0, "random fills agree with the CPU's");
    double dg = 0, dc = 0;
    LT_OK(ladle_tensor_dot(t, t, &dg));
    LT_OK(ladle_tensor_dot(c, c, &dc));
    LT_ASSERT(dg == dc && dg > 0, "dot %g on the device, %g on the CPU", dg, dc);
    /* copies across devices, and a strided view of device memory */
    LT_OK(ladle_tensor_fill(c, 0.0));
    LT_OK(ladle_tensor_copy(c, t));
    LT_OK(ladle_tensor_read(c, out));
    LT_ASSERT(memcmp(out, ref, sizeof out) == 0, "device to CPU");
    int64_t sub[2] = {3, 2}, str[2] = {5, 2};
    LT_OK(ladle_tensor_wrap(LADLE_F64, LADLE_GUARDED, 2, sub, str, ladle_tensor_data(t), &s));
    LT_OK(ladle_tensor_fill(s, 9.0));
    LT_OK(ladle_tensor_read(t, out));
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= out[i] == (i % 5 == 0 || i % 5 == 2 ? 9.0 : ref[i]);
    LT_ASSERT(ok, "a strided fill on the device touches its box only");
    LT_OK(ladle_tensor_write(c, in));
    LT_OK(ladle_tensor_copy(t, c));
    LT_OK(ladle_tensor_read(t, out));
    LT_ASSERT(memcmp(in, out, sizeof in) == 0, "CPU to device");
    LT_DESTROY(&s, &c, &t);
}
END_TEST

LT_SUITE("backend", "cpu", LT_CHECK_TIMEOUT, gemm_matches_naive_loops, axpy_add_fill_copy,
         compensated_dot, boxes, random_boxes, planned_memory_is_zeroed_and_distinct,
         host_copies_and_order, random_fill_follows_the_counter,
         gemm_refuses_sizes_past_int, tensors_on_a_device, the_guarded_device,
         row_statistics)
