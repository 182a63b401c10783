/*
 * check_wgmma.c — the sm_90a GEMM mainloop (GemmSpec.mainloop =
 * CG_MAINLOOP_WGMMA): its checks and diagnostics (sm_80 and sm_90 refuse
 * it, no abort), its geometry (block, grid and shared memory equal the
 * mma.sync kernel's, so one launch plan serves both), PTX for sm_90a
 * assembled by ptxas (wgmma present, registers, no spills, no serialised
 * wgmma), and kernels run on the CPU emulator, whose wgmma follows the PTX
 * ISA's descriptor layouts, against a host reference in double on random
 * inputs with NaN-poisoned outputs: dense with bias+GELU and ragged M,
 * every warpgroup split, bk 64 and 128, both pipelines, B [K,N] (N-major),
 * f16, f32 inputs, grouped with empty experts + gather + SwiGLU, routing
 * weights through the scattered store, persistent schedules.  Where both
 * mainloops run the same case, the outputs must agree bit for bit (the
 * emulator accumulates both k16 step by k16 step).  Last, the emulator's
 * own hazard checks, through cg_emit_wgmma_probe.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* ---- random data ---- */

static uint64_t rng_state;

static double
urand(void)		/* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

static size_t esz(DType dt) { return dt == DT_F32 ? 4 : 2; }

static void *
rand_tensor(DType dt, size_t n, double scale)
{
	void *p = calloc(n ? n : 1, esz(dt));

	for (size_t i = 0; i < n; i++)
		dtype_store(dt, p, i, urand() * scale);
	return p;
}

static void
shuffle(int *v, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)((urand() + 1) / 2 * (i + 1)) % (i + 1), t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static double ld(DType dt, const void *p, size_t i) { return dtype_load(dt, p, i); }

/* ---- a case: inputs, the emulator run, the reference ---- */

typedef struct Case Case;
struct Case {
	GemmSpec s;
	int T;
	int counts[64];		/* grouped: rows per expert (sum = M) */
};

typedef struct Run Run;
struct Run {
	double err;		/* relative L2 against the double reference */
	void *C;		/* the output (malloc'd) */
	size_t cbytes;
	char msg[600];
};

