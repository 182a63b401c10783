/*
 * check_gemm_simt.c — the CUDA-core GEMM (cg_emit_gemm_simt): its checks,
 * its tile choice, its parameters (the same as cg_emit_gemm's), PTX for
 * sm_80 / sm_90 / sm_90a assembled by ptxas with registers and spills
 * asserted, and kernels of both variants (register tiles, split-K) on the
 * CPU emulator against a host reference in double on random non-zero
 * inputs, outputs poisoned with NaN first: f32 exactness, N = 8 routers,
 * ragged M, N and K tails, odd leading dimensions, grouped with empty
 * experts, gather, swiglu, routing weights through the scatter index, the
 * scattered store, bf16/f16/f32 mixes, B [K,N], residuals.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

static const char *const targets[] = {"sm_80", "sm_90", "sm_90a"};

/* ---- random data ---- */

static uint64_t rng_state;

static double
urand(void)		/* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* Non-zero values: magnitude in [scale/8, scale), random sign. */
static double
nzrand(double scale)
{
	double u = urand();

	return (u < 0 ? -1 : 1) * scale * (0.125 + 0.875 * fabs(u));
}

static size_t esz(DType dt) { return dt == DT_F32 ? 4 : 2; }

static void *
rand_tensor(DType dt, size_t n, double scale)
{
	void *p = calloc(n ? n : 1, esz(dt));

	for (size_t i = 0; i < n; i++)
		dtype_store(dt, p, i, nzrand(scale));
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

/* ---- a case: inputs, the emulator run, the reference ---- */

typedef struct Case Case;
struct Case {
	GemmSpec s;
	int T;
	int counts[64];		/* grouped: rows per expert (sum = M) */
	int exact;		/* A = 1 + j/4096, B small integers: the f32 result is exact */
};

typedef struct Run Run;
struct Run {
	double err;		/* relative L2 */
	int64_t mismatches;	/* elements not bit-equal to the reference rounded to c_dt */
	int64_t elems;
};

static double ld(DType dt, const void *p, size_t i) { return dtype_load(dt, p, i); }

static int
row_of(const CgEpInst *in, int r, int srow, int graw, int drow)
{
	switch (in->rows) {
	case CGR_GATHER: return srow;
	case CGR_GATHER_RAW: return graw;
	case CGR_SCATTER: return drow;
	default: return r;
	}
}

/* Run c on the emulator; 0 with the errors in *out, or -1 (why in msg). */
static int
run_case(const Case *c, Run *out, char *msg, size_t nmsg)
{
	GemmSpec s = c->s;
	Diag d;
	CgTarget t = {"emu", NULL, 3};
	CgModule *m;
	const CgKernel *k;
	int E, M, sw = -1, div, msrc, rc = -1;
	int64_t width, rows_b, bsize;
	int *gidx = NULL, *sidx = NULL, *offs = NULL;
	void *A = NULL, *B = NULL, *C = NULL, *leaf[CG_EP_MAX] = {0};
	size_t leafn[CG_EP_MAX] = {0}, csize;
	uint64_t args[8 + CG_EP_MAX];
	CgEmuBuf buf[8 + CG_EP_MAX];
	int na = 0, nb = 0;
	double err2 = 0, ref2 = 0;

	diag_init(&d, NULL);
	msg[0] = 0;
	memset(out, 0, sizeof *out);
	cg_gemm_resolve(&s);
	E = s.groups > 0 ? s.groups : 1;
	M = s.m_per_t * c->T;
	div = s.gather ? s.gather_div : 1;
	msrc = s.gather ? (M + div - 1) / div : M;
	for (int i = 0; i < s.ep.n; i++)
		if (s.ep.in[i].op == CGE_SWIGLU)
			sw = i;
	width = sw >= 0 ? s.N / 2 : s.N;
	if (c->s.ldc == 0)
		s.ldc = width;
	rows_b = s.b_layout == CG_B_NK ? s.N : s.K;
	bsize = (int64_t)(E - 1) * s.b_group_stride + (rows_b - 1) * s.ldb +
		(s.b_layout == CG_B_NK ? s.K : s.N);

	m = cg_module_new(&t, "case", &d);
	if (!m || cg_emit_gemm_simt(m, "g", &c->s, &d) < 0) {
		snprintf(msg, nmsg, "emit: %s", d.last);
		cg_module_free(m);
		return -1;
	}
	k = cg_module_find(m, "g");

	/* A and B: exact mode keeps every product and sum exact in f32 */
	A = calloc((size_t)(msrc ? msrc : 1) * (size_t)s.lda, esz(s.a_dt));
	B = calloc((size_t)bsize, esz(s.b_dt));
	for (size_t i = 0; i < (size_t)msrc * (size_t)s.lda; i++)
		dtype_store(s.a_dt, A, i, c->exact ? 1 + floor((urand() + 1) * 2048) / 4096 : nzrand(1.0));
	for (size_t i = 0; i < (size_t)bsize; i++)
		dtype_store(s.b_dt, B, i, c->exact ? (urand() < 0 ? -1 : 1) * (1 + floor((urand() + 1) * 1.5))
						   : nzrand(1.0 / sqrt((double)s.K)));
	csize = (size_t)(M ? M : 1) * (size_t)s.ldc * esz(s.c_dt);
	C = malloc(csize);
	memset(C, 0xff, csize);	/* NaN */
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
			snprintf(msg, nmsg, "counts sum to %d, not M = %d", offs[E], M);
			goto out;
		}
	}
	for (int i = 0; i < s.ep.n; i++) {
		const CgEpInst *in = &s.ep.in[i];
		size_t n = 0;
		int64_t space = sw >= 0 && i > sw ? width : s.N;	/* its column space */
		if (in->op == CGE_COL)
			n = (size_t)(in->group_stride ? (E - 1) * in->group_stride + space : space);
		else if (in->op == CGE_ROW)
			n = (size_t)(in->rows == CGR_GATHER ? msrc : M);
		else if (in->op == CGE_MAT)
			n = (size_t)(in->rows == CGR_GATHER ? msrc : M) * (size_t)(in->ld ? in->ld : space);
		if (cg_ep_is_load(in->op)) {	/* n may be 0 (no rows) */
			leaf[i] = rand_tensor(in->dt, n, 1.0);
			leafn[i] = n * esz(in->dt);
		}
	}

