/*
 * check_gemm_mixed.c — GEMMs with a quantised B (GemmSpec.bq,
 * codegen/k_gemm_mixed.c): the compile-time repack's layout read back
 * against its definition, the spec checks, PTX through ptxas, and GEMMs
 * on the emulator for every format against a reference in double that
 * dequantises the IR-layout weights as the dequantize op does (then rounds
 * to A's type, what the mma reads) — odd T, group edges inside and across
 * k-tiles, zero points, grouped experts with empty ones, f16.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"

/* bf16 [T,K] x quantised [N,K]^T, f32 out, no epilogue */
static void
spec_q(GemmSpec *s, DType b_dt, int64_t N, int64_t K, int group, DType scale_dt, int zero)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->b_dt = b_dt;
	s->c_dt = DT_F32;
	s->bq.group = group;
	s->bq.scale_dt = scale_dt;
	s->bq.zero = zero;
	gh_tiles(s, 16, 128, 64, 1, 4, 4);	/* the decode tile */
}

/* Split-K into S slices for launches of up to T tokens (program.c's split_slots). */
static void
split(GemmSpec *s, int S, int T)
{
	int64_t mpt = s->m_per_t > 0 ? s->m_per_t : 1, groups = s->groups > 0 ? s->groups : 0;

	s->split_k = S;
	s->split_slots = (int)((mpt * T + groups * (s->bm - 1) + s->bm - 1) / s->bm * (s->N / s->bn));
}

/* ---- the layout ---- */

/* Element (e, n, k) of the packed B, read back by the layout's definition:
 * a field's bits contiguous at 16(el & 1) + bits(2s + (el >> 1)), but for
 * e2m1, whose field f = 2s + (el >> 1) has its bits 0..3 (m, e0, e1, sign)
 * at these bits of the word for the low half's element, plus 16 (mod 32)
 * for the high half's (docs/codegen.md); v1: session 24's layout. */
static unsigned
packed_at(const unsigned char *b, DType dt, int v1, int vec, int64_t N, int64_t K, int64_t e, int64_t n, int64_t k)
{
	static const int e2m1[4][4] = {{6, 7, 8, 15}, {2, 3, 4, 11}, {28, 29, 30, 5}, {0, 25, 26, 1}};
	static const int e2m1_v1[4][4] = {{6, 7, 8, 15}, {0, 1, 2, 9}, {3, 4, 5, 12}, {10, 11, 13, 14}};
	int bits = dtype_bits(dt);
	int64_t ka = 128 / bits, kb = k / ka, r = k % ka, s = r / 16, c = r % 16;
	int t = (int)(c % 8) / 2, el = (int)(c % 2) + 2 * (int)(c / 8), lane = (int)(n % 8) * 4 + t;
	/* lane vectors: the lane's words of vec atoms adjacent, the 32 lanes' vectors in turn */
	const unsigned char *w = b + ((e * N / 8 + n / 8) * (K / ka) + kb / vec * vec) * 128 + (lane * vec + kb % vec) * 4;
	uint32_t word = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
	unsigned v = 0;

	if (dt != DT_F4E2M1)
		return (word >> (16 * (el & 1) + bits * (2 * s + (el >> 1)))) & ((1u << bits) - 1);
	for (int i = 0; i < 4; i++)
		v |= (word >> ((16 * (el & 1) + (v1 ? e2m1_v1 : e2m1)[2 * s + (el >> 1)][i]) % 32) & 1u) << i;
	return v;
}

static void
check_pack(DType dt, int64_t N, int64_t K, int E, int group, int v1, int vec)
{
	GemmSpec s;
	size_t n = (size_t)E * (size_t)(N * K), ng = n / (size_t)group;
	unsigned char *q = calloc(dtype_bytes(dt, n) + 1, 1);
	unsigned char *sc = calloc(ng * 2 + 1, 1), *z = calloc(ng + 1, 1);
	void *b, *bs, *bz;
	int bits = dtype_bits(dt);
	Diag d;

	spec_q(&s, dt, N, K, group, DT_BF16, 1);
	s.bq.v1 = v1;
	s.bq.vec = vec;
	gh_seed(7);
	for (size_t i = 0; i < dtype_bytes(dt, n); i++)
		q[i] = (unsigned char)((gh_urand() + 1) * 128);
	for (size_t i = 0; i < ng; i++) {
		dtype_store(DT_BF16, sc, i, (double)i);
		dtype_store(DT_U8, z, i, (double)(i % 251));
	}
	b = calloc(cg_bq_bytes(&s, E, 0), 1);
	bs = calloc(cg_bq_bytes(&s, E, 1), 1);
	bz = calloc(cg_bq_bytes(&s, E, 2), 1);
	ck_assert_uint_eq(cg_bq_bytes(&s, E, 0), dtype_bytes(dt, n));
	diag_init(&d, NULL);
	ck_assert_int_eq(cg_bq_pack(&s, E, q, sc, z, DT_U8, 0, b, bs, bz, &d), 0);
	for (int64_t e = 0; e < E; e++)
		for (int64_t nn = 0; nn < N; nn++)
			for (int64_t k = 0; k < K; k++) {
				size_t i = (size_t)((e * N + nn) * K + k);
				unsigned want = bits == 4 ? (q[i / 2] >> (4 * (i & 1))) & 15u : q[i];
				ck_assert_uint_eq(packed_at(b, dt, v1, vec > 1 ? vec : 1, N, K, e, nn, k), want);
			}
	/* scales and zero points [E][K/group][N] */
	for (int64_t e = 0; e < E; e++)
		for (int64_t nn = 0; nn < N; nn++)
			for (int64_t g = 0; g < K / group; g++) {
				size_t from = (size_t)((e * N + nn) * (K / group) + g);
				size_t to = (size_t)((e * (K / group) + g) * N + nn);
				ck_assert(dtype_load(DT_BF16, bs, to) == dtype_load(DT_BF16, sc, from));
				ck_assert(dtype_load(DT_BF16, bz, to) == (double)(from % 251));
			}
	free(q);
	free(sc);
	free(z);
	free(b);
	free(bs);
	free(bz);
}

START_TEST(test_pack_layout)
{
	check_pack(DT_I4, 16, 64, 1, 32, 0, 0);
	check_pack(DT_U4, 24, 96, 2, 16, 0, 0);
	check_pack(DT_F8E4M3, 16, 48, 3, 16, 0, 0);
	check_pack(DT_U8, 8, 32, 1, 32, 0, 0);
	check_pack(DT_F4E2M1, 16, 64, 2, 32, 0, 0);
	check_pack(DT_F4E2M1, 16, 64, 2, 32, 1, 0);	/* session 24's, --debug=bq-v1 */
	/* lane vectors of 2 and 4 atoms (CgBQuant.vec) */
	check_pack(DT_I4, 16, 128, 2, 32, 0, 2);
	check_pack(DT_U4, 24, 256, 1, 64, 0, 4);
	check_pack(DT_F8E4M3, 16, 96, 2, 16, 0, 2);
	check_pack(DT_F4E2M1, 16, 192, 3, 32, 0, 2);
}
END_TEST

/* ---- the layout generated on the device (synthetic weights) ---- */

/* Part `which` of the repacked synthetic weight w, generated by the
 * cg_emit_synth_bq kernel on the emulator (grid 3: every thread loops). */
static unsigned char *
synth_on_emu(const GemmSpec *s, int E, int il, int which, Weight *w)
{
	CgTarget t = {"emu", NULL, 3};
	size_t bytes = cg_bq_bytes(s, E, which);
	unsigned char *out = malloc(bytes + 1);
	uint64_t args[6];
	float mean = (float)w->mean, scale = (float)ir_weight_scale(w);
	CgEmuBuf buf = {out, bytes};
	CgEmuLaunch l = {{3, 1, 1}, {256, 1, 1}, 0, args, 6, &buf, 1};
	CgModule *m;
	Diag d;

	diag_init(&d, stderr);
	m = cg_module_new(&t, "synth", &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(cg_emit_synth_bq(m, "sq", s, E, il, which, w->value->type.dt, w->row_block, &d) == 0, "%s",
		      d.last);
	memset(out, 0xa5, bytes);
	args[0] = (uint64_t)(uintptr_t)out;
	args[1] = w->seed;
	args[2] = hash_str(w->value->name);
	args[3] = 0, args[4] = 0;
	memcpy(&args[3], &mean, 4);
	memcpy(&args[4], &scale, 4);
	args[5] = (uint64_t)ir_type_numel(&w->value->type);
	ck_assert_msg(cg_emu_run(m, "sq", &l, &d) == 0, "%s", d.last);
	cg_module_free(m);
	return out;
}

/* Synthetic q, scale (and zero) weights repacked on the host (what a bundle
 * held) and generated in the layout by the device kernels: the same bytes. */
static void
check_synth_layout_rb(DType qdt, DType sdt, DType zdt, int64_t N, int64_t K, int E, int group, int il, int vec,
		      int64_t row_block)
{
	Module *im = ir_new_module();
	int64_t qd[3] = {E, N, K}, sd[3] = {E, N, K / group};
	Weight *w[3];
	const void *host[3] = {NULL, NULL, NULL};
	unsigned char *want[3] = {NULL, NULL, NULL};
	GemmSpec s;
	Diag d;

	spec_q(&s, qdt, N, K, group, sdt, zdt != NDTYPE);
	s.bq.vec = vec;
	w[0] = ir_add_weight(im, "layers.7.experts.gate_up", ir_type(qdt, 3, qd));
	w[1] = ir_add_weight(im, "layers.7.experts.gate_up.scale", ir_type(sdt, 3, sd));
	w[2] = zdt != NDTYPE ? ir_add_weight(im, "layers.7.experts.gate_up.zero", ir_type(zdt, 3, sd)) : NULL;
	w[0]->scale = qdt == DT_F4E2M1 ? 7 : 300;	/* saturating values, all codes */
	w[1]->mean = 0.02, w[1]->scale = 0.01;
	w[1]->row_block = row_block;	/* DeepSeek-V3's scales: one a 128x128 block (cfg_quant) */
	if (w[2])
		w[2]->mean = 2, w[2]->scale = 9;
	diag_init(&d, stderr);
	for (int i = 0; i < 3; i++)
		if (w[i]) {
			w[i]->seed = 99 + (uint64_t)i;
			host[i] = ir_weight_data(w[i], &d);
			ck_assert_ptr_nonnull(host[i]);
			want[i] = calloc(cg_bq_bytes(&s, E, i) + 1, 1);
		}
	ck_assert_int_eq(cg_bq_synth_ok(&s, sdt, zdt), 1);
	ck_assert_msg(cg_bq_pack(&s, E, host[0], host[1], host[2], zdt, il, want[0], want[1], want[2], &d) == 0,
		      "%s", d.last);
	for (int i = 0; i < 3; i++) {
		if (!w[i])
			continue;
		unsigned char *got = synth_on_emu(&s, E, il, i, w[i]);
		for (size_t b = 0; b < cg_bq_bytes(&s, E, i); b++)
			ck_assert_msg(got[b] == want[i][b], "%s part %d: byte %zu is %02x, host %02x",
				      dtype_name(qdt), i, b, got[b], want[i][b]);
		free(got);
		free(want[i]);
	}
	ir_free_module(im);
}

static void
check_synth_layout(DType qdt, DType sdt, DType zdt, int64_t N, int64_t K, int E, int group, int il, int vec)
{
	check_synth_layout_rb(qdt, sdt, zdt, N, K, E, group, il, vec, 0);
}

START_TEST(test_synth_layout)
{
	check_synth_layout(DT_F4E2M1, DT_F8E8M0, NDTYPE, 32, 64, 2, 32, 1, 0);	/* gpt-oss gate|up */
	check_synth_layout(DT_U4, DT_BF16, DT_U4, 24, 128, 2, 32, 0, 0);		/* GPTQ / AWQ */
	check_synth_layout(DT_I4, DT_F16, DT_I4, 16, 64, 1, 64, 1, 0);
	check_synth_layout(DT_I4, DT_BF16, NDTYPE, 16, 256, 3, 128, 0, 0);		/* compressed-tensors */
	check_synth_layout(DT_F8E4M3, DT_F32, NDTYPE, 16, 96, 2, 32, 1, 0);	/* DeepSeek-V3's fp8 */
	check_synth_layout(DT_U8, DT_F32, DT_U8, 8, 32, 1, 16, 0, 0);
	check_synth_layout(DT_F8E5M2, DT_BF16, DT_F8E4M3, 8, 64, 1, 32, 0, 0);
	/* lane vectors (CgBQuant.vec): the device's words where the host's repack puts them */
	check_synth_layout(DT_F4E2M1, DT_F8E8M0, NDTYPE, 32, 192, 2, 32, 1, 2);
	check_synth_layout(DT_U4, DT_BF16, DT_U4, 24, 256, 2, 128, 0, 4);
	check_synth_layout(DT_F8E4M3, DT_F32, NDTYPE, 16, 96, 2, 32, 1, 2);
	/* scales generated a block of rows at a time (Weight.row_block), interleaved and not: the
	 * device generates them too, never the host (a full-size DeepSeek-V3 layer would be 24 GB) */
	check_synth_layout_rb(DT_F8E4M3, DT_F32, NDTYPE, 16, 96, 2, 32, 1, 0, 8);
	check_synth_layout_rb(DT_F8E4M3, DT_F32, NDTYPE, 24, 96, 2, 32, 0, 2, 4);
}
END_TEST

START_TEST(test_synth_refusals)
{
	GemmSpec s;
	CgTarget t = {"emu", NULL, 3};
	Diag d;
	CgModule *m;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "synth", &d);
	spec_q(&s, DT_I4, 16, 64, 32, DT_BF16, 1);
	ck_assert_int_eq(cg_bq_synth_ok(&s, DT_F16, DT_U4), 0);		/* a scale of another type */
	ck_assert_int_eq(cg_bq_synth_ok(&s, DT_BF16, DT_F32), 0);		/* zero points that may not be exact */
	ck_assert_int_eq(cg_emit_synth_bq(m, "x", &s, 1, 0, 1, DT_F16, 0, &d), -1);
	ck_assert_int_eq(cg_emit_synth_bq(m, "x", &s, 1, 0, 0, DT_U4, 0, &d), -1);	/* q of another type */
	spec_q(&s, DT_I4, 16, 64, 32, DT_BF16, 0);
	ck_assert_int_eq(cg_emit_synth_bq(m, "x", &s, 1, 0, 2, DT_U4, 0, &d), -1);	/* no zero points */
	ck_assert_ptr_nonnull(strstr(d.last, "not a quantised B spec"));
	cg_module_free(m);
}
END_TEST