/* Inputs from rng seed 12345, so two runs of one case see the same data. */
static int
run_case(const Case *c, Run *out)
{
	GemmSpec s = c->s;
	Diag d;
	CgTarget t = {"emu", NULL, 3};
	CgModule *m;
	const CgKernel *k;
	int E = s.groups > 0 ? s.groups : 1, M = s.m_per_t * c->T, sw = -1;
	int div = s.gather ? (s.gather_div > 0 ? s.gather_div : 1) : 1;
	int msrc = s.gather ? (M + div - 1) / div : M;
	int64_t lda, ldb, ldc, bstride, width, rows_b;
	int *gidx = NULL, *sidx = NULL, *offs = NULL;
	void *A, *B, *C, *leaf[CG_EP_MAX] = {0};
	size_t leafn[CG_EP_MAX] = {0}, cbytes;
	uint64_t args[8 + CG_EP_MAX];
	CgEmuBuf buf[8 + CG_EP_MAX];
	int na = 0, nb = 0, rc = -1;
	double err2 = 0, ref2 = 0;

	rng_state = 12345;
	diag_init(&d, NULL);
	memset(out, 0, sizeof *out);
	for (int i = 0; i < s.ep.n; i++)
		if (s.ep.in[i].op == CGE_SWIGLU)
			sw = i;
	width = sw >= 0 ? s.N / 2 : s.N;
	lda = s.lda ? s.lda : s.K;
	ldb = s.ldb ? s.ldb : (s.b_layout == CG_B_NK ? s.K : s.N);
	ldc = s.ldc ? s.ldc : width;
	rows_b = s.b_layout == CG_B_NK ? s.N : s.K;
	bstride = s.b_group_stride ? s.b_group_stride : s.N * s.K;

	m = cg_module_new(&t, "case", &d);
	if (!m || cg_emit_gemm(m, "g", &s, &d) < 0) {
		snprintf(out->msg, sizeof out->msg, "emit: %s", d.last);
		cg_module_free(m);
		return -1;
	}
	k = cg_module_find(m, "g");

	A = rand_tensor(s.a_dt, (size_t)msrc * lda, 1.0);
	B = rand_tensor(s.b_dt, (size_t)((E - 1) * bstride + rows_b * ldb), 1.0 / sqrt((double)s.K));
	cbytes = (size_t)M * ldc * esz(s.c_dt);
	C = malloc(cbytes ? cbytes : 1);
	memset(C, 0xff, cbytes);	/* NaN */
	if (s.gather) {
		gidx = malloc(sizeof(int) * (size_t)(M ? M : 1));
		for (int i = 0; i < M; i++)
			gidx[i] = i;
		shuffle(gidx, M);
	}
	if (s.store == CG_STORE_SCATTER) {
		sidx = malloc(sizeof(int) * (size_t)(M ? M : 1));
		for (int i = 0; i < M; i++)
			sidx[i] = i;
		shuffle(sidx, M);
	}
	if (s.groups > 0) {
		offs = calloc((size_t)E + 1, sizeof(int));
		for (int e = 0; e < E; e++)
			offs[e + 1] = offs[e] + c->counts[e];
		if (offs[E] != M) {
			snprintf(out->msg, sizeof out->msg, "counts sum to %d, not M = %d", offs[E], M);
			goto done;
		}
	}
	for (int i = 0; i < s.ep.n; i++) {
		const CgEpInst *in = &s.ep.in[i];
		size_t n = 0;
		int64_t space = sw >= 0 && i > sw ? width : s.N;
		if (in->op == CGE_COL)
			n = (size_t)(in->group_stride ? (E - 1) * in->group_stride + space : space);
		else if (in->op == CGE_ROW)
			n = (size_t)(in->rows == CGR_GATHER ? msrc : M);
		else if (in->op == CGE_MAT)
			n = (size_t)(in->rows == CGR_GATHER ? msrc : M) * (size_t)(in->ld ? in->ld : space);
		if (n) {
			leaf[i] = rand_tensor(in->dt, n, 1.0);
			leafn[i] = n * esz(in->dt);
		}
	}

#define ARG(p, bytes) (buf[nb++] = (CgEmuBuf){(p), (bytes)}, args[na++] = (uint64_t)(uintptr_t)(p))
	ARG(A, (size_t)msrc * lda * esz(s.a_dt));
	if (s.gather)
		ARG(gidx, sizeof(int) * (size_t)M);
	ARG(B, (size_t)((E - 1) * bstride + rows_b * ldb) * esz(s.b_dt));
	ARG(C, cbytes);
	if (sidx)
		ARG(sidx, sizeof(int) * (size_t)M);
	if (offs)
		ARG(offs, sizeof(int) * (size_t)(E + 1));
	for (int i = 0; i < s.ep.n; i++)
		if (leaf[i])
			ARG(leaf[i], leafn[i]);
	args[na++] = (uint64_t)c->T;
#undef ARG
	ck_assert_int_eq(na, k->nparam);
	{
		CgEmuLaunch l = {{0, 0, 1}, {k->block[0], 1, 1}, k->smem, args, na, buf, nb};
		l.grid[0] = (int)cg_expr_eval(k->grid[0], c->T);
		l.grid[1] = (int)cg_expr_eval(k->grid[1], c->T);
		if (l.grid[0] > 0 && cg_emu_run(m, "g", &l, &d) < 0) {
			snprintf(out->msg, sizeof out->msg, "%s", d.last);
			goto done;
		}
	}

	/* reference in double */
	for (int r = 0; r < M; r++) {
		int e = 0, srow = s.gather ? gidx[r] / div : r, drow = sidx ? sidx[r] : r;
		double *acc = malloc(sizeof(double) * (size_t)s.N);
		if (offs)
			while (e < E - 1 && r >= offs[e + 1])
				e++;
		for (int64_t n = 0; n < s.N; n++) {
			double a = 0;
			for (int64_t q = 0; q < s.K; q++) {
				size_t bi = (size_t)(e * bstride + (s.b_layout == CG_B_NK ? n * ldb + q : q * ldb + n));
				a += ld(s.a_dt, A, (size_t)(srow * lda + q)) * ld(s.b_dt, B, bi);
			}
			acc[n] = a;
		}
		for (int64_t co = 0; co < width; co++) {
			double v[CG_EP_MAX], pair[2][CG_EP_MAX], want, got;
			int np = sw >= 0 ? 2 : 1;
			for (int p = 0; p < np; p++) {
				int64_t n = sw >= 0 ? 2 * co + p : co;
				for (int i = 0; i < (sw >= 0 ? sw : s.ep.n); i++) {
					const CgEpInst *in = &s.ep.in[i];
					int row = in->rows == CGR_GATHER ? srow : in->rows == CGR_GATHER_RAW ? gidx[r]
						: in->rows == CGR_SCATTER ? drow : r;
					switch (in->op) {
					case CGE_ACC: pair[p][i] = acc[n]; break;
					case CGE_IMM: pair[p][i] = in->imm; break;
					case CGE_COL: pair[p][i] = ld(in->dt, leaf[i], (size_t)(e * in->group_stride + n)); break;
					case CGE_ROW: pair[p][i] = ld(in->dt, leaf[i], (size_t)row); break;
					case CGE_MAT: pair[p][i] = ld(in->dt, leaf[i], (size_t)(row * (in->ld ? in->ld : s.N) + n)); break;
					default:
						pair[p][i] = cg_ep_eval1(in, pair[p][in->a], in->b >= 0 ? pair[p][in->b] : 0);
					}
				}
			}
			if (sw < 0) {
				want = s.ep.n ? pair[0][s.ep.n - 1] : acc[co];
			} else {
				const CgEpInst *w = &s.ep.in[sw];
				v[sw] = cg_ep_eval1(w, pair[0][w->a], pair[1][w->a]);
				for (int i = sw + 1; i < s.ep.n; i++) {
					const CgEpInst *in = &s.ep.in[i];
					int row = in->rows == CGR_GATHER ? srow : in->rows == CGR_GATHER_RAW ? gidx[r]
						: in->rows == CGR_SCATTER ? drow : r;
					switch (in->op) {
					case CGE_IMM: v[i] = in->imm; break;
					case CGE_COL: v[i] = ld(in->dt, leaf[i], (size_t)(e * in->group_stride + co)); break;
					case CGE_ROW: v[i] = ld(in->dt, leaf[i], (size_t)row); break;
					case CGE_MAT: v[i] = ld(in->dt, leaf[i], (size_t)(row * (in->ld ? in->ld : width) + co)); break;
					default: v[i] = cg_ep_eval1(in, v[in->a], in->b >= 0 ? v[in->b] : 0);
					}
				}
				want = v[s.ep.n - 1];
			}
			got = ld(s.c_dt, C, (size_t)(drow * ldc + co));
			if (isnan(got) && !isnan(want)) {
				snprintf(out->msg, sizeof out->msg, "C[%d,%lld] not written (row %d, expert %d)", drow,
					 (long long)co, r, e);
				free(acc);
				goto done;
			}
			err2 += (got - want) * (got - want);
			ref2 += want * want;
		}
		free(acc);
	}
	out->err = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
	out->C = C;
	out->cbytes = cbytes;
	C = NULL;
	rc = 0;
done:
	cg_module_free(m);
	free(A);
	free(B);
	free(C);
	free(gidx);
	free(sidx);
	free(offs);
	for (int i = 0; i < s.ep.n; i++)
		free(leaf[i]);
	return rc;
}