#define ARG(p, bytes) (buf[nb++] = (CgEmuBuf){(p), (bytes)}, args[na++] = (uint64_t)(uintptr_t)(p))
	ARG(A, (size_t)msrc * (size_t)s.lda * esz(s.a_dt));
	if (s.gather)
		ARG(gidx, sizeof(int) * (size_t)M);
	ARG(B, (size_t)bsize * esz(s.b_dt));
	ARG(C, (size_t)M * (size_t)s.ldc * esz(s.c_dt));
	if (sidx)
		ARG(sidx, sizeof(int) * (size_t)M);
	if (offs)
		ARG(offs, sizeof(int) * (size_t)(E + 1));
	for (int i = 0; i < s.ep.n; i++)
		if (leaf[i])
			ARG(leaf[i], leafn[i]);
	args[na++] = (uint64_t)c->T;
#undef ARG
	if (na != k->nparam) {
		snprintf(msg, nmsg, "%d arguments for %d parameters", na, k->nparam);
		goto out;
	}
	{
		CgEmuLaunch l = {{0, 0, 1}, {k->block[0], 1, 1}, k->smem, args, na, buf, nb};
		l.grid[0] = (int)cg_expr_eval(k->grid[0], c->T);
		l.grid[1] = (int)cg_expr_eval(k->grid[1], c->T);
		if (l.grid[0] > 0 && cg_emu_run(m, "g", &l, &d) < 0) {
			snprintf(msg, nmsg, "%s", d.last);
			goto out;
		}
	}

	/* reference in double */
	for (int r = 0; r < M; r++) {
		int e = 0, srow = s.gather ? gidx[r] / div : r, drow = sidx ? sidx[r] : r;
		int graw = s.gather ? gidx[r] : r;
		double acc[1024];
		if (offs)
			while (e < E - 1 && r >= offs[e + 1])
				e++;
		for (int64_t n = 0; n < s.N; n++) {
			double a = 0;
			for (int64_t q = 0; q < s.K; q++) {
				size_t bi = (size_t)(e * s.b_group_stride +
						     (s.b_layout == CG_B_NK ? n * s.ldb + q : q * s.ldb + n));
				a += ld(s.a_dt, A, (size_t)(srow * s.lda + q)) * ld(s.b_dt, B, bi);
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
					int row = row_of(in, r, srow, graw, drow);
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
					int row = row_of(in, r, srow, graw, drow);
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
			got = ld(s.c_dt, C, (size_t)drow * (size_t)s.ldc + (size_t)co);
			if (isnan(got) && !isnan(want)) {
				snprintf(msg, nmsg, "C[%d,%lld] not written (row %d, expert %d)", drow,
					 (long long)co, r, e);
				goto out;
			}
			{
				unsigned char w1[4] = {0}, g1[4] = {0};
				dtype_store(s.c_dt, w1, 0, want);
				dtype_store(s.c_dt, g1, 0, got);
				out->mismatches += memcmp(w1, g1, 4) != 0;
			}
			out->elems++;
			err2 += (got - want) * (got - want);
			ref2 += want * want;
		}
	}
	/* the padding between rows (ldc > width) and past the rows is untouched */
	for (int64_t r = 0; r < M; r++)
		for (int64_t co = width; co < s.ldc; co++)
			if (!isnan(ld(s.c_dt, C, (size_t)(r * s.ldc + co)))) {
				snprintf(msg, nmsg, "C[%lld,%lld] past the width %lld written", (long long)r,
					 (long long)co, (long long)width);
				goto out;
			}
	out->err = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
	rc = 0;
out:
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

static Run
check_case(const Case *c, double tol)
{
	char msg[600];
	Run r;

	rng_state = 12345;
	ck_assert_msg(run_case(c, &r, msg, sizeof msg) == 0, "%s", msg);
	ck_assert_msg(r.err < tol, "relative L2 error %g >= %g", r.err, tol);
	if (c->exact)
		ck_assert_msg(r.mismatches == 0, "%lld of %lld elements differ from the exact result",
			      (long long)r.mismatches, (long long)r.elems);
	return r;
}

/* ---- specs ---- */

static void
spec_f32(GemmSpec *s, int64_t N, int64_t K)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->a_dt = s->b_dt = s->c_dt = DT_F32;
}