START_TEST(test_pack_refusals)
{
	GemmSpec s;
	unsigned char buf[4096] = {0}, o[4096], os[512], oz[512];
	Diag d;

	diag_init(&d, NULL);
	spec_q(&s, DT_BF16, 16, 64, 32, DT_BF16, 0);	/* not a format */
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, NULL, DT_U8, 0, o, os, oz, &d), -1);
	spec_q(&s, DT_I4, 16, 48, 32, DT_BF16, 0);		/* K not a multiple of the group */
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, NULL, DT_U8, 0, o, os, oz, &d), -1);
	spec_q(&s, DT_U8, 16, 64, 32, DT_F16, 1);		/* an integer format's zero point 2.5 */
	dtype_store(DT_F32, buf + 1024, 0, 2.5);
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, buf + 1024, DT_F32, 0, o, os, oz, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not an integer"));
	spec_q(&s, DT_F8E4M3, 16, 64, 32, DT_BF16, 1);	/* 1.001: not exact in bf16 */
	dtype_store(DT_F32, buf + 1024, 0, 1.001);
	ck_assert_int_eq(cg_bq_pack(&s, 1, buf, buf, buf + 1024, DT_F32, 0, o, os, oz, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not exact"));
}
END_TEST

/* The emulator's max.bf16x2 and fma.rn.bf16x2 (codegen/emu.c) */
int32_t moec_emu_max_bf16x2(int32_t a, int32_t b);
int32_t moec_emu_fma16x2(int32_t bf, int32_t a, int32_t b, int32_t c);

/* The MXFP4 fast path's e8m0 scale as a bf16 pair (k_gemm_mixed.c,
 * scale_pair): s * 0x00800080, max.bf16x2 with 2^-127, x * 0 + x, for every
 * code against its value 2^(s-127) in bf16, 0 (2^-127, a subnormal) and 0xff
 * (NaN) included. */
START_TEST(test_e8m0_pair)
{
	for (int sc = 0; sc < 256; sc++) {
		unsigned char code = (unsigned char)sc, want[2];
		int32_t v = moec_emu_max_bf16x2(sc * 0x00800080, 0x00400040);
		uint32_t got = (uint32_t)moec_emu_fma16x2(1, v, 0, v);
		double x = dtype_load(DT_F8E8M0, &code, 0);

		dtype_store(DT_BF16, want, 0, x);
		for (int h = 0; h < 2; h++) {
			unsigned g = got >> 16 * h & 0xffffu, w = (unsigned)want[0] | (unsigned)want[1] << 8;
			if (isnan(x))
				ck_assert_msg((g & 0x7f80u) == 0x7f80u && (g & 0x7fu), "e8m0 %d: %04x is not NaN", sc, g);
			else
				ck_assert_msg(g == w, "e8m0 %d: %04x, want %04x (%g)", sc, g, w, x);
		}
	}
}
END_TEST

/* The one-multiply MXFP4 path (k_gemm_mixed.c, one_mul): every e2m1 code
 * placed as the bf16 of its value times 2^-126 (sign at bit 15, ee.m at
 * bits 8..6), times the pair (s + 126) << 7 = 2^(s-1) for s <= 128, or for
 * larger s (frag_e2m1_big) times 2^127 then 2^(s-128) (NaN for 0xff): for
 * every code and every e8m0 s, the bf16 of e2m1 * 2^(s-127) (what the
 * dequantize op gives, rounded to the mma type). */
START_TEST(test_e8m0_one_mul)
{
	for (int sc = 0; sc < 256; sc++)
		for (unsigned q = 0; q < 16; q++) {
			unsigned char code = (unsigned char)sc, qb = (unsigned char)q, want[2];
			uint32_t x = (q & 8u) << 12 | (q & 7u) << 6, c1 = (uint32_t)sc * 0x00800080u + 0x3f003f00u;
			uint32_t got;
			double v = dtype_load(DT_F4E2M1, &qb, 0) * dtype_load(DT_F8E8M0, &code, 0);

			x |= x << 16;
			if (sc <= 128) {
				got = (uint32_t)moec_emu_fma16x2(1, (int32_t)x, (int32_t)c1, (int32_t)0x80008000u);
			} else {
				uint32_t c2 = sc == 255 ? 0x7fc07fc0u : ((uint32_t)(sc - 1) << 7) * 0x10001u;
				got = (uint32_t)moec_emu_fma16x2(1, (int32_t)x, 0x7f007f00, (int32_t)0x80008000u);
				got = (uint32_t)moec_emu_fma16x2(1, (int32_t)got, (int32_t)c2, (int32_t)0x80008000u);
			}
			dtype_store(DT_BF16, want, 0, v);
			for (int h = 0; h < 2; h++) {
				unsigned g = got >> 16 * h & 0xffffu, w = (unsigned)want[0] | (unsigned)want[1] << 8;
				if (isnan(v))
					ck_assert_msg((g & 0x7f80u) == 0x7f80u && (g & 0x7fu), "e8m0 %d q %u: %04x is not NaN",
						      sc, q, g);
				else
					ck_assert_msg(g == w, "e8m0 %d q %u: %04x, want %04x (%g)", sc, q, g, w, v);
			}
		}
}
END_TEST

/* ---- checks and parameters ---- */

static void
refused(const GemmSpec *s, const char *want)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(cg_gemm_check(&t, s, &d), -1);
	ck_assert_msg(strstr(d.last, want) != NULL, "'%s' does not say '%s'", d.last, want);
}