/*
 * The case with the wgmma mainloop against the reference; with same_as_mma,
 * also with the mma.sync mainloop, and the two outputs must be equal.
 */
static void
check_case(const Case *c, double tol, int same_as_mma)
{
	Case w = *c;
	Run r, q;

	w.s.mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_msg(run_case(&w, &r) == 0, "wgmma: %s", r.msg);
	ck_assert_msg(r.err < tol, "wgmma: relative L2 error %g >= %g", r.err, tol);
	if (same_as_mma) {
		w.s.mainloop = CG_MAINLOOP_MMA;
		ck_assert_msg(run_case(&w, &q) == 0, "mma: %s", q.msg);
		ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
			      "wgmma and mma.sync outputs differ (errors %g, %g)", r.err, q.err);
		free(q.C);
	}
	free(r.C);
}

/* ---- specs ---- */

static void
tiles(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st)
{
	s->bm = bm;
	s->bn = bn;
	s->bk = bk;
	s->warps_m = wm;
	s->warps_n = wn;
	s->stages = st;
	s->mainloop = CG_MAINLOOP_WGMMA;
}

static void
spec_dense_bias_gelu(GemmSpec *s, int64_t N, int64_t K)
{
	CgEpilogue *e = &s->ep;
	int a, b;

	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	a = cg_ep_acc(e);
	b = cg_ep_col(e, DT_BF16, 0, "bias");
	cg_ep_op(e, CGE_GELU_ERF, cg_ep_op(e, CGE_ADD, a, b), -1);
}