static void
bias_gelu(GemmSpec *s, DType dt)
{
	CgEpilogue *e = &s->ep;
	int a = cg_ep_acc(e), b = cg_ep_col(e, dt, 0, "bias");

	cg_ep_op(e, CGE_GELU_ERF, cg_ep_op(e, CGE_ADD, a, b), -1);
}

static void
tiles(GemmSpec *s, int bm, int bn, int bk)
{
	s->bm = bm;
	s->bn = bn;
	s->bk = bk;
}

/* DeepSeek-V3's router: f32 [T,7168] x [7168,256], the tile chosen for prefill. */
static void
spec_ds_router(GemmSpec *s)
{
	spec_f32(s, 256, 7168);
	cg_gemm_simt_tiles(s, 4096);
}

/* A Mixtral-style router: [T,4096] x [4096,8], f32 out. */
static void
spec_router8(GemmSpec *s, DType a_dt, DType b_dt)
{
	spec_f32(s, 8, 4096);
	s->a_dt = a_dt;
	s->b_dt = b_dt;
	cg_gemm_simt_tiles(s, 4096);
}

static void
spec_grouped_swiglu(GemmSpec *s, int E, int64_t N, int64_t K, int topk, DType dt)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->a_dt = s->b_dt = s->c_dt = dt;
	s->groups = E;
	s->m_per_t = topk;
	s->gather = 1;
	s->gather_div = topk;
	cg_ep_swiglu(&s->ep, cg_ep_acc(&s->ep), 0, 0);
}

static void
spec_grouped_scale_scatter(GemmSpec *s, int E, int64_t N, int64_t K, DType dt)
{
	int a, w;

	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->a_dt = s->b_dt = s->c_dt = dt;
	s->groups = E;
	s->store = CG_STORE_SCATTER;
	a = cg_ep_acc(&s->ep);
	w = cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w");
	cg_ep_op(&s->ep, CGE_MUL, a, w);
}

/* ---- checks, tiles, parameters ---- */