START_TEST(test_checks)
{
	CgTarget t = {"sm_90a", NULL, 3}, emu = {"emu", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	CgModule *mt = cg_module_new(&t, "t", &d), *me = cg_module_new(&emu, "e", &d);
	ck_assert_ptr_nonnull(mt);
	ck_assert_ptr_nonnull(me);
	cg_module_set_debug(me, DBG_EMU_WGMMA);	/* even standing for sm_90a */
	ck_assert_int_eq(cg_gemm_mainloop_for(mt, &s), CG_MAINLOOP_MMA);
	ck_assert_int_eq(cg_gemm_mainloop_for(me, &s), CG_MAINLOOP_MMA);
	cg_module_free(mt);
	cg_module_free(me);
	s.mainloop = CG_MAINLOOP_WGMMA;
	gh_tiles(&s, 128, 128, 64, 2, 2, 3);
	refused(&s, "mma.sync mainloop");
	spec_q(&s, DT_BF16, 256, 512, 128, DT_BF16, 0);
	refused(&s, "quantised B of bf16");
	spec_q(&s, DT_I4, 256, 512, 128, DT_I8, 0);
	refused(&s, "scales are i8");
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	s.a_dt = DT_F32;
	refused(&s, "A in bf16 or f16");
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	s.b_layout = CG_B_KN;
	refused(&s, "packed [N,K]");
	spec_q(&s, DT_I4, 256, 512, 40, DT_BF16, 0);
	refused(&s, "groups of 40");
	spec_q(&s, DT_I4, 256, 512, 96, DT_BF16, 0);	/* neither divides the other with bk 64 */
	refused(&s, "groups of 96");
	spec_q(&s, DT_I4, 256, 512, 16, DT_BF16, 0);
	gh_tiles(&s, 16, 128, 16, 1, 4, 4);
	refused(&s, "bk a multiple of 32");
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	s.bk = 0;
	refused(&s, "bk = 0");
	spec_q(&s, DT_F4E2M1, 256, 512, 32, DT_F8E8M0, 0);	/* byte scales: 16 per chunk */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	gh_tiles(&s, 16, 8, 64, 1, 1, 4);
	refused(&s, "bn and N multiples of 16");
	/* simt refuses it (no format), by type */
	spec_q(&s, DT_I4, 256, 512, 128, DT_BF16, 0);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
}
END_TEST

START_TEST(test_params)
{
	CgTarget t = {"sm_80", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *k;

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	spec_q(&s, DT_U4, 256, 512, 128, DT_F16, 1);
	s.a_dt = DT_F16;
	ck_assert_int_eq(cg_emit_gemm(m, "q", &s, &d), 0);
	k = cg_module_find(m, "q");
	ck_assert_int_eq(k->nparam, 6);
	ck_assert_str_eq(k->param[1].role, "B");
	ck_assert_str_eq(k->param[2].role, "B_scale");
	ck_assert_str_eq(k->param[3].role, "B_zero");
	ck_assert_str_eq(k->param[4].role, "C");
	ck_assert_str_eq(k->param[5].role, "T");
	ck_assert_ptr_nonnull(strstr(k->note, "bq: group=128 scale=f16 zero"));
	ck_assert_int_eq(k->smem, cg_gemm_smem(&s));
	cg_module_free(m);
}
END_TEST

/* ---- PTX ---- */

START_TEST(test_ptxas)
{
	GemmSpec s[5];

	spec_q(&s[4], DT_F4E2M1, 512, 1024, 32, DT_F8E8M0, 0);
	spec_q(&s[0], DT_I4, 512, 1024, 128, DT_BF16, 0);
	spec_q(&s[1], DT_U4, 512, 1024, 32, DT_F16, 1);
	s[1].a_dt = s[1].c_dt = DT_F16;
	gh_tiles(&s[1], 128, 128, 64, 2, 4, 3);
	spec_q(&s[2], DT_F8E4M3, 512, 1024, 128, DT_F32, 0);
	gh_tiles(&s[2], 128, 128, 64, 2, 4, 3);
	gh_spec_grouped_swiglu(&s[3], 8, 512, 1024, 2);
	s[3].b_dt = DT_I4;
	s[3].bq = (CgBQuant){128, DT_BF16, 1};
	gh_tiles(&s[3], 16, 128, 128, 1, 4, 4);
	s[3].sched = CG_SCHED_PERSISTENT;
	for (int i = 0; i < 3; i++) {
		CgModule *m = gh_emit_specs(gh_targets[i], GH_MMA, s, 5, "q");
		const char *ptx = gh_ptx(m);
		ck_assert_int_gt(gh_count(ptx, "mma.sync.aligned.m16n8k16"), 0);
		ck_assert_int_gt(gh_count(ptx, "cp.async.cg.shared.global"), 0);
		/* the fast path (i4 with bf16 scales, u4 with f16) and the f32 one (f8) */
		ck_assert_int_gt(gh_count(ptx, "fma.rn.bf16x2"), 0);
		ck_assert_int_gt(gh_count(ptx, "fma.rn.f16x2"), 0);
		gh_assemble(m, 5, "gemm_mixed", GH_NO_SPILLS);
		cg_module_free(m);
	}
}
END_TEST

/* The decode kernels with direct B at full size (gpt-oss-20b's and a
 * Mixtral GPTQ's MoE GEMMs, T <= 16): the lane's vector loads are
 * ld.global.nc.L1::no_allocate, no cp.async of B, and no spills. */
START_TEST(test_ptxas_direct)
{
	GemmSpec s[4];

	gh_spec_grouped_swiglu(&s[0], 32, 5760, 2880, 4);
	s[0].b_dt = DT_F4E2M1;
	s[0].bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .scales_le2 = 1, .vec = 2, .direct = 1};
	gh_tiles(&s[0], 16, 128, 192, 1, 4, 3);
	gh_spec_grouped_scale_scatter(&s[1], 32, 2880, 2880);
	s[1].m_per_t = 4;
	s[1].b_dt = DT_F4E2M1;
	s[1].bq = s[0].bq;
	gh_tiles(&s[1], 16, 64, 192, 1, 4, 3);
	gh_spec_grouped_swiglu(&s[2], 8, 28672, 4096, 2);
	s[2].b_dt = DT_U4;
	s[2].bq = (CgBQuant){.group = 128, .scale_dt = DT_BF16, .zero = 1, .vec = 2, .direct = 1};
	gh_tiles(&s[2], 16, 128, 256, 1, 4, 3);
	gh_spec_grouped_scale_scatter(&s[3], 8, 4096, 14336);
	s[3].m_per_t = 2;
	s[3].b_dt = DT_U4;
	s[3].bq = s[2].bq;
	gh_tiles(&s[3], 16, 128, 256, 1, 4, 3);
	split(&s[3], 4, 16);
	for (int i = 0; i < 3; i += 2) {	/* sm_80, sm_90a */
		CgModule *m = gh_emit_specs(gh_targets[i], GH_MMA, s, 4, "qd");
		const char *ptx = gh_ptx(m);
		/* (sm_80's PTX ISA 7.0 has no L1::no_allocate) */
		ck_assert_int_gt(gh_count(ptx, i ? "ld.global.nc.L1::no_allocate.v2.u32" : "ld.global.nc.v2.u32"), 0);
		ck_assert_int_gt(gh_count(ptx, "mma.sync.aligned.m16n8k16"), 0);
		gh_assemble(m, 4, "gemm_mixed direct", GH_NO_SPILLS);
		cg_module_free(m);
	}
}
END_TEST

/* ---- on the emulator ---- */

START_TEST(test_i4_decode)
{
	GemmCase c = {.what = "i4 g128 bf16 scales, decode tile", .T = 19};

	spec_q(&c.s, DT_I4, 256, 384, 128, DT_BF16, 0);
	gh_check(&c, 1e-5);
	c.what = "i4, 2 stages, plain loop, T = 1";
	c.T = 1;
	c.s.stages = 2;
	c.s.no_frag_pipe = 1;
	gh_check(&c, 1e-5);
	c.what = "i4, split-K 3 (a slice's group rows from its first k-tile)";
	c.T = 19;
	c.s.stages = 4;
	c.s.no_frag_pipe = 0;
	split(&c.s, 3, 19);
	gh_check(&c, 1e-5);
	c.what = "i4 g32 with bk 64, split-K 2 (two scale rows per k-tile)";
	spec_q(&c.s, DT_I4, 256, 512, 32, DT_BF16, 0);
	gh_tiles(&c.s, 16, 128, 64, 1, 4, 4);
	split(&c.s, 2, 19);
	gh_check(&c, 1e-5);
	spec_q(&c.s, DT_I4, 256, 384, 128, DT_BF16, 0);
	c.what = "i4, T = 0";
	c.T = 0;
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_u4_zero_groups_in_tile)
{
	/* groups of 32 in k-tiles of 64 (two scale rows per stage), u4 zero points, f16 */
	GemmCase c = {.what = "u4 g32 zero f16", .T = 70};

	spec_q(&c.s, DT_U4, 256, 256, 32, DT_F16, 1);
	c.s.a_dt = c.s.c_dt = DT_F16;
	gh_tiles(&c.s, 64, 128, 64, 2, 2, 3);
	gh_check(&c, 2e-3);
	c.what = "u4 g16, bk 128: eight groups per k-tile";
	c.s.bq.group = 16;
	gh_tiles(&c.s, 32, 64, 128, 1, 2, 2);
	gh_check(&c, 2e-3);
}
END_TEST

START_TEST(test_group_spans_tiles)
{
	/* groups of 128 over k-tiles of 32 (one scale row reused by 4 k-tiles), u8 zero points */
	GemmCase c = {.what = "u8 g128 bk32 zero", .T = 33};

	spec_q(&c.s, DT_U8, 128, 512, 128, DT_BF16, 1);
	gh_tiles(&c.s, 32, 128, 32, 1, 4, 5);
	gh_check(&c, 1e-5);
	c.what = "i8 per channel (group = K)";
	c.s.b_dt = DT_I8;
	c.s.bq.group = 512;
	c.s.bq.zero = 0;
	gh_check(&c, 1e-5);
	c.what = "u8 with f16 A, scales and zero points: the 8-bit fast path";
	c.s.a_dt = DT_F16;
	c.s.b_dt = DT_U8;
	c.s.bq = (CgBQuant){64, DT_F16, 1};
	gh_check(&c, 1e-5);
	c.what = "i8 f16, no zero point: the fast path, signed";
	c.s.b_dt = DT_I8;
	c.s.bq.zero = 0;
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_f8)
{
	GemmCase c = {.what = "f8e4m3 g128 f32 scales (DeepSeek's blocks along K)", .T = 45};

	spec_q(&c.s, DT_F8E4M3, 256, 384, 128, DT_F32, 0);
	gh_tiles(&c.s, 64, 128, 128, 2, 2, 3);
	gh_check(&c, 1e-5);
	c.what = "f8e5m2 g16 with f8 zero points";
	c.s.b_dt = DT_F8E5M2;
	c.s.bq = (CgBQuant){16, DT_BF16, 1};
	gh_tiles(&c.s, 16, 64, 32, 1, 2, 4);
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_mxfp4)
{
	/* gpt-oss: e2m1 values with an e8m0 scale (2^(s-127)) per 32 along K */
	GemmCase c = {.what = "f4e2m1 g32 f8e8m0, decode tile (the bf16 fast path)", .T = 19};

	spec_q(&c.s, DT_F4E2M1, 256, 384, 32, DT_F8E8M0, 0);
	gh_check(&c, 1e-5);
	c.what = "f4e2m1 g32 f8e8m0, scales known to be at most 2 (no redo branch: bq.scales_le2)";
	c.s.bq.scales_le2 = 1;
	gh_check(&c, 1e-5);
	c.s.bq.scales_le2 = 0;
	c.what = "f4e2m1 g32, two groups per k-tile, 4 warps in M";
	c.T = 77;
	gh_tiles(&c.s, 64, 64, 64, 2, 2, 3);
	gh_check(&c, 1e-5);
	c.what = "f4e2m1, e8m0 scales 2^1 and 2^2 mixed in a warp (one_mul's big-scale redo)";
	c.b_scale = 6 * sqrt(384.0);	/* scales in [1.5, 3]: e8m0 128 and 129 */
	gh_check(&c, 1e-5);
	c.what = "f4e2m1, every scale 2^2 or more (the redo for every group)";
	c.b_scale = 16 * sqrt(384.0);
	gh_check(&c, 1e-5);
	c.b_scale = 0;
	c.what = "f4e2m1, session 24's layout and two multiplies (--debug=bq-v1)";
	c.s.bq.v1 = 1;
	gh_check(&c, 1e-5);
	c.s.bq.v1 = 0;
	c.what = "f4e2m1 with f16 A (the f32 path)";
	c.s.a_dt = DT_F16;
	gh_check(&c, 1e-5);
	c.what = "f4e2m1 with bf16 scales per 64 (the fast path)";
	c.s.a_dt = DT_BF16;
	c.s.bq = (CgBQuant){64, DT_BF16, 0};
	gh_check(&c, 1e-5);
	c.what = "f4e2m1 with f32 scales (the f32 path: one rounding of the f32 product)";
	c.s.bq = (CgBQuant){32, DT_F32, 0};
	gh_check(&c, 1e-5);
	GemmCase gc = {.what = "grouped f4e2m1 swiglu (gpt-oss gate|up)", .T = 21,
		       .counts = {7, 0, 11, 0, 0, 16, 8, 0}};
	gh_spec_grouped_swiglu(&gc.s, 8, 256, 256, 2);
	gc.s.b_dt = DT_F4E2M1;
	gc.s.bq = (CgBQuant){32, DT_F8E8M0, 0};
	gh_tiles(&gc.s, 16, 128, 64, 1, 4, 4);
	gh_check(&gc, 1e-2);
	gc.what = "grouped f4e2m1 swiglu, scales at most 2";
	gc.s.bq.scales_le2 = 1;
	gh_check(&gc, 1e-2);
	gc.what = "grouped f4e2m1 swiglu, split-K 2";
	split(&gc.s, 2, 21);
	gh_check(&gc, 1e-2);
}
END_TEST

START_TEST(test_grouped)
{
	/* the gate|up GEMM of an int4 MoE: rows gathered, SwiGLU, empty experts */
	GemmCase c = {.what = "grouped i4 swiglu, tiles", .T = 21, .counts = {7, 0, 11, 0, 0, 16, 8, 0}};

	gh_spec_grouped_swiglu(&c.s, 8, 256, 256, 2);
	c.s.b_dt = DT_I4;
	c.s.bq = (CgBQuant){64, DT_BF16, 1};
	c.bq_zero_dt = DT_I4;
	gh_tiles(&c.s, 16, 128, 64, 1, 4, 4);
	gh_check(&c, 1e-2);
	c.what = "grouped i4 swiglu, persistent with 5 CTAs";
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	gh_check(&c, 1e-2);
	/* the down GEMM: routing weight, scattered rows */
	GemmCase dn = {.what = "grouped f8 down, scale + scatter", .T = 9, .counts = {3, 3, 0, 12}};
	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 256);
	dn.s.m_per_t = 2;
	dn.s.b_dt = DT_F8E4M3;
	dn.s.bq = (CgBQuant){128, DT_F32, 0};
	gh_tiles(&dn.s, 32, 64, 64, 2, 2, 3);
	gh_check(&dn, 1e-2);
}
END_TEST