static void
spec_grouped_swiglu(GemmSpec *s, int E, int64_t N, int64_t K, int topk)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->groups = E;
	s->m_per_t = topk;
	s->gather = 1;
	s->gather_div = topk;
	cg_ep_swiglu(&s->ep, cg_ep_acc(&s->ep), 0, 0);
}

static void
spec_grouped_scale_scatter(GemmSpec *s, int E, int64_t N, int64_t K)
{
	int a, w;

	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->groups = E;
	s->store = CG_STORE_SCATTER;
	a = cg_ep_acc(&s->ep);
	w = cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w");
	cg_ep_op(&s->ep, CGE_MUL, a, w);
}

/* ---- checks, diagnostics, geometry ---- */

START_TEST(test_wgmma_needs_sm90a)
{
	const char *sms[] = {"sm_80", "sm_86", "sm_90"};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_dense_bias_gelu(&s, 256, 128);
	tiles(&s, 128, 128, 64, 2, 2, 3);
	for (size_t i = 0; i < NELEM(sms); i++) {
		CgTarget t = {sms[i], NULL, 3};
		CgModule *m = cg_module_new(&t, "w", &d);
		ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
		ck_assert_ptr_nonnull(strstr(d.last, "wgmma"));
		ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
		ck_assert_int_eq(cg_emit_gemm(m, "g", &s, &d), -1);
		ck_assert_int_eq(cg_module_nkernel(m), 0);
		cg_module_free(m);
	}
	{
		CgTarget t = {"sm_90a", NULL, 3};
		ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	}
}
END_TEST

START_TEST(test_wgmma_rejects_bad_tiles)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_dense_bias_gelu(&s, 256, 128);
	tiles(&s, 128, 128, 32, 2, 2, 3);		/* 64-byte rows */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "bk = 32"));
	tiles(&s, 16, 128, 64, 1, 4, 4);		/* decode tile: wgmma has 64 rows */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "64k rows"));
	tiles(&s, 64, 64, 64, 1, 2, 3);			/* 2 warps: no warpgroup */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "warpgroups"));
	tiles(&s, 256, 128, 64, 2, 2, 3);		/* 4 warps, 256x128: 256 accumulators */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "accumulators"));
	tiles(&s, 64, 64, 64, 2, 4, 3);			/* 2 warpgroups over 64 columns: 32 each, N-major */
	s.b_layout = CG_B_KN;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "B[K,N]"));
	s.b_layout = CG_B_NK;				/* K-major: 32 columns per warpgroup are fine */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
}
END_TEST