START_TEST(test_simt_rejects_bad_specs)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_f32(&s, 100, 60);
	tiles(&s, 128, 64, 16);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);	/* N, K tails are fine */
	tiles(&s, 96, 64, 16);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "tile"));
	tiles(&s, 128, 64, 12);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	tiles(&s, 4, 7, 16);				/* split-K needs bn even */
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	spec_grouped_swiglu(&s, 4, 30, 64, 1, DT_F32);
	s.N = 31;					/* swiglu needs pairs */
	tiles(&s, 64, 64, 16);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "odd"));
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	s.a_dt = DT_I8;
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	s.lda = 63;
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	cg_ep_op(&s.ep, CGE_MUL, cg_ep_acc(&s.ep), cg_ep_row(&s.ep, DT_F32, CGR_SCATTER, "w"));
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not scattered"));
	/* bf16 x f16 has no mma type, but is fine in f32 */
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	s.a_dt = DT_BF16;
	s.b_dt = DT_F16;
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
}
END_TEST

START_TEST(test_simt_tile_choice)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_f32(&s, 8, 4096);				/* routers: split-K 4x8 */
	cg_gemm_simt_tiles(&s, 4096);
	ck_assert_int_eq(s.bm, 4);
	ck_assert_int_eq(s.bn, 8);
	spec_f32(&s, 7, 4096);				/* odd N: a pair of columns past it */
	cg_gemm_simt_tiles(&s, 16);
	ck_assert_int_eq(s.bn, 8);
	spec_f32(&s, 256, 7168);			/* DeepSeek's router: 64x64x32 (256 CTAs) */
	cg_gemm_simt_tiles(&s, 4096);
	ck_assert_int_eq(s.bm, 64);
	ck_assert_int_eq(s.bn, 64);
	ck_assert_int_eq(s.bk, 32);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	spec_f32(&s, 3072, 768);			/* wide: 128x64x16 */
	cg_gemm_simt_tiles(&s, 4096);
	ck_assert_int_eq(s.bm, 128);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	spec_f32(&s, 256, 7168);
	cg_gemm_simt_tiles(&s, 16);			/* decode: split-K */
	ck_assert_int_eq(s.bm * s.bn, 32);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	for (int64_t n = 1; n <= 40; n++) {		/* every small N has a valid tile */
		spec_f32(&s, n, 100);
		cg_gemm_simt_tiles(&s, 100);
		ck_assert_msg(cg_gemm_simt_check(&t, &s, &d) == 0, "N = %lld: %s", (long long)n, d.last);
	}
}
END_TEST

/* Same spec, same parameter list as the tensor-core builder: program.c binds either. */
START_TEST(test_simt_params_match_tensor_core_builder)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *a, *b;
	char buf[64];

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	spec_grouped_swiglu(&s, 8, 256, 128, 2, DT_BF16);
	s.store = CG_STORE_SCATTER;
	cg_ep_op(&s.ep, CGE_MUL, 1, cg_ep_row(&s.ep, DT_F32, CGR_GATHER_RAW, "route_w"));
	ck_assert_int_eq(cg_emit_gemm(m, "tc", &s, &d), 0);
	tiles(&s, 64, 64, 16);
	ck_assert_msg(cg_emit_gemm_simt(m, "simt", &s, &d) == 0, "%s", d.last);
	a = cg_module_find(m, "tc");
	b = cg_module_find(m, "simt");
	ck_assert_int_eq(a->nparam, b->nparam);
	for (int i = 0; i < a->nparam; i++) {
		ck_assert_str_eq(a->param[i].role, b->param[i].role);
		ck_assert_int_eq(a->param[i].kind, b->param[i].kind);
	}
	ck_assert_int_eq(b->block[0], 256);
	cg_expr_print(buf, sizeof buf, b->grid[0]);
	ck_assert_str_eq(buf, "cdiv(2*T+504,64)");	/* M = 2T rows, + E*(bm-1) */
	cg_expr_print(buf, sizeof buf, b->grid[1]);
	ck_assert_str_eq(buf, "4");
	ck_assert_int_eq(b->smem, cg_gemm_simt_smem(&s));
	ck_assert_ptr_nonnull(strstr(b->note, "gemm-simt"));
	ck_assert_ptr_nonnull(strstr(b->note, "grouped E=8"));
	cg_module_free(m);
}
END_TEST

/* ---- PTX and ptxas ---- */