/*
 * The decode variants moert tune may pick for quantised B (program.c's
 * candidates: 2 and 8 warps over 16 rows, 256 columns, split-K 3), on K =
 * 320: five k-tiles of 64, as gpt-oss's K = 2880 is 45 (no 128-deep tile
 * divides it).  MXFP4 grouped with empty experts, i4 without and u4 with
 * zero points, each against the double reference.
 */
START_TEST(test_decode_variants)
{
	static const int v[][6] = {	/* bn, bk, warps_n, stages, split, T (dense; grouped: 21) */
		{128, 64, 2, 5, 1, 19}, {128, 64, 8, 5, 1, 7}, {256, 64, 8, 5, 1, 16},
		{64, 64, 2, 5, 5, 19}, {128, 64, 4, 4, 5, 1},
	};
	for (size_t i = 0; i < NELEM(v); i++) {
		GemmCase g = {.what = "grouped f4e2m1 swiglu g32 (gpt-oss), a decode variant", .T = 21,
			      .counts = {7, 0, 11, 0, 0, 16, 8, 0}};
		gh_spec_grouped_swiglu(&g.s, 8, 256, 320, 2);
		g.s.b_dt = DT_F4E2M1;
		g.s.bq = (CgBQuant){32, DT_F8E8M0, 0};
		gh_tiles(&g.s, 16, v[i][0], v[i][1], 1, v[i][2], v[i][3]);
		if (v[i][4] > 1)
			split(&g.s, v[i][4], g.T);
		gh_check(&g, 1e-2);

		GemmCase c = {.what = "i4 g64 bf16 scales, a decode variant", .T = v[i][5]};
		spec_q(&c.s, DT_I4, 256, 320, 64, DT_BF16, 0);
		gh_tiles(&c.s, 16, v[i][0], v[i][1], 1, v[i][2], v[i][3]);
		if (v[i][4] > 1)
			split(&c.s, v[i][4], c.T);
		gh_check(&c, 1e-5);
		c.what = "u4 g32 bf16 scales and zero points (GPTQ), a decode variant";
		c.s.b_dt = DT_U4;
		c.s.bq = (CgBQuant){32, DT_BF16, 1};
		gh_check(&c, 1e-5);
	}
}
END_TEST

/*
 * Deeper k-tiles for quantised B (multiples of 64 up to 512; gpt-oss's K =
 * 2880 is 15 of 192): MXFP4 grouped with empty experts, u4 with zero
 * points per 64 (three groups a k-tile) and i4 per 192, on K = 576 (three
 * k-tiles of 192) and 640 (two of 320), each against the double reference;
 * a group that neither divides nor is a multiple of bk is refused.
 */
START_TEST(test_deep_ktiles)
{
	static const int v[][3] = {{576, 192, 4}, {640, 320, 3}};	/* K, bk, stages */
	for (size_t i = 0; i < NELEM(v); i++) {
		GemmCase g = {.what = "grouped f4e2m1 swiglu g32, a deep k-tile", .T = 21,
			      .counts = {7, 0, 11, 0, 0, 16, 8, 0}};
		gh_spec_grouped_swiglu(&g.s, 8, 256, v[i][0], 2);
		g.s.b_dt = DT_F4E2M1;
		g.s.bq = (CgBQuant){32, DT_F8E8M0, 0};
		gh_tiles(&g.s, 16, 128, v[i][1], 1, 4, v[i][2]);
		gh_check(&g, 1e-2);

		GemmCase c = {.what = "u4 g64 bf16 scales and zero points, a deep k-tile", .T = 13};
		spec_q(&c.s, DT_U4, 256, v[i][0], 64, DT_BF16, 1);
		gh_tiles(&c.s, 16, 128, v[i][1], 1, 4, v[i][2]);
		gh_check(&c, 1e-5);
		c.what = "i4 one group a k-tile, a deep k-tile";
		spec_q(&c.s, DT_I4, 256, v[i][0], v[i][1], DT_BF16, 0);
		gh_tiles(&c.s, 16, 128, v[i][1], 1, 4, v[i][2]);
		gh_check(&c, 1e-5);
	}
	GemmSpec s;
	spec_q(&s, DT_I4, 256, 576, 128, DT_BF16, 0);
	gh_tiles(&s, 16, 128, 192, 1, 4, 4);
	refused(&s, "quantisation groups of 128");
	spec_q(&s, DT_I4, 256, 576, 64, DT_BF16, 0);
	gh_tiles(&s, 16, 128, 96, 1, 4, 4);
	refused(&s, "bk = 96");
	spec_q(&s, DT_BF16, 256, 576, 0, DT_BF16, 0);
	s.bq.group = 0;
	gh_tiles(&s, 16, 128, 192, 1, 4, 4);
	refused(&s, "bk = 192");	/* bf16 B: powers of two up to 128 */
}
END_TEST

/*
 * Direct quantised B (CgBQuant.direct: the packed words loaded from global
 * memory straight into registers a k-tile ahead, no stage of B) and the
 * layout's lane vectors (CgBQuant.vec: one 8- or 16-byte load gives a lane
 * its words of 2 or 4 atoms), for every format against the double
 * reference at M = 1, 7, 16 and 64 (tails: 7 rows of a 16-row tile, 64 over
 * four), grouped MXFP4 with empty experts, split-K, the plain loop; the
 * staged kernels read the vector layout too.
 */
START_TEST(test_direct)
{
	static const int T[] = {1, 7, 16, 64};
	static const struct {
		DType b, sc;
		int group, zero, vec, bk;
		const char *what;
	} f[] = {
		{DT_I4, DT_BF16, 128, 0, 4, 256, "i4 g128 bf16 (GPTQ symmetric), vec 4"},
		{DT_U4, DT_BF16, 128, 1, 2, 256, "u4 g128 bf16 + zero points (GPTQ, Mixtral), vec 2"},
		{DT_U4, DT_F16, 64, 1, 4, 128, "u4 g64 f16 + zero points (AWQ), vec 4"},
		{DT_F4E2M1, DT_F8E8M0, 32, 0, 2, 192, "f4e2m1 g32 e8m0 (MXFP4), vec 2"},
		{DT_I8, DT_BF16, 64, 0, 2, 64, "i8 g64 bf16, vec 2"},
		{DT_F8E4M3, DT_F32, 128, 0, 4, 128, "f8e4m3 g128 f32, vec 4"},
	};
	for (size_t i = 0; i < NELEM(f); i++)
		for (size_t t = 0; t < NELEM(T); t++) {
			GemmCase c = {.what = f[i].what, .T = T[t]};
			spec_q(&c.s, f[i].b, 256, 768, f[i].group, f[i].sc, f[i].zero);
			if (f[i].sc == DT_F16)
				c.s.a_dt = DT_F16;
			gh_tiles(&c.s, 16, 128, f[i].bk, 1, 4, 3);
			c.s.bq.vec = f[i].vec;
			c.s.bq.direct = 1;
			gh_check(&c, 2e-3);
			if (t == 1) {	/* the same layout through shared memory */
				c.s.bq.direct = 0;
				gh_check(&c, 2e-3);
			}
		}
	GemmCase c = {.what = "i4 direct, split-K 3, 2 warps", .T = 19};
	spec_q(&c.s, DT_I4, 256, 768, 128, DT_BF16, 0);
	gh_tiles(&c.s, 16, 64, 128, 1, 2, 3);
	c.s.bq = (CgBQuant){.group = 128, .scale_dt = DT_BF16, .vec = 2, .direct = 1};
	split(&c.s, 3, 19);
	gh_check(&c, 1e-5);
	c.what = "i4 direct, the plain loop, 2 stages";
	c.s.split_k = c.s.split_slots = 0;
	c.s.no_frag_pipe = 1;
	c.s.stages = 2;
	gh_check(&c, 1e-5);
	for (int v = 1; v <= 2; v++) {
		GemmCase g = {.what = "grouped f4e2m1 swiglu direct (gpt-oss gate|up)", .T = 21,
			      .counts = {7, 0, 11, 0, 0, 16, 8, 0}};
		gh_spec_grouped_swiglu(&g.s, 8, 256, 576, 2);
		g.s.b_dt = DT_F4E2M1;
		g.s.bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .vec = v, .direct = 1};
		gh_tiles(&g.s, 16, 128, 192, 1, 4, 3);
		gh_check(&g, 1e-2);
		g.what = "grouped f4e2m1 swiglu direct, scales at most 2, split-K 3";
		g.s.bq.scales_le2 = 1;
		split(&g.s, 3, 21);
		gh_check(&g, 1e-2);
		g.what = "grouped f4e2m1 swiglu direct, persistent with 5 CTAs (the words reloaded per tile)";
		g.s.split_k = g.s.split_slots = 0;
		g.s.sched = CG_SCHED_PERSISTENT;
		g.s.ctas = 5;
		gh_check(&g, 1e-2);
	}
	GemmCase dn = {.what = "grouped u4 down direct, scale + scatter (Mixtral GPTQ)", .T = 9,
		       .counts = {3, 3, 0, 12}};
	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 512);
	dn.s.m_per_t = 2;
	dn.s.b_dt = DT_U4;
	dn.s.bq = (CgBQuant){.group = 128, .scale_dt = DT_BF16, .zero = 1, .vec = 4, .direct = 1};
	dn.bq_zero_dt = DT_U4;
	gh_tiles(&dn.s, 16, 128, 256, 1, 4, 3);
	gh_check(&dn, 1e-2);

	GemmSpec s;
	spec_q(&s, DT_I4, 256, 768, 128, DT_BF16, 0);
	s.bq.vec = 3;
	refused(&s, "lane vectors of 3");
	spec_q(&s, DT_F4E2M1, 256, 2880, 32, DT_F8E8M0, 0);
	s.bq.vec = 4;	/* 90 atoms along K */
	refused(&s, "K / 32 and bk / 32 multiples of 4");
	spec_q(&s, DT_I4, 200, 768, 128, DT_BF16, 0);
	s.bq.direct = 1;
	refused(&s, "bn dividing N");
	spec_q(&s, DT_I4, 256, 768, 128, DT_BF16, 0);
	gh_tiles(&s, 16, 128, 512, 1, 2, 3);	/* 8 blocks x 16 atoms a lane */
	s.bq.direct = 1;
	refused(&s, "128 words a lane");
	spec_q(&s, DT_I8, 256, 768, 128, DT_BF16, 0);
	s.bq.direct = 1;	/* a word a k-step: the reload would come before its last use */
	refused(&s, "direct 8-bit B needs lane vectors");
}
END_TEST