/* The wgmma kernel launches exactly like the mma.sync one. */
START_TEST(test_wgmma_geometry_equals_mma)
{
	static const int tl[][6] = {
		{128, 256, 64, 2, 4, 3}, {256, 128, 64, 4, 2, 3}, {128, 128, 64, 2, 2, 4},
		{64, 128, 64, 2, 2, 4}, {64, 64, 128, 2, 2, 2}, {128, 128, 128, 2, 4, 2},
	};
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	for (size_t i = 0; i < NELEM(tl); i++) {
		GemmSpec s;
		CgModule *m = cg_module_new(&t, "geo", &d);
		const CgKernel *a, *b;
		spec_grouped_swiglu(&s, 8, 512, 256, 2);
		tiles(&s, tl[i][0], tl[i][1], tl[i][2], tl[i][3], tl[i][4], tl[i][5]);
		ck_assert_msg(cg_emit_gemm(m, "w", &s, &d) == 0, "%d: %s", (int)i, d.last);
		s.mainloop = CG_MAINLOOP_MMA;
		ck_assert_msg(cg_emit_gemm(m, "m", &s, &d) == 0, "%d: %s", (int)i, d.last);
		a = cg_module_find(m, "w");
		b = cg_module_find(m, "m");
		ck_assert_int_eq(a->nparam, b->nparam);
		for (int p = 0; p < a->nparam; p++)
			ck_assert_str_eq(a->param[p].role, b->param[p].role);
		ck_assert_int_eq(a->block[0], b->block[0]);
		ck_assert_int_eq(a->smem, b->smem);
		ck_assert_int_eq(a->smem, cg_gemm_smem(&s));
		for (int g = 0; g < 3; g++)
			ck_assert(memcmp(&a->grid[g], &b->grid[g], sizeof a->grid[g]) == 0);
		ck_assert_ptr_nonnull(strstr(a->note, " wgmma"));
		ck_assert_ptr_null(strstr(b->note, "wgmma"));
		cg_module_free(m);
	}
}
END_TEST

/* ---- PTX and ptxas ---- */

static int
count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)) != NULL; p++)
		n++;
	return n;
}

START_TEST(test_wgmma_ptx_assembles_for_sm90a)
{
	CgTarget t = {"sm_90a", NULL, 3};
	GemmSpec s[8];
	int ns = 0, a, r;
	Diag d;
	CgModule *m;
	CgPtxasResult res;
	const char *ptx;
	size_t len;
	char name[32];

	spec_dense_bias_gelu(&s[ns], 14336, 4096);		/* the dense prefill tiles */
	tiles(&s[ns++], 256, 128, 64, 4, 2, 3);
	spec_dense_bias_gelu(&s[ns], 14336, 4096);
	tiles(&s[ns++], 128, 256, 64, 2, 4, 3);
	spec_dense_bias_gelu(&s[ns], 14336, 4096);
	tiles(&s[ns++], 128, 128, 64, 2, 2, 4);
	s[ns - 1].min_ctas = 1;
	spec_grouped_swiglu(&s[ns], 8, 28672, 4096, 2);	/* Mixtral gate|up */
	tiles(&s[ns++], 128, 256, 64, 2, 4, 3);
	spec_grouped_scale_scatter(&s[ns], 8, 4096, 14336);	/* Mixtral down */
	tiles(&s[ns++], 128, 256, 64, 2, 4, 3);
	cg_gemm_default(&s[ns]);				/* f16, B [K,N], residual */
	s[ns].N = 512;
	s[ns].K = 256;
	s[ns].a_dt = s[ns].b_dt = s[ns].c_dt = DT_F16;
	s[ns].b_layout = CG_B_KN;
	a = cg_ep_acc(&s[ns].ep);
	r = cg_ep_mat(&s[ns].ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s[ns].ep, CGE_ADD, a, r);
	tiles(&s[ns++], 64, 128, 64, 2, 2, 3);
	spec_dense_bias_gelu(&s[ns], 14336, 4096);		/* 4 stages: a group in flight */
	tiles(&s[ns++], 256, 128, 64, 4, 2, 4);

	diag_init(&d, stderr);
	m = cg_module_new(&t, "wg", &d);
	for (int i = 0; i < ns; i++) {
		snprintf(name, sizeof name, "w%d", i);
		ck_assert_msg(cg_emit_gemm(m, name, &s[i], &d) == 0, "%s: %s", name, d.last);
	}
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_msg(ptx != NULL, "%s", d.last);
	ck_assert_int_eq(count(ptx, ".entry"), ns);
	ck_assert(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") > 0);
	ck_assert(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") > 0);
	ck_assert(count(ptx, "wgmma.fence.sync.aligned") >= ns);
	ck_assert(count(ptx, "wgmma.commit_group.sync.aligned") >= ns);
	ck_assert(count(ptx, "wgmma.wait_group.sync.aligned 1") > 0);
	ck_assert(count(ptx, "fence.proxy.async.shared::cta") >= ns);
	ck_assert_int_eq(count(ptx, "mma.sync"), 0);
	ck_assert_int_eq(count(ptx, "ldmatrix"), 0);
	if (!cg_ptxas_path()) {
		fprintf(stderr, "check_wgmma: no ptxas; sm_90a PTX not assembled (skipped)\n");
		cg_module_free(m);
		return;
	}
	ck_assert_msg(cg_module_assemble(m, 0, &res, &d) == 0, "%s", d.last);
	ck_assert_int_eq(res.n, ns);
	/* ptxas says so when it has to serialise wgmma (accumulators touched in flight) */
	ck_assert_msg(!res.log || !strstr(res.log, "serializ"), "%s", res.log);
	for (int i = 0; i < ns; i++) {
		const CgKernel *k = cg_module_kernel(m, i);
		ck_assert_msg(k->regs > 0 && k->regs <= 255, "%s: %d registers", k->name, k->regs);
		ck_assert_msg(k->spill_stores == 0 && k->spill_loads == 0, "%s: %d/%d bytes spilled (%s)",
			      k->name, k->spill_stores, k->spill_loads, k->note);
		if (getenv("MOEC_CG_VERBOSE"))
			fprintf(stderr, "sm_90a %s: %d regs, %d/%d spill, smem %d: %s\n", k->name, k->regs,
				k->spill_stores, k->spill_loads, k->smem, k->note);
	}
	cg_ptxas_free(&res);
	cg_module_free(m);
}
END_TEST

/* ---- the kernels on the emulator ---- */

START_TEST(test_wgmma_emu_dense_one_warpgroup)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 256, 192);		/* 3 k-tiles, 4 stages */
	tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.T = 77;					/* ragged: one partial row tile */
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_dense_rows_split)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 256, 256);		/* 2 warpgroups over 256 rows */
	tiles(&c.s, 256, 128, 64, 4, 2, 3);
	c.T = 300;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_dense_columns_split)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 512, 256);		/* 2 warpgroups over 256 columns */
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.T = 130;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_four_warpgroups_bk128)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 256, 384);		/* 16 warps: 4 x 64 rows; two 64-wide k-blocks */
	tiles(&c.s, 256, 128, 128, 4, 4, 2);
	c.T = 270;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_wait0_pipeline_and_two_stages)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 128, 320);
	tiles(&c.s, 64, 64, 64, 2, 2, 4);		/* 4 stages, but wait_group 0 */
	c.s.no_frag_pipe = 1;
	c.T = 100;
	check_case(&c, 1e-2, 1);
	tiles(&c.s, 64, 64, 64, 2, 2, 3);		/* 3 stages: wait_group 0 by default */
	check_case(&c, 1e-2, 0);
	tiles(&c.s, 64, 64, 64, 2, 2, 2);
	c.s.no_frag_pipe = 0;
	check_case(&c, 1e-2, 0);
	tiles(&c.s, 64, 128, 64, 2, 4, 5);		/* 5 stages, 2 warpgroups of 64 columns */
	check_case(&c, 1e-2, 0);
}
END_TEST