static int
suite_specs(GemmSpec *s)
{
	int n = 0, a, r;

	spec_ds_router(&s[n++]);			/* f32 64x64x32 */
	spec_ds_router(&s[n]);
	tiles(&s[n++], 128, 64, 16);
	spec_router8(&s[n++], DT_F32, DT_F32);		/* split-K 4x8 */
	spec_router8(&s[n++], DT_BF16, DT_BF16);
	spec_f32(&s[n], 1000, 7168);			/* bias+gelu, 128x128x8, tails */
	bias_gelu(&s[n], DT_F32);
	tiles(&s[n++], 128, 128, 8);
	spec_grouped_swiglu(&s[n], 8, 1024, 512, 2, DT_F32);
	tiles(&s[n++], 64, 64, 16);
	spec_grouped_scale_scatter(&s[n], 8, 512, 1024, DT_F32);
	tiles(&s[n], 32, 32, 32);
	s[n++].sched = CG_SCHED_PERSISTENT;
	spec_f32(&s[n], 512, 256);			/* f16 x f32, B [K,N], residual */
	s[n].a_dt = s[n].c_dt = DT_F16;
	s[n].b_layout = CG_B_KN;
	a = cg_ep_acc(&s[n].ep);
	r = cg_ep_mat(&s[n].ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s[n].ep, CGE_ADD, a, r);
	tiles(&s[n++], 64, 128, 16);
	return n;
}

START_TEST(test_simt_ptx_assembles_on_target)
{
	const char *sm = targets[_i];
	CgTarget t = {sm, NULL, 3};
	GemmSpec s[8];
	int ns = suite_specs(s);
	Diag d;
	CgModule *m;
	CgPtxasResult r;
	const char *ptx;
	size_t len;
	char name[32];

	diag_init(&d, stderr);
	m = cg_module_new(&t, "simt", &d);
	ck_assert_ptr_nonnull(m);
	for (int i = 0; i < ns; i++) {
		snprintf(name, sizeof name, "k%d", i);
		ck_assert_msg(cg_emit_gemm_simt(m, name, &s[i], &d) == 0, "%s: %s", name, d.last);
	}
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_msg(ptx != NULL, "%s", d.last);
	ck_assert_ptr_nonnull(strstr(ptx, ".entry"));
	ck_assert_ptr_nonnull(strstr(ptx, "fma.rn.f32"));
	ck_assert_ptr_null(strstr(ptx, "mma.sync"));
	ck_assert_ptr_null(strstr(ptx, "cvt.rna.tf32"));
	ck_assert_ptr_nonnull(strstr(ptx, ".v4.f32"));	/* vector loads of f32 */
	if (!cg_ptxas_path()) {
		fprintf(stderr, "check_gemm_simt: no ptxas; PTX for %s not assembled (skipped)\n", sm);
		cg_module_free(m);
		return;
	}
	ck_assert_msg(cg_module_assemble(m, 0, &r, &d) == 0, "%s", d.last);
	ck_assert_int_eq(r.n, ns);
	for (int i = 0; i < ns; i++) {
		const CgKernel *k = cg_module_kernel(m, i);
		if (getenv("MOEC_CG_VERBOSE"))
			fprintf(stderr, "%s %s: %d regs, %d/%d spill, smem %d: %s\n", sm, k->name,
				k->regs, k->spill_stores, k->spill_loads, k->smem, k->note);
		ck_assert_msg(k->regs > 0 && k->regs <= 255, "%s: %d registers", k->name, k->regs);
		ck_assert_msg(k->spill_stores == 0 && k->spill_loads == 0, "%s: %d/%d bytes spilled",
			      k->name, k->spill_stores, k->spill_loads);
	}
	cg_ptxas_free(&r);
	cg_module_free(m);
}
END_TEST

/* ---- on the emulator ---- */

/* f32 x f32 is f32 FMA arithmetic: operands that bf16 or tf32 would round give the exact result. */
START_TEST(test_simt_f32_exact)
{
	Case c = {0};

	spec_f32(&c.s, 96, 80);
	tiles(&c.s, 64, 64, 16);
	c.T = 70;
	c.exact = 1;
	check_case(&c, 1e-12);
	tiles(&c.s, 4, 8, 16);				/* split-K */
	c.T = 9;
	check_case(&c, 1e-12);
}
END_TEST