/* ---- whole programs: fuse-dequant, lower_gemm, the repack, the emulator ---- */

/* W4A16: i4 with a scale per 128 along K, then u4 with f16 scales and u4 zero points per 64 */
static const char prog_w4[] =
	"weight $wq : i4[256,128]\n"
	"weight $s : bf16[256,1] mean=0.02 scale=0.005\n"
	"weight $wu : u4[128,256]\n"
	"weight $su : f16[128,4] mean=0.01 scale=0.002\n"
	"weight $zu : u4[128,4] mean=8 scale=7\n"
	"graph @g(%x: bf16[T,128]) -> (y: bf16[T,128]) {\n"
	"	%w = dequantize $wq, $s, axis=1, block_size=128, to=bf16 : bf16[256,128]\n"
	"	%h = matmul %x, %w, to=f32, trans_b=1 : f32[T,256]\n"
	"	%a = silu %h : f32[T,256]\n"
	"	%ab = cast %a, to=bf16 : bf16[T,256]\n"
	"	%w2 = dequantize $wu, $su, $zu, axis=1, block_size=64, to=bf16 : bf16[128,256]\n"
	"	%y = matmul %ab, %w2, to=f32, trans_b=1 : f32[T,128]\n"
	"	%yb = cast %y, to=bf16 : bf16[T,128]\n"
	"	ret %yb\n"
	"}\n";

/* W8A16: f8e4m3 with a per-channel f32 scale (compressed-tensors, FBGEMM) */
static const char prog_f8_channel[] =
	"weight $wq : f8e4m3[256,128] scale=2.0\n"
	"weight $s : f32[256] mean=0.02 scale=0.005\n"
	"graph @g(%x: bf16[T,128]) -> (y: bf16[T,256]) {\n"
	"	%w = dequantize $wq, $s, axis=0, to=bf16 : bf16[256,128]\n"
	"	%y = matmul %x, %w, trans_b=1 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* B [K,N]: not folded; dequantised at load and read as bf16 by the GEMM */
static const char prog_kn_unfused[] =
	"weight $wq : i4[128,256]\n"
	"weight $s : bf16[1,256] mean=0.02 scale=0.005\n"
	"graph @g(%x: bf16[T,128]) -> (y: f32[T,256]) {\n"
	"	%w = dequantize $wq, $s, axis=0, block_size=128, to=bf16 : bf16[128,256]\n"
	"	%y = matmul %x, %w, to=f32 : f32[T,256]\n"
	"	ret %y\n"
	"}\n";

/* An int4 MoE (GPTQ-style: i4 with zero points per 32, gate|up interleaved by
 * lower-moe and repacked so) with FP8 down experts (DeepSeek's weights, a
 * scale per 128 along K): both grouped GEMMs read packed weights.  Checked by
 * relative L2: the interpreter rounds the gate|up result to bf16 before
 * SwiGLU, the fused epilogue does not (the same outputs as without
 * fuse-dequant, bit for bit, on 2026-12-01: the difference is the bf16
 * block's, not the packed weights'). */
static const char prog_moe[] =
	"weight $router : bf16[8,64]\n"
	"weight $wguq : i4[8,256,64] scale=7\n"
	"weight $wgus : bf16[8,256,2] mean=0.02 scale=0.005\n"
	"weight $wguz : i4[8,256,2] scale=3\n"
	"weight $wdq : f8e4m3[8,64,128] scale=2\n"
	"weight $wds : f32[8,64,1] mean=0.03 scale=0.01\n"
	"graph @moe(%x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%wgu = dequantize $wguq, $wgus, $wguz, axis=2, block_size=32, to=bf16 : bf16[8,256,64]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,64,128]\n"
	"	%y = moe %x, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,64]\n"
	"	ret %y\n"
	"}\n";

/*
 * DeepSeek-V3's FP8 block in the contract form: f8e4m3 experts with f32
 * scales per 128 along K, the SwiGLU activations quantised per 128 columns
 * in the gate|up epilogue (quantize_dynamic) and dequantised for the down
 * GEMM.  Today the GEMMs run W8A16 (the activations dequantised by a kernel
 * of their own); FP8 x FP8 wgmma is not done.
 */
static const char prog_moe_fp8[] =
	"weight $router : bf16[8,64]\n"
	"weight $wguq : f8e4m3[8,256,64] scale=2\n"
	"weight $wgus : f32[8,256,1] mean=0.02 scale=0.005\n"
	"weight $wdq : f8e4m3[8,64,128] scale=2\n"
	"weight $wds : f32[8,64,1] mean=0.03 scale=0.01\n"
	"graph @moe(%x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%w, %ids = route %logits, k=2, renorm=1, router=softmax : f32[T,2], i32[T,2]\n"
	"	%offs, %rows, %pos = permute %ids, experts=8 : i32[9], i32[2*T], i32[2*T]\n"
	"	%two = const value=[2] : i32[]\n"
	"	%src = div %rows, %two : i32[2*T]\n"
	"	%xs = gather %x, %src, axis=0 : bf16[2*T,64]\n"
	"	%wgu = dequantize $wguq, $wgus, axis=2, block_size=64, to=bf16 : bf16[8,256,64]\n"
	"	%h = grouped_matmul %xs, %wgu, %offs, to=f32 : f32[2*T,256]\n"
	"	%act = swiglu %h, act=silu, layout=interleave : f32[2*T,128]\n"
	"	%q, %qs = quantize_dynamic %act, group=128, to=f8e4m3 : f8e4m3[2*T,128], f32[2*T,1]\n"
	"	%a8 = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[2*T,128]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,64,128]\n"
	"	%down = grouped_matmul %a8, %wd, %offs, to=f32 : f32[2*T,64]\n"
	"	%wf = reshape %w, shape=[2*T] : f32[2*T]\n"
	"	%wr = gather %wf, %rows, axis=0 : f32[2*T]\n"
	"	%wc = reshape %wr, shape=[2*T, 1] : f32[2*T,1]\n"
	"	%scaled = mul %down, %wc : f32[2*T,64]\n"
	"	%slots = scatter_rows %scaled, %rows, rows=[2*T] : f32[2*T,64]\n"
	"	%s3 = reshape %slots, shape=[T, 2, 64] : f32[T,2,64]\n"
	"	%sum = reduce_sum %s3, axes=[1], keepdims=0 : f32[T,64]\n"
	"	%y = cast %sum, to=bf16 : bf16[T,64]\n"
	"	ret %y\n"
	"}\n";

/* A GPTQ int4 MoE (u4 with zero points per 128) with MXFP4 down experts,
 * sized so that the decode plan takes direct B with lane vectors (K of 256
 * and 128: k-tiles of 256 and 128 held in registers). */
static const char prog_moe_direct[] =
	"weight $router : bf16[8,256]\n"
	"weight $wguq : u4[8,256,256] scale=7\n"
	"weight $wgus : bf16[8,256,2] mean=0.02 scale=0.005\n"
	"weight $wguz : u4[8,256,2] mean=8 scale=7\n"
	"weight $wdq : f4e2m1[8,256,128] scale=5\n"
	"weight $wds : f8e8m0[8,256,4] mean=0.03 scale=0.01\n"
	"graph @moe(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%wgu = dequantize $wguq, $wgus, $wguz, axis=2, block_size=128, to=bf16 : bf16[8,256,256]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=32, to=bf16 : bf16[8,256,128]\n"
	"	%y = moe %x, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* Stream-K over `ctas` CTAs for launches of up to T tokens (a workspace slot a tile). */
static void
stream(GemmSpec *s, int ctas, int T)
{
	split(s, 0, T);
	s->sched = CG_SCHED_STREAM;
	s->ctas = ctas;
}

/* A Mixtral GPTQ-like down projection: 4 experts of u4 with zero points,
 * group 128, bf16 scales, the routing weight and the scattered rows; T = 9
 * tokens of 2 rows, counts 3, 3, 0, 12 (no tiles yet). */
static GemmCase
gptq_down(const char *what)
{
	GemmCase dn = {.what = what, .T = 9, .counts = {3, 3, 0, 12}};

	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 512);
	dn.s.m_per_t = 2;
	dn.s.b_dt = DT_U4;
	dn.s.bq = (CgBQuant){.group = 128, .scale_dt = DT_BF16, .zero = 1};
	return dn;
}

/*
 * Stream-K with quantised B staged through shared memory (program.c's
 * bq_stream, tuning variants .pN): a CTA's run crosses tiles, so the packed B, scale
 * and zero-point sources follow the load stream into each tile, and a
 * k-tile's group rows are the tile's own (its k-tile within the tile).
 * Every format's fast path, group rows inside and across k-tiles, tiles cut
 * between CTAs (3 and 7 CTAs, more CTAs than pairs), 2, 4 and 8 warps, grouped MXFP4 SwiGLU
 * with empty experts, u4 down with routing weights and scattered rows, T = 0;
 * against the double reference, and the same bits on a second run.  Direct
 * B is refused.
 */
