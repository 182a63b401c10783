/*
 * check_codegen.c — targets, size expressions, epilogue programs, the GEMM
 * builder's checks and parameter lists, PTX for sm_80 / sm_90 / sm_90a
 * assembled by ptxas (skipped with a message when there is no ptxas), and
 * the GEMM kernels run on the CPU emulator against a host reference in
 * double on random inputs (outputs poisoned with NaN first).
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

static void *
rand_tensor(DType dt, size_t n, double scale)
{
	void *p = calloc(n ? n : 1, (size_t)(dt == DT_F32 ? 4 : 2));

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

/* ---- a GEMM case: inputs, the emulator run, the reference ---- */

typedef struct Case Case;
struct Case {
	GemmSpec s;
	int T;
	int counts[64];		/* grouped: rows per expert (sum = M) */
};

static double
ld(DType dt, const void *p, size_t i)
{
	return dtype_load(dt, p, i);
}

/* Run c on the emulator; returns the relative L2 error, or -1 (why in msg). */
static double
run_case(const Case *c, char *msg, size_t nmsg)
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
	size_t leafn[CG_EP_MAX] = {0};
	uint64_t args[8 + CG_EP_MAX];
	CgEmuBuf buf[8 + CG_EP_MAX];
	int na = 0, nb = 0;
	double err2 = 0, ref2 = 0;

	diag_init(&d, NULL);
	msg[0] = 0;
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
		snprintf(msg, nmsg, "emit: %s", d.last);
		cg_module_free(m);
		return -1;
	}
	k = cg_module_find(m, "g");

	A = rand_tensor(s.a_dt, (size_t)msrc * lda, 1.0);
	B = rand_tensor(s.b_dt, (size_t)((E - 1) * bstride + rows_b * ldb), 1.0 / sqrt((double)s.K));
	C = malloc((size_t)M * ldc * (s.c_dt == DT_F32 ? 4 : 2));
	memset(C, 0xff, (size_t)M * ldc * (s.c_dt == DT_F32 ? 4 : 2));	/* NaN */
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
			return -1;
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
		if (n) {
			leaf[i] = rand_tensor(in->dt, n, 1.0);
			leafn[i] = n * (in->dt == DT_F32 ? 4 : 2);
		}
	}

	/* arguments in the kernel's order */
#define ARG(p, bytes) (buf[nb++] = (CgEmuBuf){(p), (bytes)}, args[na++] = (uint64_t)(uintptr_t)(p))
	ARG(A, (size_t)msrc * lda * (s.a_dt == DT_F32 ? 4 : 2));
	if (s.gather)
		ARG(gidx, sizeof(int) * (size_t)M);
	ARG(B, (size_t)((E - 1) * bstride + rows_b * ldb) * (s.b_dt == DT_F32 ? 4 : 2));
	ARG(C, (size_t)M * ldc * (s.c_dt == DT_F32 ? 4 : 2));
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
			snprintf(msg, nmsg, "%s", d.last);
			cg_module_free(m);
			return -1;
		}
	}

	/* reference in double */
	for (int r = 0; r < M; r++) {
		int e = 0, srow = s.gather ? gidx[r] / div : r, drow = sidx ? sidx[r] : r;
		double acc[1024];
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
				snprintf(msg, nmsg, "C[%d,%lld] not written (row %d, expert %d)", drow,
					 (long long)co, r, e);
				cg_module_free(m);
				return -1;
			}
			err2 += (got - want) * (got - want);
			ref2 += want * want;
		}
	}
	cg_module_free(m);
	free(A);
	free(B);
	free(C);
	free(gidx);
	free(sidx);
	free(offs);
	for (int i = 0; i < s.ep.n; i++)
		free(leaf[i]);
	return ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
}

static void
check_case(const Case *c, double tol)
{
	char msg[600];
	double e;

	rng_state = 12345;
	e = run_case(c, msg, sizeof msg);
	ck_assert_msg(e >= 0, "%s", msg);
	ck_assert_msg(e < tol, "relative L2 error %g >= %g", e, tol);
}

/* ---- specs used by several tests ---- */

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

static void
tiles(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st)
{
	s->bm = bm;
	s->bn = bn;
	s->bk = bk;
	s->warps_m = wm;
	s->warps_n = wn;
	s->stages = st;
}