START_TEST(test_simt_f32_dense_bias_gelu_ragged_m)
{
	Case c = {0};

	spec_f32(&c.s, 128, 96);
	bias_gelu(&c.s, DT_F32);
	tiles(&c.s, 64, 64, 16);
	c.T = 77;					/* not a multiple of bm */
	check_case(&c, 1e-5);
	tiles(&c.s, 128, 128, 8);			/* 8x8 per thread, one partial tile */
	c.T = 130;
	check_case(&c, 1e-5);
	tiles(&c.s, 32, 32, 32);			/* 2x2 per thread */
	c.T = 33;
	check_case(&c, 1e-5);
}
END_TEST

/* N, K not multiples of anything; odd lda and ldc: scalar loads and stores. */
START_TEST(test_simt_tails_and_odd_leading_dims)
{
	Case c = {0};

	spec_f32(&c.s, 100, 75);
	bias_gelu(&c.s, DT_BF16);
	tiles(&c.s, 64, 64, 16);
	c.T = 65;
	check_case(&c, 1e-5);
	c.s.lda = 77;
	c.s.ldc = 101;
	c.s.ldb = 79;
	check_case(&c, 1e-5);
	c.s.b_layout = CG_B_KN;			/* B [75, 100] with ldb 103 */
	c.s.ldb = 103;
	check_case(&c, 1e-5);
	c.s.N = 6;					/* split-K, N tail inside the pair tile */
	c.s.ldb = 0;
	c.s.ldc = 0;
	c.s.ep.n = 0;
	tiles(&c.s, 5, 6, 16);
	c.T = 11;
	check_case(&c, 1e-5);
}
END_TEST

/* The routers: [T,4096] x [4096,8], f32 and bf16 operands, T ragged and tiny. */
START_TEST(test_simt_router_n8)
{
	Case c = {0};

	spec_router8(&c.s, DT_F32, DT_F32);
	ck_assert_int_eq(c.s.bm * c.s.bn, 32);
	c.T = 19;
	check_case(&c, 1e-5);
	c.T = 1;
	check_case(&c, 1e-5);
	spec_router8(&c.s, DT_BF16, DT_BF16);
	c.T = 16;
	check_case(&c, 1e-5);
	spec_router8(&c.s, DT_BF16, DT_F32);		/* mixed */
	c.s.K = 1001;					/* odd K: scalar loads */
	c.T = 5;
	check_case(&c, 1e-5);
	spec_router8(&c.s, DT_F32, DT_F32);		/* B [K,N] */
	c.s.b_layout = CG_B_KN;
	c.s.K = 512;
	c.T = 23;
	check_case(&c, 1e-5);
}
END_TEST

START_TEST(test_simt_dense_zero_rows)
{
	Case c = {0};

	spec_f32(&c.s, 64, 32);
	tiles(&c.s, 64, 64, 16);
	c.T = 0;
	check_case(&c, 1e-5);
}
END_TEST

START_TEST(test_simt_grouped_swiglu_gather_empty_experts)
{
	Case c = {0};
	int counts[8] = {0, 37, 1, 0, 0, 70, 12, 0};	/* sum 120 = 2 * 60 */

	spec_grouped_swiglu(&c.s, 8, 96, 72, 2, DT_F32);	/* N tail in the 64-wide tile, K tail */
	tiles(&c.s, 32, 64, 16);
	c.T = 60;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-5);
	tiles(&c.s, 4, 8, 16);				/* split-K */
	check_case(&c, 1e-5);
	c.s.N = 12;
	tiles(&c.s, 2, 12, 16);
	check_case(&c, 1e-5);
}
END_TEST

/* gpt-oss's clamped swiglu over a per-expert bias, bf16 in, f32 out. */
START_TEST(test_simt_grouped_gpt_oss_swiglu_bias)
{
	Case c = {0};
	int counts[4] = {9, 0, 30, 1};
	int a, b;

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 64;
	c.s.c_dt = DT_F32;
	c.s.groups = 4;
	a = cg_ep_acc(&c.s.ep);
	b = cg_ep_col(&c.s.ep, DT_BF16, 128, "bias");
	cg_ep_swiglu(&c.s.ep, cg_ep_op(&c.s.ep, CGE_ADD, a, b), 7.0f, 1.702f);
	tiles(&c.s, 32, 64, 16);
	c.T = 40;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-5);
}
END_TEST