START_TEST(test_stream)
{
	static const struct {
		DType b, sc;
		int group, zero, bn, bk, stages, ctas, T;
		const char *what;
	} f[] = {
		{DT_I4, DT_BF16, 128, 0, 128, 128, 5, 3, 16, "i4 g128 bf16, 16x128x128 s5, 3 CTAs (every tile cut)"},
		{DT_I4, DT_BF16, 128, 0, 128, 128, 5, 7, 1, "i4 g128 bf16, 7 CTAs, T = 1"},
		{DT_U4, DT_BF16, 32, 1, 128, 64, 4, 5, 16, "u4 g32 bf16 + zero points, two scale rows a k-tile"},
		{DT_U4, DT_BF16, 128, 1, 64, 64, 3, 11, 9, "u4 g128 + zero points, a group over two k-tiles"},
		{DT_F4E2M1, DT_F8E8M0, 32, 0, 128, 64, 5, 3, 16, "f4e2m1 g32 e8m0 (MXFP4), 3 CTAs"},
		{DT_F4E2M1, DT_F8E8M0, 32, 0, 128, 192, 3, 2, 7, "f4e2m1 g32, 192-deep k-tiles, 2 CTAs"},
		{DT_I4, DT_BF16, 64, 0, 64, 64, 3, 200, 5, "i4 g64, more CTAs than pairs"},
		{DT_I8, DT_BF16, 64, 0, 128, 64, 4, 4, 16, "i8 g64 bf16 (the f32 path), 4 CTAs"},
	};
	for (size_t i = 0; i < NELEM(f); i++) {
		GemmCase c = {.what = f[i].what, .T = f[i].T};
		spec_q(&c.s, f[i].b, 256, 768, f[i].group, f[i].sc, f[i].zero);
		gh_tiles(&c.s, 16, f[i].bn, f[i].bk, 1, 4, f[i].stages);
		stream(&c.s, f[i].ctas, c.T);
		gh_check(&c, 1e-5);
		ck_assert_msg(gh_same_bits(&c, &c), "%s: two runs differ", c.what);
		GemmCase u = c;	/* the loop unrolled over the stages: the same sums */
		u.s.sk_unroll = 1;
		ck_assert_msg(gh_same_bits(&c, &u), "%s: the unrolled loop differs", c.what);
	}
	GemmCase w = {.what = "u4 g128 + zero points stream-K, 8 warps (16x128x128.w1x8), 5 CTAs", .T = 16};
	spec_q(&w.s, DT_U4, 256, 768, 128, DT_BF16, 1);
	gh_tiles(&w.s, 16, 128, 128, 1, 8, 4);
	stream(&w.s, 5, w.T);
	gh_check(&w, 1e-5);
	w.what = "f4e2m1 g32 stream-K, 2 warps (16x128x64.w1x2), 6 CTAs";
	spec_q(&w.s, DT_F4E2M1, 256, 768, 32, DT_F8E8M0, 0);
	gh_tiles(&w.s, 16, 128, 64, 1, 2, 5);
	stream(&w.s, 6, w.T);
	gh_check(&w, 1e-5);
	/* tiles wider than 256 columns (quantised B only: 10 and 16 n8 blocks a warp) */
	w.what = "f4e2m1 g32 stream-K, 16x320x64 (gpt-oss's N / 320), 7 CTAs";
	spec_q(&w.s, DT_F4E2M1, 640, 768, 32, DT_F8E8M0, 0);
	gh_tiles(&w.s, 16, 320, 64, 1, 4, 3);
	stream(&w.s, 7, w.T);
	gh_check(&w, 1e-5);
	w.what = "u4 g128 + zero points stream-K, 16x512x128, 3 CTAs";
	spec_q(&w.s, DT_U4, 1024, 512, 128, DT_BF16, 1);
	gh_tiles(&w.s, 16, 512, 128, 1, 4, 2);
	stream(&w.s, 3, w.T);
	gh_check(&w, 1e-5);
	GemmCase wu = w;	/* 2 stages: the loop unrolled in pairs */
	wu.s.sk_unroll = 1;
	ck_assert_msg(gh_same_bits(&w, &wu), "%s: the unrolled loop differs", w.what);
	GemmCase g = {.what = "grouped f4e2m1 swiglu stream-K (gpt-oss gate|up), 5 CTAs", .T = 21,
		      .counts = {7, 0, 11, 0, 0, 16, 8, 0}};
	gh_spec_grouped_swiglu(&g.s, 8, 256, 320, 2);
	g.s.b_dt = DT_F4E2M1;
	g.s.bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .scales_le2 = 1};
	gh_tiles(&g.s, 16, 128, 64, 1, 4, 5);
	stream(&g.s, 5, g.T);
	gh_check(&g, 1e-2);
	g.what = "grouped f4e2m1 swiglu stream-K, the big-scale vote, vec 2 layout, 13 CTAs";
	g.s.bq.scales_le2 = 0;
	g.s.bq.vec = 2;
	g.b_scale = 6 * sqrt(320.0);
	stream(&g.s, 13, g.T);
	gh_check(&g, 1e-2);
	GemmCase gu = g;
	gu.s.sk_unroll = 1;
	ck_assert_msg(gh_same_bits(&g, &gu), "%s: the unrolled loop differs", g.what);
	g.what = "grouped f4e2m1 swiglu stream-K, T = 0";
	g.T = 0;
	memset(g.counts, 0, sizeof g.counts);
	gh_check(&g, 1e-2);
	GemmCase dn = gptq_down("grouped u4 down stream-K, scale + scatter (Mixtral GPTQ), 6 CTAs");
	gh_tiles(&dn.s, 16, 64, 128, 1, 4, 4);
	stream(&dn.s, 6, dn.T);
	gh_check(&dn, 1e-2);
	GemmCase du = dn;
	du.s.sk_unroll = 1;
	ck_assert_msg(gh_same_bits(&dn, &du), "%s: the unrolled loop differs", dn.what);
	/* live rows (--debug=qdec): A's rows past the tile's expert zero-filled, not
	 * read; rows of the tile are never stored, so the same bits, and the run
	 * carries the test into each tile it enters (Stream.live) */
	GemmCase gl = g, dl = dn, dlu = du;
	gl.what = "grouped f4e2m1 swiglu stream-K, live rows, 13 CTAs";
	static const int gc[8] = {7, 0, 11, 0, 0, 16, 8, 0};
	gl.T = g.T = 21;
	for (int e = 0; e < 8; e++)
		gl.counts[e] = g.counts[e] = gc[e];
	gl.s.live_rows = 1;
	gh_check(&gl, 1e-2);
	ck_assert_msg(gh_same_bits(&g, &gl), "%s: live rows change the bits", gl.what);
	gl.s.sk_unroll = 1;
	ck_assert_msg(gh_same_bits(&g, &gl), "%s: live rows change the unrolled loop's bits", gl.what);
	dl.s.live_rows = dlu.s.live_rows = 1;
	ck_assert_msg(gh_same_bits(&dn, &dl), "%s: live rows change the bits", dn.what);
	ck_assert_msg(gh_same_bits(&dn, &dlu), "%s: live rows change the unrolled loop's bits", dn.what);
	/* direct B has no stage to follow the run: refused */
	GemmSpec s;
	spec_q(&s, DT_I4, 256, 768, 128, DT_BF16, 0);
	gh_tiles(&s, 16, 128, 256, 1, 4, 3);
	s.bq.vec = 2;
	s.bq.direct = 1;
	stream(&s, 132, 16);
	refused(&s, "quantised and staged (not direct)");
}
END_TEST

/* Slot elements of the stream-K workspace written by a run of c (1x4 warps of
 * 16-row tiles: element a * 128 + t holds row t % 32 / 4 + 8 (a % 4 / 2) of
 * its tile), counted for rows of the tile (live[tile] rows) and past them. */
static void
slot_rows_written(const GemmCase *c, const int *live, int64_t *in, int64_t *past)
{
	GemmRun r;
	int64_t tile = (int64_t)c->s.bm * c->s.bn, slots = c->s.split_slots;

	ck_assert_msg(gh_run(&r, c) == 0, "%s: %s", c->what, r.msg);
	const uint32_t *w = (const uint32_t *)((const char *)r.ws + r.wsbytes - (size_t)(slots * tile * 4));
	*in = *past = 0;
	for (int64_t t = 0; t < slots; t++)
		for (int64_t e = 0; e < tile; e++) {
			int row = (int)(e % 128 % 32 / 4 + 8 * (e / 128 % 4 / 2));
			if (w[t * tile + e] != 0xffffffffu)	/* the harness fills the slots with NaN */
				++*(row < live[t] ? in : past);
		}
	gh_free(&r);
}

/*
 * --debug=live-sums (GemmSpec.live_sums, split_reduce): stream-K and split-K
 * hand over only the partial sums of the rows a tile holds.  The same bits as
 * handing over all 16 (stream() and the unrolled loop; grouped MXFP4 SwiGLU
 * with empty experts and tiles of 7-16 rows, with and without live rows of
 * A; the u4 down with routing weights and scattered rows; dense split-K at
 * T = 5), and in the workspace no slot element of a row past its tile is
 * written, where without the flag some are.
 */
START_TEST(test_stream_live_sums)
{
	static const int gc[8] = {7, 0, 11, 0, 0, 16, 8, 0};
	/* the tiles' rows: each expert's 2 column tiles; the slots past them (the grid's room for
	 * every expert's padding rows, split_slots 22) have none */
	static const int live[32] = {7, 7, 11, 11, 16, 16, 8, 8};
	GemmCase g = {.what = "grouped f4e2m1 swiglu stream-K, live sums, 13 CTAs", .T = 21};
	int64_t in, past;

	memcpy(g.counts, gc, sizeof gc);
	gh_spec_grouped_swiglu(&g.s, 8, 256, 320, 2);
	g.s.b_dt = DT_F4E2M1;
	g.s.bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .scales_le2 = 1, .vec = 2};
	gh_tiles(&g.s, 16, 128, 64, 1, 4, 5);
	stream(&g.s, 13, g.T);
	ck_assert_int_le(g.s.split_slots, 32);
	for (int rows = 0; rows < 2; rows++) {
		GemmCase l = g;
		g.s.live_rows = l.s.live_rows = rows;
		l.s.live_sums = 1;
		gh_check(&l, 1e-2);
		ck_assert_msg(gh_same_bits(&g, &l), "%s (live rows %d): other bits", l.what, rows);
		GemmCase lu = l;
		lu.s.sk_unroll = 1;
		ck_assert_msg(gh_same_bits(&g, &lu), "%s (live rows %d): the unrolled loop's bits", l.what, rows);
		slot_rows_written(&g, live, &in, &past);
		ck_assert_msg(in > 0 && past > 0, "%s: all rows handed over: %lld, %lld", g.what, (long long)in,
			      (long long)past);
		slot_rows_written(&l, live, &in, &past);
		ck_assert_msg(in > 0 && past == 0, "%s: %lld of the tiles' rows, %lld past them", l.what,
			      (long long)in, (long long)past);
		slot_rows_written(&lu, live, &in, &past);
		ck_assert_msg(in > 0 && past == 0, "%s, unrolled: %lld past the tiles' rows", l.what, (long long)past);
	}
	GemmCase dn = {.what = "grouped u4 down stream-K, scale + scatter, live sums, 6 CTAs", .T = 9,
		       .counts = {3, 3, 0, 12}};
	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 512);
	dn.s.m_per_t = 2;
	dn.s.b_dt = DT_U4;
	dn.s.bq = (CgBQuant){.group = 128, .scale_dt = DT_BF16, .zero = 1};
	gh_tiles(&dn.s, 16, 64, 128, 1, 4, 4);
	stream(&dn.s, 6, dn.T);
	GemmCase dl = dn;
	dl.s.live_sums = 1;
	gh_check(&dl, 1e-2);
	ck_assert_msg(gh_same_bits(&dn, &dl), "%s: other bits", dl.what);
	dl.s.sk_unroll = 1;
	ck_assert_msg(gh_same_bits(&dn, &dl), "%s: the unrolled loop's bits", dl.what);
	GemmCase sk = {.what = "i4 g128 split-K 3, T = 5 (rows 5..15 past M), live sums", .T = 5};
	spec_q(&sk.s, DT_I4, 256, 768, 128, DT_BF16, 0);
	split(&sk.s, 3, sk.T);
	GemmCase sl = sk;
	sl.s.live_sums = 1;
	gh_check(&sl, 1e-5);
	ck_assert_msg(gh_same_bits(&sk, &sl), "%s: other bits", sl.what);
}
END_TEST

/*
 * Quantised B ahead of the grid wait (GemmSpec.b_ahead with bq, k_gemm.c's
 * stream_ahead and gemm_bq_ahead): before the wait each CTA builds the
 * expert table and sends its run's first packed words, scales and zero
 * points toward L2; on the emulator all of it runs but the prefetch, whose
 * ranges' first and last bytes the emulator checks against the launch's
 * buffers.  The same bits as without it: grouped MXFP4 SwiGLU with empty
 * experts over 13 CTAs (b_ahead 1, 5 and more than a run; stream() and
 * unrolled, live rows), 64- and 128-deep k-tiles (2 and 4 group rows a
 * k-tile); the u4 down with zero points, routing weights and scattered rows
 * (a group over two k-tiles and one a k-tile), with the table from before
 * the wait kept (GemmSpec.ahead_table) and without.
 */