/* ---- tests: targets and expressions ---- */

START_TEST(test_target_caps)
{
	CgTarget a = {"sm_80", NULL, 3}, h = {"sm_90", NULL, 3}, ha = {"sm_90a", NULL, 3};
	CgTarget bad = {"sm_12", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	ck_assert(cg_target_has(&a, CG_MMA_BF16 | CG_CP_ASYNC | CG_LDMATRIX));
	ck_assert(!cg_target_has(&a, CG_WGMMA));
	ck_assert(!cg_target_has(&a, CG_TMA));
	ck_assert(cg_target_has(&h, CG_TMA));
	ck_assert(!cg_target_has(&h, CG_WGMMA));
	ck_assert(!cg_target_has(&h, CG_SETMAXNREG));
	ck_assert(cg_target_has(&ha, CG_WGMMA | CG_SETMAXNREG | CG_TMA | CG_MMA_BF16));
	ck_assert_int_eq(cg_require(&a, CG_WGMMA, "a test", &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "wgmma"));
	ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
	ck_assert_int_eq(cg_target_check(&bad, &d), -1);
	ck_assert_ptr_null(cg_module_new(&bad, "x", &d));
}
END_TEST

START_TEST(test_expr_print_matches_bundle_grammar)
{
	char b[64];

	cg_expr_print(b, sizeof b, CG_EXPR_INT(132));
	ck_assert_str_eq(b, "132");
	cg_expr_print(b, sizeof b, (CgExpr){1, 0, 0});
	ck_assert_str_eq(b, "T");
	cg_expr_print(b, sizeof b, (CgExpr){2, 0, 0});
	ck_assert_str_eq(b, "2*T");
	cg_expr_print(b, sizeof b, (CgExpr){2, 889, 128});
	ck_assert_str_eq(b, "cdiv(2*T+889,128)");
	cg_expr_print(b, sizeof b, (CgExpr){1, 0, 128});
	ck_assert_str_eq(b, "cdiv(T,128)");
	ck_assert_int_eq(cg_expr_eval((CgExpr){2, 889, 128}, 4096), (2 * 4096 + 889 + 127) / 128);
}
END_TEST

/* ---- epilogue programs ---- */

START_TEST(test_epilogue_check_rejects_bad_programs)
{
	CgEpilogue e;
	Diag d;
	int a;

	diag_init(&d, NULL);
	memset(&e, 0, sizeof e);
	a = cg_ep_acc(&e);
	cg_ep_op(&e, CGE_ADD, a, 5);
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not an earlier"));

	memset(&e, 0, sizeof e);
	a = cg_ep_acc(&e);
	cg_ep_swiglu(&e, a, 0, 0);
	cg_ep_op(&e, CGE_ADD, a, 1);	/* uses acc from the input column space */
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "column space"));

	memset(&e, 0, sizeof e);
	a = cg_ep_acc(&e);
	cg_ep_op(&e, CGE_ADD, a, cg_ep_col(&e, DT_I32, 0, "bias"));
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);

	memset(&e, 0, sizeof e);
	cg_ep_clamp(&e, cg_ep_acc(&e), 3, -3);
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);
}
END_TEST

START_TEST(test_epilogue_print)
{
	GemmSpec s;
	char b[256];

	spec_dense_bias_gelu(&s, 128, 64);
	cg_ep_print(b, sizeof b, &s.ep);
	ck_assert_str_eq(b, "e0=acc e1=bias[n]:bf16 e2=add(e0,e1) e3=gelu_erf(e2)");
}
END_TEST

START_TEST(test_epilogue_reference_values)
{
	CgEpInst in;

	memset(&in, 0, sizeof in);
	in.op = CGE_GELU_ERF;
	ck_assert(fabs(cg_ep_eval1(&in, 1.0, 0) - 0.8413447460685429) < 1e-12);
	in.op = CGE_GELU_TANH;
	ck_assert(fabs(cg_ep_eval1(&in, 1.0, 0) - 0.8411919906082768) < 1e-12);
	in.op = CGE_SWIGLU;
	ck_assert(fabs(cg_ep_eval1(&in, 2.0, 3.0) - 2.0 / (1 + exp(-2.0)) * 3.0) < 1e-12);
	in.lim = 7;
	in.alpha = 1.702f;
	/* gate clipped to 7, up clipped to 7: (7 + 1) * 7 * sigmoid(1.702 * 7) */
	ck_assert(fabs(cg_ep_eval1(&in, 9.0, 9.0) - 8 * 7 / (1 + exp(-1.702 * 7))) < 1e-5);
}
END_TEST