START_TEST(test_simt_grouped_route_weight_scatter)
{
	Case c = {0};
	int counts[8] = {3, 0, 40, 0, 1, 19, 0, 1};	/* 64 */

	spec_grouped_scale_scatter(&c.s, 8, 72, 136, DT_F32);
	tiles(&c.s, 32, 64, 16);
	c.T = 64;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-5);
	c.s.sched = CG_SCHED_PERSISTENT;		/* few CTAs striding over the tiles */
	c.s.ctas = 5;
	check_case(&c, 1e-5);
	tiles(&c.s, 8, 4, 16);				/* split-K */
	check_case(&c, 1e-5);
}
END_TEST

/* 40 experts (the table's scan crosses warps), some empty, and T = 0. */
START_TEST(test_simt_grouped_many_experts)
{
	Case c = {0};

	spec_grouped_scale_scatter(&c.s, 40, 64, 32, DT_F32);
	tiles(&c.s, 32, 32, 8);
	c.T = 0;
	for (int e = 0; e < 40; e++) {
		c.counts[e] = (e % 3 == 0) ? 0 : (e % 7) * 3;
		c.T += c.counts[e];
	}
	check_case(&c, 1e-5);
	memset(c.counts, 0, sizeof c.counts);
	c.T = 0;
	check_case(&c, 1e-5);
}
END_TEST

/* bf16 and f16 operands, in mixes the tensor cores cannot take. */
START_TEST(test_simt_mixed_bf16_inputs)
{
	Case c = {0};
	int a, r, s;

	spec_f32(&c.s, 160, 200);
	c.s.a_dt = DT_BF16;
	c.s.b_dt = DT_BF16;
	c.s.c_dt = DT_BF16;
	bias_gelu(&c.s, DT_BF16);
	tiles(&c.s, 64, 128, 16);
	c.T = 50;
	check_case(&c, 1e-2);				/* bf16 output */
	c.s.c_dt = DT_F32;
	check_case(&c, 1e-5);				/* exact f32 sums of bf16 products */
	c.s.b_dt = DT_F16;				/* bf16 x f16 */
	check_case(&c, 1e-5);
	c.s.a_dt = DT_F32;				/* f32 x bf16, B [K,N], residual */
	c.s.b_dt = DT_BF16;
	c.s.b_layout = CG_B_KN;
	c.s.ep.n = 0;
	a = cg_ep_acc(&c.s.ep);
	r = cg_ep_mat(&c.s.ep, DT_F16, 0, CGR_DIRECT, "residual");
	s = cg_ep_op(&c.s.ep, CGE_ADD, a, r);
	cg_ep_clamp(&c.s.ep, cg_ep_op(&c.s.ep, CGE_SILU, s, -1), -0.5f, 2.0f);
	tiles(&c.s, 64, 64, 32);
	check_case(&c, 1e-5);
}
END_TEST

Suite *
gemm_simt_suite(void)
{
	Suite *s = suite_create("gemm_simt");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_simt_rejects_bad_specs);
	tcase_add_test(t, test_simt_tile_choice);
	tcase_add_test(t, test_simt_params_match_tensor_core_builder);
	tcase_add_loop_test(t, test_simt_ptx_assembles_on_target, 0, (int)NELEM(targets));
	tcase_add_test(t, test_simt_f32_exact);
	tcase_add_test(t, test_simt_f32_dense_bias_gelu_ragged_m);
	tcase_add_test(t, test_simt_tails_and_odd_leading_dims);
	tcase_add_test(t, test_simt_router_n8);
	tcase_add_test(t, test_simt_dense_zero_rows);
	tcase_add_test(t, test_simt_grouped_swiglu_gather_empty_experts);
	tcase_add_test(t, test_simt_grouped_gpt_oss_swiglu_bias);
	tcase_add_test(t, test_simt_grouped_route_weight_scatter);
	tcase_add_test(t, test_simt_grouped_many_experts);
	tcase_add_test(t, test_simt_mixed_bf16_inputs);
	suite_add_tcase(s, t);
	return s;
}