START_TEST(test_wgmma_emu_kn_f16_residual)
{
	Case c = {0};
	int a, r;

	cg_gemm_default(&c.s);
	c.s.N = 256;
	c.s.K = 192;
	c.s.a_dt = c.s.b_dt = c.s.c_dt = DT_F16;
	c.s.b_layout = CG_B_KN;
	a = cg_ep_acc(&c.s.ep);
	r = cg_ep_mat(&c.s.ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&c.s.ep, CGE_ADD, a, r);
	tiles(&c.s, 64, 128, 64, 2, 2, 3);
	c.T = 90;
	check_case(&c, 1e-2, 1);
	tiles(&c.s, 128, 256, 128, 2, 4, 2);		/* two N-major blocks per warpgroup, bk 128 */
	c.s.ldb = 264;					/* a padded B */
	c.s.K = 256;
	c.T = 140;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_f32_inputs_f32_out)
{
	Case c = {0};

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 128;
	c.s.a_dt = c.s.b_dt = c.s.c_dt = DT_F32;
	tiles(&c.s, 64, 128, 64, 2, 2, 3);
	c.T = 65;
	check_case(&c, 1e-2, 1);	/* bf16 rounding of the inputs */
}
END_TEST

START_TEST(test_wgmma_emu_grouped_swiglu_gather_empty_experts)
{
	Case c = {0};
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};	/* 240 = 2 * 120 */

	spec_grouped_swiglu(&c.s, 8, 256, 128, 2);
	tiles(&c.s, 128, 128, 64, 2, 2, 3);
	c.T = 120;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_prefill_tile_persistent)
{
	Case c = {0};
	int counts[8] = {31, 0, 130, 2, 0, 0, 64, 29};	/* 256 = 2 * 128 */

	spec_grouped_swiglu(&c.s, 8, 512, 128, 2);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	c.T = 128;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_gpt_oss_expert_bias)
{
	Case c = {0};
	int counts[4] = {9, 0, 80, 1};
	int a, b;

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 128;
	c.s.groups = 4;
	a = cg_ep_acc(&c.s.ep);
	b = cg_ep_col(&c.s.ep, DT_BF16, 128, "bias");	/* per-expert bias */
	cg_ep_swiglu(&c.s.ep, cg_ep_op(&c.s.ep, CGE_ADD, a, b), 7.0f, 1.702f);
	tiles(&c.s, 64, 128, 64, 2, 2, 3);
	c.T = 90;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_scale_scatter)
{
	Case c = {0};
	int counts[8] = {3, 0, 140, 0, 1, 49, 0, 7};	/* 200 */

	spec_grouped_scale_scatter(&c.s, 8, 256, 192);
	tiles(&c.s, 64, 128, 64, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 6;
	c.T = 200;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_no_rows)
{
	Case c = {0};

	spec_grouped_swiglu(&c.s, 4, 128, 64, 1);
	tiles(&c.s, 64, 128, 64, 2, 2, 2);
	c.T = 21;
	c.counts[3] = 21;
	check_case(&c, 1e-2, 1);
	c.T = 0;		/* no rows: nothing runs, nothing breaks */
	c.counts[3] = 0;
	check_case(&c, 1e-2, 0);
}
END_TEST

/* ---- the emulator's wgmma itself, through the one-instruction probe ---- */

/* Run the probe; 0 with the relative error in *err, or -1 with the diagnostic in msg. */
static int
run_probe(int n, unsigned flags, double *err, char *msg, size_t nmsg)
{
	CgTarget t = {"emu", NULL, 3};
	Diag d;
	CgModule *m;
	const CgKernel *k;
	void *A, *B;
	float *D;
	uint64_t args[3];
	CgEmuBuf buf[3];
	double e2 = 0, r2 = 0;
	int rc = -1;

	rng_state = 777;
	diag_init(&d, NULL);
	m = cg_module_new(&t, "probe", &d);
	if (!m || cg_emit_wgmma_probe(m, "p", n, flags, &d) < 0) {
		snprintf(msg, nmsg, "emit: %s", d.last);
		cg_module_free(m);
		return -1;
	}
	k = cg_module_find(m, "p");
	A = rand_tensor(DT_BF16, 64 * 16, 1.0);
	B = rand_tensor(DT_BF16, (size_t)n * 16, 1.0);
	D = malloc(sizeof(float) * 64 * (size_t)n);
	memset(D, 0xff, sizeof(float) * 64 * (size_t)n);
	args[0] = (uint64_t)(uintptr_t)A;
	args[1] = (uint64_t)(uintptr_t)B;
	args[2] = (uint64_t)(uintptr_t)D;
	buf[0] = (CgEmuBuf){A, 64 * 16 * 2};
	buf[1] = (CgEmuBuf){B, (size_t)n * 16 * 2};
	buf[2] = (CgEmuBuf){D, sizeof(float) * 64 * (size_t)n};
	{
		CgEmuLaunch l = {{1, 1, 1}, {128, 1, 1}, k->smem, args, 3, buf, 3};
		if (cg_emu_run(m, "p", &l, &d) < 0) {
			snprintf(msg, nmsg, "%s", d.last);
			goto done;
		}
	}
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < n; c++) {
			double want = 0, got = D[r * n + c];
			for (int q = 0; q < 16; q++)
				want += ld(DT_BF16, A, (size_t)(r * 16 + q)) * ld(DT_BF16, B, (size_t)(c * 16 + q));
			if (isnan(got)) {
				snprintf(msg, nmsg, "D[%d,%d] not written", r, c);
				goto done;
			}
			e2 += (got - want) * (got - want);
			r2 += want * want;
		}
	*err = sqrt(e2 / r2);
	rc = 0;
done:
	cg_module_free(m);
	free(A);
	free(B);
	free(D);
	return rc;
}