/* ---- the GEMM builder's checks and kernel descriptions ---- */

START_TEST(test_gemm_params_and_geometry)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *k;
	char b[64];

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	spec_grouped_swiglu(&s, 8, 256, 128, 2);
	s.store = CG_STORE_SCATTER;
	cg_ep_op(&s.ep, CGE_MUL, 1, cg_ep_row(&s.ep, DT_F32, CGR_GATHER_RAW, "route_w"));
	ck_assert_int_eq(cg_emit_gemm(m, "moe_up", &s, &d), 0);
	k = cg_module_find(m, "moe_up");
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(k->nparam, 8);
	ck_assert_str_eq(k->param[0].role, "A");
	ck_assert_str_eq(k->param[1].role, "gather_idx");
	ck_assert_str_eq(k->param[2].role, "B");
	ck_assert_str_eq(k->param[3].role, "C");
	ck_assert_str_eq(k->param[4].role, "scatter_idx");
	ck_assert_str_eq(k->param[5].role, "offsets");
	ck_assert_str_eq(k->param[6].role, "route_w");
	ck_assert_str_eq(k->param[7].role, "T");
	ck_assert_int_eq(k->param[7].kind, CGP_I32);
	ck_assert_str_eq(cg_param_kind_name(k->param[0].kind), "ptr");
	ck_assert_int_eq(k->block[0], 256);
	cg_expr_print(b, sizeof b, k->grid[0]);
	ck_assert_str_eq(b, "cdiv(2*T+1016,128)");	/* M = 2T rows, + E*(bm-1) */
	cg_expr_print(b, sizeof b, k->grid[1]);
	ck_assert_str_eq(b, "2");
	ck_assert_int_eq(k->smem, cg_gemm_smem(&s));
	ck_assert_ptr_nonnull(strstr(k->note, "grouped E=8"));
	cg_module_free(m);
}
END_TEST

START_TEST(test_gemm_rejects_bad_specs)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_dense_bias_gelu(&s, 100, 64);		/* N % bn */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "pad the weight"));
	spec_dense_bias_gelu(&s, 128, 64);
	s.a_dt = DT_F16;				/* f16 x bf16 */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	spec_dense_bias_gelu(&s, 256, 64);
	tiles(&s, 128, 256, 64, 2, 4, 5);		/* 5 stages x 55 KB */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "shared memory"));
	spec_dense_bias_gelu(&s, 128, 64);
	cg_ep_op(&s.ep, CGE_MUL, 3, cg_ep_row(&s.ep, DT_F32, CGR_SCATTER, "w"));
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not scattered"));
	spec_dense_bias_gelu(&s, 128, 64);
	s.lda = 60;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
}
END_TEST