START_TEST(test_stream_ahead)
{
	static const int gc[8] = {7, 0, 11, 0, 0, 16, 8, 0};
	static const int ahead[] = {1, 5, 64};
	GemmCase g = {.what = "grouped f4e2m1 swiglu stream-K, B ahead, 13 CTAs", .T = 21};

	memcpy(g.counts, gc, sizeof gc);
	for (int bk = 64; bk <= 128; bk += 64) {
		gh_spec_grouped_swiglu(&g.s, 8, 256, bk == 64 ? 320 : 384, 2);
		g.s.b_dt = DT_F4E2M1;
		g.s.bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .scales_le2 = 1, .vec = 2};
		gh_tiles(&g.s, 16, 128, bk, 1, 4, 4);
		stream(&g.s, 13, g.T);
		for (size_t i = 0; i < NELEM(ahead); i++)
			for (int v = 0; v < 2; v++) {
				GemmCase a = g, b;
				a.s.sk_unroll = b.s.sk_unroll = v;
				a.s.live_rows = v;
				b = a;
				b.s.b_ahead = ahead[i];
				gh_check(&b, 1e-2);
				ck_assert_msg(gh_same_bits(&a, &b), "%s (bk %d, %d k-tiles ahead, unrolled %d): other bits",
					      b.what, bk, ahead[i], v);
			}
	}
	GemmCase dn = gptq_down("grouped u4 down stream-K, scale + scatter, zero points, B ahead, 6 CTAs");
	for (int bk = 64; bk <= 128; bk += 64) {
		gh_tiles(&dn.s, 16, 64, bk, 1, 4, 4);
		stream(&dn.s, 6, dn.T);
		for (int tab = 0; tab < 2; tab++) {	/* tab: the table from before the wait kept */
			GemmCase b = dn;
			b.s.b_ahead = 3;
			b.s.ahead_table = tab;
			gh_check(&b, 1e-2);
			ck_assert_msg(gh_same_bits(&dn, &b), "%s (bk %d, table kept %d): other bits", b.what, bk, tab);
		}
	}
}
END_TEST

/*
 * --debug=qahead through the plan (program.c's down_ahead, CG_QAHEAD_DEFAULT):
 * with PDL the quantised down (MXFP4) and, the routing touching every expert
 * at max_tokens 16 (top-2 of 8: 7.9 expected), the gate|up (u4 with zero
 * points) take B ahead, the down keeping the table it built before the wait
 * (QAHEAD_TABLE_DEFAULT); against the interpreter at T = 1, 7 and 16, the same
 * bits as without the flag (with qdec, live sums and the unrolled loop too),
 * and on sm_90a both kernels' PTX has the bulk prefetch after the offsets'
 * volatile loads and before griddepcontrol.wait; without the flag none unless
 * CG_QAHEAD_DEFAULT (1 since session 39).
 */
START_TEST(test_program_qahead)
{
	static const int T[] = {1, 7, 16};
	static const DbgFlags more[] = {0, DBG_QDEC | DBG_LIVE_SUMS | DBG_SK_UNROLL};

	for (size_t i = 0; i < NELEM(T); i++)
		for (size_t j = 0; j < NELEM(more); j++) {
			DbgFlags f = DBG_PDL | more[j];
			gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k3", "B ahead", 1e-2, f | DBG_QAHEAD);
			gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k4", "k-tiles (its table)", 1e-2,
					     f | DBG_QAHEAD);
			ck_assert_msg(gh_program_same_bits(prog_moe_direct, T[i], 16, f, f | DBG_QAHEAD),
				      "T = %d, flags %llx: other bits with qahead", T[i], (unsigned long long)more[j]);
		}
	for (int on = 0; on < 2; on++) {
		char *ptx = gh_program_ptx(prog_moe_direct, "sm_90a", 16, DBG_PDL | (on ? DBG_QAHEAD : 0));
		const char *k3 = strstr(ptx, ".entry moe_k3"), *k4 = strstr(ptx, ".entry moe_k4");
		ck_assert_ptr_nonnull(k3);
		ck_assert_ptr_nonnull(k4);
		for (int k = 0; k < 2; k++) {
			const char *e = k ? k4 : k3, *end = strstr(e + 1, ".entry");
			const char *pf = strstr(e, "cp.async.bulk.prefetch.L2.global"), *w = strstr(e, "griddepcontrol.wait");
			ck_assert_ptr_nonnull(w);
			if (!on && !CG_QAHEAD_DEFAULT) {
				ck_assert_msg(!pf || (end && pf > end), "a prefetch without the flag");
				continue;
			}
			ck_assert_ptr_nonnull(pf);
			ck_assert_msg(pf < w && strstr(e, "ld.volatile.global") < pf, "moe_k%d: the prefetch after the wait",
				      3 + k);
		}
		free(ptx);
	}
}
END_TEST

/*
 * Group sums (CgBQuant.gacc, --debug=bq-gacc): 4-bit integer B enters the
 * mma as the lop3's M + u, each group's sums and A's row sums are folded
 * once in f32, so the outputs stay within the rounding of the reference's
 * bf16 weights (not its bits) and within f32 rounding (1e-5) of the
 * unrounded weights: i4 and u4 with zero points, one to four groups a
 * k-tile, tiles, split-K, stream-K (and unrolled: the same bits), direct
 * B, f16, the plain loop, the grouped down projection with routing
 * weights; a group over two k-tiles keeps the per-weight scale (the same
 * bits as without the flag).
 */
START_TEST(test_gacc)
{
	static const struct {
		DType b;
		int group, zero, bn, bk, stages, ctas, T;
		const char *what;
	} f[] = {
		{DT_I4, 128, 0, 128, 128, 4, 0, 16, "i4 g128 bf16, 16x128x128 tiles"},
		{DT_U4, 32, 1, 128, 64, 4, 5, 16, "u4 g32 + zero points, two groups a k-tile, stream-K over 5"},
		{DT_U4, 128, 1, 256, 128, 3, 3, 16, "u4 g128 + zero points, 16x256x128 s3 stream-K over 3 (Mixtral GPTQ's)"},
		{DT_I4, 64, 0, 64, 64, 3, 200, 5, "i4 g64, stream-K, more CTAs than pairs"},
		{DT_U4, 32, 1, 64, 128, 4, 0, 3, "u4 g32 + zero points, four groups a k-tile, T = 3"},
	};
	for (size_t i = 0; i < NELEM(f); i++) {
		GemmCase c = {.what = f[i].what, .T = f[i].T};
		spec_q(&c.s, f[i].b, 256, 768, f[i].group, DT_BF16, f[i].zero);
		gh_tiles(&c.s, 16, f[i].bn, f[i].bk, 1, 4, f[i].stages);
		if (f[i].ctas)
			stream(&c.s, f[i].ctas, c.T);
		c.s.bq.gacc = 1;
		gh_check(&c, 4e-3);	/* the reference's weights rounded to bf16 */
		c.bq_exact = 1;
		gh_check(&c, 1e-5);	/* unrounded: only the f32 sums' rounding */
		GemmCase o = c;
		o.s.bq.gacc = 0;
		ck_assert_msg(!gh_same_bits(&c, &o), "%s: group sums give the bits of per-weight scales", c.what);
		if (f[i].ctas) {
			GemmCase u = c;
			u.s.sk_unroll = 1;
			ck_assert_msg(gh_same_bits(&c, &u), "%s: the unrolled loop differs", c.what);
		}
	}
	GemmCase d = {.what = "u4 g128 + zero points, direct B (vec 2), two groups a 256-deep k-tile", .T = 7, .bq_exact = 1};
	spec_q(&d.s, DT_U4, 256, 768, 128, DT_BF16, 1);
	gh_tiles(&d.s, 16, 128, 256, 1, 4, 3);
	d.s.bq.vec = 2;
	d.s.bq.direct = 1;
	d.s.bq.gacc = 1;
	gh_check(&d, 1e-5);
	d.what = "u4 g64 f16 + zero points, f16 A (AWQ), the plain loop";
	spec_q(&d.s, DT_U4, 256, 768, 64, DT_F16, 1);
	d.s.a_dt = DT_F16;
	gh_tiles(&d.s, 16, 128, 128, 1, 4, 2);
	d.s.no_frag_pipe = 1;
	d.s.bq.gacc = 1;
	gh_check(&d, 1e-5);
	GemmCase k = {.what = "u4 g128 + zero points, split-K 3, group sums", .T = 16};
	spec_q(&k.s, DT_U4, 256, 768, 128, DT_BF16, 1);
	gh_tiles(&k.s, 16, 64, 128, 1, 2, 3);
	split(&k.s, 3, k.T);
	k.s.bq.gacc = 1;
	gh_check(&k, 4e-3);
	GemmCase dn = {.what = "grouped u4 down stream-K, scale + scatter, group sums", .T = 9, .counts = {3, 3, 0, 12}};
	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 512);
	dn.s.m_per_t = 2;
	dn.s.b_dt = DT_U4;
	dn.s.bq = (CgBQuant){.group = 128, .scale_dt = DT_BF16, .zero = 1, .gacc = 1};
	gh_tiles(&dn.s, 16, 64, 128, 1, 4, 4);
	stream(&dn.s, 6, dn.T);
	gh_check(&dn, 1e-2);
	GemmCase x = {.what = "u4 g128 over two 64-deep k-tiles: no group sums", .T = 9};
	spec_q(&x.s, DT_U4, 256, 768, 128, DT_BF16, 1);
	gh_tiles(&x.s, 16, 64, 64, 1, 4, 3);
	stream(&x.s, 11, x.T);
	GemmCase y = x;
	y.s.bq.gacc = 1;
	ck_assert_msg(gh_same_bits(&x, &y), "%s: the bits differ", x.what);
}
END_TEST

/* The whole plan with direct quantised B (--debug=bq-direct: program.c's
 * bq_direct) against the interpreter at T = 1, 7, 16 and 64 (16-row tiles
 * up to max_tokens = 64 here: 64 takes several row tiles an expert), and
 * without it (the default: B staged, no lane vectors). */
START_TEST(test_program_direct)
{
	static const int T[] = {1, 7, 16, 64};

	for (size_t i = 0; i < NELEM(T); i++) {
		gh_check_program_max(prog_moe_direct, T[i], 64, "moe_k3", "scale=bf16 zero vec2 direct", 1e-2,
				     DBG_BQ_DIRECT);
		gh_check_program_max(prog_moe_direct, T[i], 64, "moe_k4", "scale=f8e8m0 le2 vec2 direct", 1e-2,
				     DBG_BQ_DIRECT);
	}
	gh_check_program_max(prog_moe_direct, 7, 64, "moe_k3", "scale=bf16 zero gacc tiles", 1e-2, 0);
	gh_check_program_max(prog_moe_direct, 7, 64, "moe_k4", "scale=f8e8m0 le2 tiles", 1e-2, 0);
}
END_TEST