START_TEST(test_wgmma_probe_fragment_and_32b_swizzle)
{
	int ns[] = {8, 64, 136, 256};
	char msg[600];
	double err;

	for (size_t i = 0; i < NELEM(ns); i++) {
		ck_assert_msg(run_probe(ns[i], 0, &err, msg, sizeof msg) == 0, "n=%d: %s", ns[i], msg);
		ck_assert_msg(err < 1e-6, "n=%d: relative error %g", ns[i], err);
	}
}
END_TEST

/* The emulator's hazard checks fire on kernels that break the rules. */
START_TEST(test_wgmma_probe_hazards_are_diagnostics)
{
	char msg[600];
	double err;

	ck_assert_int_eq(run_probe(64, CG_WGPROBE_NO_FENCE, &err, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "fence.proxy.async") != NULL, "%s", msg);
	ck_assert_int_eq(run_probe(64, CG_WGPROBE_WRITE_IN_FLIGHT, &err, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "in-flight wgmma") != NULL, "%s", msg);
	ck_assert_int_eq(run_probe(64, CG_WGPROBE_NO_WAIT, &err, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "not retired") != NULL, "%s", msg);
}
END_TEST

START_TEST(test_wgmma_probe_ptx)
{
	CgTarget t80 = {"sm_80", NULL, 3}, t90 = {"sm_90", NULL, 3}, t90a = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	CgPtxasResult r;
	const char *ptx;
	size_t len;

	diag_init(&d, NULL);
	m = cg_module_new(&t80, "p", &d);
	ck_assert_int_eq(cg_emit_wgmma_probe(m, "p", 64, 0, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
	cg_module_free(m);
	m = cg_module_new(&t90, "p", &d);
	ck_assert_int_eq(cg_emit_wgmma_probe(m, "p", 64, 0, &d), -1);
	cg_module_free(m);
	m = cg_module_new(&t90a, "p", &d);
	ck_assert_int_eq(cg_emit_wgmma_probe(m, "p", 256, 0, &d), 0);
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
	if (cg_ptxas_path()) {
		ck_assert_msg(cg_module_assemble(m, 0, &r, &d) == 0, "%s", d.last);
		cg_ptxas_free(&r);
	}
	cg_module_free(m);
}
END_TEST

Suite *
wgmma_suite(void)
{
	Suite *s = suite_create("wgmma");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_wgmma_needs_sm90a);
	tcase_add_test(t, test_wgmma_rejects_bad_tiles);
	tcase_add_test(t, test_wgmma_geometry_equals_mma);
	tcase_add_test(t, test_wgmma_ptx_assembles_for_sm90a);
	tcase_add_test(t, test_wgmma_emu_dense_one_warpgroup);
	tcase_add_test(t, test_wgmma_emu_dense_rows_split);
	tcase_add_test(t, test_wgmma_emu_dense_columns_split);
	tcase_add_test(t, test_wgmma_emu_four_warpgroups_bk128);
	tcase_add_test(t, test_wgmma_emu_wait0_pipeline_and_two_stages);
	tcase_add_test(t, test_wgmma_emu_kn_f16_residual);
	tcase_add_test(t, test_wgmma_emu_f32_inputs_f32_out);
	tcase_add_test(t, test_wgmma_emu_grouped_swiglu_gather_empty_experts);
	tcase_add_test(t, test_wgmma_emu_grouped_prefill_tile_persistent);
	tcase_add_test(t, test_wgmma_emu_grouped_gpt_oss_expert_bias);
	tcase_add_test(t, test_wgmma_emu_grouped_scale_scatter);
	tcase_add_test(t, test_wgmma_emu_grouped_no_rows);
	tcase_add_test(t, test_wgmma_probe_fragment_and_32b_swizzle);
	tcase_add_test(t, test_wgmma_probe_hazards_are_diagnostics);
	tcase_add_test(t, test_wgmma_probe_ptx);
	suite_add_tcase(s, t);
	return s;
}