/* Asking for a Hopper-only feature on sm_80: a diagnostic, no abort. */
START_TEST(test_hopper_feature_on_sm80_is_a_diagnostic)
{
	CgTarget t80 = {"sm_80", NULL, 3}, t90 = {"sm_90", NULL, 3}, t90a = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;
	CgModule *m;
	size_t n;
	const char *ptx;

	diag_init(&d, NULL);
	spec_dense_bias_gelu(&s, 128, 64);
	s.mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_int_eq(cg_gemm_check(&t80, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "wgmma"));

	m = cg_module_new(&t80, "h", &d);
	ck_assert_int_eq(cg_emit_probe(m, "regs", CG_SETMAXNREG, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "setmaxnreg"));
	ck_assert_int_eq(cg_emit_probe(m, "fence", CG_WGMMA, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
	ck_assert_int_eq(cg_module_nkernel(m), 0);
	/* the module is still usable: the failed kernels are gone */
	ck_assert_int_eq(cg_emit_gemm(m, "ok", &s, &d), -1);	/* wgmma: refused */
	s.mainloop = CG_MAINLOOP_MMA;
	ck_assert_int_eq(cg_emit_gemm(m, "ok", &s, &d), 0);
	ck_assert_int_eq(cg_emit_probe(m, "cpa", CG_CP_ASYNC, &d), 0);
	ptx = cg_module_ptx(m, &n, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_null(strstr(ptx, "regs"));
	cg_module_free(m);

	m = cg_module_new(&t90, "h", &d);	/* plain sm_90 lacks it too */
	ck_assert_int_eq(cg_emit_probe(m, "regs", CG_SETMAXNREG, &d), -1);
	cg_module_free(m);

	/* on sm_90a the same kernels are fine */
	m = cg_module_new(&t90a, "h", &d);
	ck_assert_int_eq(cg_emit_probe(m, "regs", CG_SETMAXNREG, &d), 0);
	ck_assert_int_eq(cg_emit_probe(m, "fence", CG_WGMMA, &d), 0);
	ptx = cg_module_ptx(m, &n, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32"));
	ck_assert_ptr_nonnull(strstr(ptx, "wgmma.fence.sync.aligned"));
	cg_module_free(m);
}
END_TEST

/* ---- PTX and ptxas on the three targets ---- */

static int
count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)) != NULL; p++)
		n++;
	return n;
}

/* The specs every target must emit and assemble. */
static int
suite_specs(GemmSpec *s)
{
	int n = 0, a, r;

	spec_dense_bias_gelu(&s[n], 1024, 512);		/* 128x128x32 2x4 s4 */
	n++;
	spec_dense_bias_gelu(&s[n], 1024, 512);		/* the prefill tile */
	tiles(&s[n], 128, 256, 32, 2, 4, 4);
	s[n].min_ctas = 1;
	n++;
	spec_grouped_swiglu(&s[n], 8, 1024, 512, 2);	/* decode tile, persistent */
	tiles(&s[n], 16, 128, 64, 1, 4, 4);
	s[n].sched = CG_SCHED_PERSISTENT;
	n++;
	spec_grouped_scale_scatter(&s[n], 8, 512, 1024);
	n++;
	cg_gemm_default(&s[n]);				/* f16, B [K,N], residual */
	s[n].N = 512;
	s[n].K = 256;
	s[n].a_dt = s[n].b_dt = s[n].c_dt = DT_F16;
	s[n].b_layout = CG_B_KN;
	a = cg_ep_acc(&s[n].ep);
	r = cg_ep_mat(&s[n].ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s[n].ep, CGE_ADD, a, r);
	tiles(&s[n], 64, 128, 64, 2, 2, 3);
	n++;
	return n;
}