/* The whole plan's wide stream-K runs for a grouped quantised decode GEMM (the
 * default at max_tokens 16, one row tile an expert: program.c's bq_stream)
 * against the interpreter at T = 1, 7 and 16: gate|up u4 with zero points,
 * down MXFP4; and --debug=bq-tiles' tiles. */
START_TEST(test_program_stream)
{
	static const int T[] = {1, 7, 16};

	for (size_t i = 0; i < NELEM(T); i++) {
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k3", "16x256x128 w1x4 s3 bq: group=128 scale=bf16 zero gacc stream-k",
				     1e-2, 0);
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k4", "scale=f8e8m0 le2 stream-k", 1e-2, 0);
	}
	gh_check_program_max(prog_moe_direct, 7, 16, "moe_k3", "scale=bf16 zero gacc tiles", 1e-2, DBG_BQ_TILES);
	for (size_t i = 0; i < NELEM(T); i++)	/* --debug=bq-gacc: the u4 gate|up on group sums */
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k3", "group=128 scale=bf16 zero gacc stream-k", 1e-2,
				     DBG_BQ_GACC);
	gh_check_program_max(prog_moe_direct, 7, 16, "moe_k4", "scale=f8e8m0 le2 tiles", 1e-2, DBG_BQ_TILES);
}
END_TEST

/* --debug=sk-unroll (k_gemm.c's stream_unrolled): the wide stream-K runs'
 * pair loop unrolled over the stages (3 for the gate|up, 4 for the down
 * projection), against the interpreter at T = 1, 7 and 16. */
START_TEST(test_program_sk_unroll)
{
	static const int T[] = {1, 7, 16};

	for (size_t i = 0; i < NELEM(T); i++) {
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k3",
				     "16x256x128 w1x4 s3 bq: group=128 scale=bf16 zero gacc stream-k unrolled", 1e-2,
				     DBG_SK_UNROLL);
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k4", "le2 stream-k unrolled", 1e-2,
				     DBG_SK_UNROLL);
	}
}
END_TEST

/* --debug=qdec (program.c's qdec_rows and qdec_vec): the decode tiles copy
 * only A's live rows and the grouped quantised weights take lane vectors of
 * 2 atoms, against the interpreter at T = 1, 7 and 16, with stream() and the
 * unrolled loop; the kernels' PTX has A's copies with a source size (the
 * zero fill) only with the flag. */
START_TEST(test_program_qdec)
{
	static const int T[] = {1, 7, 16};

	for (size_t i = 0; i < NELEM(T); i++) {
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k3", "scale=bf16 zero vec2 gacc stream-k live-rows",
				     1e-2, DBG_QDEC);
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k4", "scale=f8e8m0 le2 vec2 stream-k live-rows",
				     1e-2, DBG_QDEC);
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k4", "le2 vec2 stream-k unrolled live-rows", 1e-2,
				     DBG_QDEC | DBG_SK_UNROLL);
	}
	GemmSpec q[2];
	gh_spec_grouped_swiglu(&q[0], 32, 5760, 2880, 4);	/* gpt-oss-20b's MXFP4 gate|up, the qdec plan */
	q[0].b_dt = DT_F4E2M1;
	q[0].bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .scales_le2 = 1, .vec = 2};
	gh_tiles(&q[0], 16, 192, 64, 1, 4, 4);
	stream(&q[0], 528, 16);
	q[0].sk_unroll = 1;
	q[1] = q[0];
	q[1].live_rows = 1;
	CgModule *m = gh_emit_specs(gh_targets[2], GH_MMA, q, 2, "qd");	/* sm_90a */
	const char *ptx = gh_ptx(m), *k1 = strstr(ptx, ".entry qd1");
	ck_assert_ptr_nonnull(k1);
	ck_assert_int_eq(gh_count(k1, ", 16, %r"), gh_count(ptx, ", 16, %r"));	/* none in qd_0 */
	ck_assert_int_gt(gh_count(k1, ", 16, %r"), 0);
	cg_module_free(m);
}
END_TEST

/* --debug=live-sums through the plan (program.c's live_sums): the decode
 * tiles' stream-K hand-overs of live rows, with qdec's live rows of A and
 * without, stream() and unrolled, against the interpreter at T = 1, 7, 16. */
START_TEST(test_program_live_sums)
{
	static const int T[] = {1, 7, 16};

	for (size_t i = 0; i < NELEM(T); i++) {
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k3", "gather grouped E=8 live-sums", 1e-2,
				     DBG_LIVE_SUMS);
		gh_check_program_max(prog_moe_direct, T[i], 16, "moe_k4", "grouped E=8 live-sums", 1e-2,
				     DBG_LIVE_SUMS | DBG_QDEC | DBG_SK_UNROLL);
	}
}
END_TEST

/* A launch bound on a wide quantised stream-K tile (GemmSpec.min_ctas, the
 * tuning variants' .lN): .minnctapersm in the PTX, and ptxas fits gpt-oss-20b's
 * 16x192x64 gate|up and down at 5 CTAs of 128 threads (at most 96 registers)
 * without spills; the 320-column tile assembles too.  The spelling: .lN
 * last, 1..32. */
START_TEST(test_ptxas_bound)
{
	GemmSpec s[3];
	CgVariant v;
	char buf[64];

	gh_spec_grouped_swiglu(&s[0], 32, 5760, 2880, 4);
	s[0].b_dt = DT_F4E2M1;
	s[0].bq = (CgBQuant){.group = 32, .scale_dt = DT_F8E8M0, .scales_le2 = 1, .vec = 2};
	gh_tiles(&s[0], 16, 192, 64, 1, 4, 4);
	stream(&s[0], 660, 16);
	s[0].min_ctas = 5;
	gh_spec_grouped_scale_scatter(&s[1], 32, 2880, 2880);
	s[1].m_per_t = 4;
	s[1].b_dt = DT_F4E2M1;
	s[1].bq = s[0].bq;
	gh_tiles(&s[1], 16, 192, 64, 1, 4, 4);
	stream(&s[1], 660, 16);
	s[1].min_ctas = 5;
	s[2] = s[0];
	gh_tiles(&s[2], 16, 320, 64, 1, 4, 3);
	stream(&s[2], 396, 16);
	s[2].min_ctas = 0;
	CgModule *m = gh_emit_specs(gh_targets[2], GH_MMA, s, 3, "qb");	/* sm_90a */
	ck_assert_int_eq(gh_count(gh_ptx(m), ".minnctapersm 5"), 2);
	if (gh_assemble(m, 3, "gemm_mixed bound", GH_NO_SPILLS))
		for (int i = 0; i < 2; i++)
			ck_assert_int_le(cg_module_kernel(m, i)->regs, 96);
	cg_module_free(m);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.p660.l5", &v), 0);
	ck_assert(v.minctas == 5 && v.stream == 660 && v.bn == 192);
	cg_variant_print(&v, buf, sizeof buf);
	ck_assert_str_eq(buf, "16x192x64.w1x4.s4.k1.p660.l5");
	cg_variant_apply(&v, &s[2]);
	ck_assert_int_eq(s[2].min_ctas, 5);
	ck_assert_int_eq(cg_variant_parse("16x320x64.w1x4.s3.k1.p396", &v), 0);
	ck_assert(v.minctas == 0 && v.bn == 320);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.d.l4", &v), 0);
	ck_assert(v.direct && v.minctas == 4);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.l4.d", &v), -1);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.l0", &v), -1);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.l33", &v), -1);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.l", &v), -1);
	ck_assert_int_eq(cg_variant_parse("16x192x64.w1x4.s4.k1.l05", &v), -1);
	ck_assert_int_eq(cg_variant_parse("16x576x64.w1x4.s4.k1", &v), -1);
}
END_TEST

static const struct {
	const char *text;
	int T[2];
	const char *kernel, *note;
	double l2;		/* > 0: relative L2 per output instead of element-wise */
} programs[] = {
	{prog_w4, {19, 200}, "g_k0", "bq: group=128 scale=bf16", 0},
	{prog_w4, {3, 0}, "g_k1_decode", "bq: group=64 scale=f16 zero", 0},
	{prog_f8_channel, {21, 0}, "g_k0", "bf16.f8e4m3->bf16", 0},
	{prog_kn_unfused, {17, 0}, "g_k0", "bf16.bf16->f32 B[K,N]", 0},
	{prog_moe, {29, 90}, "moe_k3", "bf16.i4->bf16 B[N,K] N=256 K=64", 1e-2},
	{prog_moe_fp8, {31, 0}, "moe_k3", "bf16.f8e4m3->f8e4m3 B[N,K] N=256 K=64", 2e-2},
	{prog_moe, {5, 0}, "moe_k4_decode", "bf16.f8e4m3->f32 B[N,K] N=64 K=128", 1e-2},
};

START_TEST(test_program_against_interpreter)
{
	for (int i = 0; i < 2 && programs[_i].T[i] > 0; i++)
		gh_check_program_l2(programs[_i].text, programs[_i].T[i], programs[_i].kernel, programs[_i].note,
				    programs[_i].l2);
}
END_TEST

Suite *
gemm_mixed_suite(void)
{
	Suite *s = suite_create("gemm_mixed");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_pack_layout);
	tcase_add_test(t, test_pack_refusals);
	tcase_add_test(t, test_synth_layout);
	tcase_add_test(t, test_synth_refusals);
	tcase_add_test(t, test_e8m0_pair);
	tcase_add_test(t, test_e8m0_one_mul);
	tcase_add_test(t, test_deep_ktiles);
	tcase_add_test(t, test_checks);
	tcase_add_test(t, test_params);
	tcase_add_test(t, test_ptxas);
	tcase_add_test(t, test_ptxas_direct);
	tcase_add_test(t, test_i4_decode);
	tcase_add_test(t, test_u4_zero_groups_in_tile);
	tcase_add_test(t, test_group_spans_tiles);
	tcase_add_test(t, test_f8);
	tcase_add_test(t, test_mxfp4);
	tcase_add_test(t, test_grouped);
	tcase_add_test(t, test_decode_variants);
	tcase_add_test(t, test_ptxas_bound);
	suite_add_tcase(s, t);
	/* the long emulated cases apart, so that ctest -j runs them side by side */
	t = tcase_create("direct");	/* B read straight from global memory */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_direct);
	tcase_add_test(t, test_program_direct);
	suite_add_tcase(s, t);
	t = tcase_create("stream");	/* stream-K */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_stream);
	tcase_add_test(t, test_program_stream);
	tcase_add_test(t, test_program_sk_unroll);
	tcase_add_test(t, test_program_qdec);
	suite_add_tcase(s, t);
	t = tcase_create("live_sums");	/* stream-K hand-overs of the tiles' rows (--debug=live-sums) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_stream_live_sums);
	tcase_add_test(t, test_program_live_sums);
	suite_add_tcase(s, t);
	t = tcase_create("qahead");	/* quantised B ahead of the grid wait (--debug=qahead) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_stream_ahead);
	tcase_add_test(t, test_program_qahead);
	suite_add_tcase(s, t);
	t = tcase_create("gacc");	/* group sums (--debug=bq-gacc) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_gacc);
	suite_add_tcase(s, t);
	t = tcase_create("programs");	/* whole blocks against the interpreter */
	tcase_set_timeout(t, 300);
	tcase_add_loop_test(t, test_program_against_interpreter, 0, (int)NELEM(programs));
	suite_add_tcase(s, t);
	return s;
}