START_TEST(test_ptx_assembles_on_target)
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
	m = cg_module_new(&t, "suite", &d);
	ck_assert_ptr_nonnull(m);
	for (int i = 0; i < ns; i++) {
		snprintf(name, sizeof name, "k%d", i);
		ck_assert_msg(cg_emit_gemm(m, name, &s[i], &d) == 0, "%s: %s", name, d.last);
	}
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_msg(ptx != NULL, "%s", d.last);
	ck_assert_int_eq(count(ptx, ".entry"), ns);
	ck_assert(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") > 0);
	ck_assert(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") > 0);
	ck_assert(count(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16") > 0);
	ck_assert(count(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") > 0);
	ck_assert(count(ptx, "cp.async.cg.shared.global") > 0);
	ck_assert(count(ptx, "cp.async.wait_group") > 0);
	ck_assert(count(ptx, ".maxntid") == ns);
	if (!cg_ptxas_path()) {
		fprintf(stderr, "check_codegen: no ptxas; PTX for %s not assembled (skipped)\n", sm);
		cg_module_free(m);
		return;
	}
	ck_assert_msg(cg_module_assemble(m, 1, &r, &d) == 0, "%s", d.last);
	ck_assert_int_eq(r.n, ns);
	ck_assert(r.cubin_len > 0);
	for (int i = 0; i < ns; i++) {
		const CgKernel *k = cg_module_kernel(m, i);
		ck_assert_msg(k->regs > 0, "%s: no register count", k->name);
		ck_assert_int_ge(k->spill_stores, 0);
		ck_assert_int_ge(k->spill_loads, 0);
		ck_assert_msg(k->regs <= 255, "%s: %d registers", k->name, k->regs);
		if (getenv("MOEC_CG_VERBOSE"))
			fprintf(stderr, "%s %s: %d regs, %d/%d spill, smem %d: %s\n", sm, k->name,
				k->regs, k->spill_stores, k->spill_loads, k->smem, k->note);
	}
	cg_ptxas_free(&r);
	cg_module_free(m);
}
END_TEST

START_TEST(test_ptxas_reports_errors)
{
	Diag d;
	CgPtxasResult r;
	const char *bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry x() { bogus; }\n";

	if (!cg_ptxas_path())
		return;
	diag_init(&d, NULL);
	ck_assert_int_eq(cg_ptxas(bad, strlen(bad), "sm_90", 0, &r, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "ptxas"));
	cg_ptxas_free(&r);
}
END_TEST

/* ---- the GEMM on the CPU emulator ---- */

START_TEST(test_emu_dense_bias_gelu_ragged_m)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 256, 96);
	tiles(&c.s, 64, 128, 32, 2, 2, 3);
	c.T = 77;		/* not a multiple of bm */
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_dense_prefill_tile)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 256, 64);
	tiles(&c.s, 128, 256, 32, 2, 4, 4);
	c.T = 130;
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_dense_plain_mainloop)
{
	Case c = {0};

	spec_dense_bias_gelu(&c.s, 128, 160);
	tiles(&c.s, 64, 64, 32, 2, 2, 3);
	c.s.no_frag_pipe = 1;
	c.T = 70;
	check_case(&c, 1e-2);
	tiles(&c.s, 64, 64, 32, 2, 2, 2);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_kn_layout_tanh_f32_out)
{
	Case c = {0};
	int a, b;

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 128;
	c.s.b_layout = CG_B_KN;
	c.s.c_dt = DT_F32;
	a = cg_ep_acc(&c.s.ep);
	b = cg_ep_col(&c.s.ep, DT_F32, 0, "bias");
	cg_ep_op(&c.s.ep, CGE_GELU_TANH, cg_ep_op(&c.s.ep, CGE_ADD, a, b), -1);
	tiles(&c.s, 64, 64, 64, 2, 2, 2);
	c.T = 70;
	check_case(&c, 1e-4);
}
END_TEST

START_TEST(test_emu_f16_residual_bk16_5_stages)
{
	Case c = {0};
	int a, r, s;

	cg_gemm_default(&c.s);
	c.s.N = 64;
	c.s.K = 160;
	c.s.a_dt = c.s.b_dt = c.s.c_dt = DT_F16;
	a = cg_ep_acc(&c.s.ep);
	r = cg_ep_mat(&c.s.ep, DT_F16, 0, CGR_DIRECT, "residual");
	s = cg_ep_op(&c.s.ep, CGE_ADD, a, r);
	cg_ep_clamp(&c.s.ep, cg_ep_op(&c.s.ep, CGE_SILU, s, -1), -0.5f, 2.0f);
	tiles(&c.s, 32, 64, 16, 1, 2, 5);
	c.T = 40;
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_f32_inputs_convert_in_the_load)
{
	Case c = {0};

	cg_gemm_default(&c.s);
	c.s.N = 64;
	c.s.K = 64;
	c.s.a_dt = DT_F32;
	c.s.b_dt = DT_F32;
	c.s.c_dt = DT_F32;
	tiles(&c.s, 32, 64, 32, 2, 2, 3);
	c.T = 33;
	check_case(&c, 1e-2);	/* bf16 rounding of the inputs */
}
END_TEST

START_TEST(test_emu_grouped_swiglu_gather_skewed_and_empty)
{
	Case c = {0};
	int counts[8] = {0, 37, 1, 0, 0, 70, 12, 0};	/* sum 120 = 2 * 60 */

	spec_grouped_swiglu(&c.s, 8, 128, 64, 2);
	tiles(&c.s, 32, 64, 32, 2, 2, 3);
	c.T = 60;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_decode_tile_persistent)
{
	Case c = {0};
	int counts[8] = {5, 0, 3, 2, 11, 0, 7, 4};	/* 32 = 2 * 16 */

	spec_grouped_swiglu(&c.s, 8, 256, 128, 2);
	tiles(&c.s, 16, 128, 64, 1, 4, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 7;
	c.T = 16;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_bk128_tiles)
{
	Case c = {0};
	int counts[8] = {0, 9, 0, 0, 14, 0, 0, 1};	/* 24 = 2 * 12 */

	spec_grouped_swiglu(&c.s, 8, 128, 256, 2);
	tiles(&c.s, 16, 64, 128, 1, 4, 3);
	c.T = 12;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_gpt_oss_swiglu_bias)
{
	Case c = {0};
	int counts[4] = {9, 0, 30, 1};
	int a, b;

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 64;
	c.s.groups = 4;
	a = cg_ep_acc(&c.s.ep);
	b = cg_ep_col(&c.s.ep, DT_BF16, 128, "bias");	/* per-expert bias */
	cg_ep_swiglu(&c.s.ep, cg_ep_op(&c.s.ep, CGE_ADD, a, b), 7.0f, 1.702f);
	tiles(&c.s, 16, 64, 32, 1, 2, 2);
	c.T = 40;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_scale_scatter)
{
	Case c = {0};
	int counts[8] = {3, 0, 40, 0, 1, 19, 0, 1};	/* 64 */

	spec_grouped_scale_scatter(&c.s, 8, 64, 128);
	tiles(&c.s, 32, 64, 32, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	c.T = 64;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_many_experts_table)
{
	/* 40 experts: the shuffle scan crosses warps (32 per warp) */
	Case c = {0};

	spec_grouped_scale_scatter(&c.s, 40, 64, 32);
	tiles(&c.s, 16, 64, 32, 1, 2, 2);
	c.T = 0;
	for (int e = 0; e < 40; e++) {
		c.counts[e] = (e % 3 == 0) ? 0 : (e % 7) * 3;
		c.T += c.counts[e];
	}
	check_case(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_all_rows_one_expert_and_zero_rows)
{
	Case c = {0};

	spec_grouped_swiglu(&c.s, 4, 64, 32, 1);
	tiles(&c.s, 16, 64, 32, 1, 2, 2);
	c.T = 21;
	c.counts[3] = 21;
	check_case(&c, 1e-2);
	c.T = 0;		/* no rows: nothing runs, nothing breaks */
	c.counts[3] = 0;
	check_case(&c, 1e-2);
}
END_TEST

Suite *
codegen_suite(void)
{
	Suite *s = suite_create("codegen");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_target_caps);
	tcase_add_test(t, test_expr_print_matches_bundle_grammar);
	tcase_add_test(t, test_epilogue_check_rejects_bad_programs);
	tcase_add_test(t, test_epilogue_print);
	tcase_add_test(t, test_epilogue_reference_values);
	tcase_add_test(t, test_gemm_params_and_geometry);
	tcase_add_test(t, test_gemm_rejects_bad_specs);
	tcase_add_test(t, test_hopper_feature_on_sm80_is_a_diagnostic);
	tcase_add_loop_test(t, test_ptx_assembles_on_target, 0, (int)NELEM(targets));
	tcase_add_test(t, test_ptxas_reports_errors);
	tcase_add_test(t, test_emu_dense_bias_gelu_ragged_m);
	tcase_add_test(t, test_emu_dense_prefill_tile);
	tcase_add_test(t, test_emu_dense_plain_mainloop);
	tcase_add_test(t, test_emu_kn_layout_tanh_f32_out);
	tcase_add_test(t, test_emu_f16_residual_bk16_5_stages);
	tcase_add_test(t, test_emu_f32_inputs_convert_in_the_load);
	tcase_add_test(t, test_emu_grouped_swiglu_gather_skewed_and_empty);
	tcase_add_test(t, test_emu_grouped_decode_tile_persistent);
	tcase_add_test(t, test_emu_grouped_bk128_tiles);
	tcase_add_test(t, test_emu_grouped_gpt_oss_swiglu_bias);
	tcase_add_test(t, test_emu_grouped_scale_scatter);
	tcase_add_test(t, test_emu_grouped_many_experts_table);
	tcase_add_test(t, test_emu_grouped_all_rows_one_expert_and_zero_rows);
	suite_add_tcase(s, t);
	return s;
}
