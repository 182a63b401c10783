/*
 * check_util.c — arenas, interning, CRC, dtype conversions, tensor files.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

START_TEST(test_arena_alloc_is_aligned_and_zeroed)
{
	Arena *a = arena_new(64);
	char *p = arena_alloc(a, 3);
	char *q = arena_alloc(a, 1000);

	ck_assert_ptr_ne(p, q);
	ck_assert_uint_eq((uintptr_t)q % 16, 0);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(q[i], 0);
	arena_free(a);
}
END_TEST

START_TEST(test_str_intern_returns_one_copy)
{
	Arena *a = arena_new(0);
	StrSet s = {a, NULL, 0, 0};
	char buf[32];

	const char *x = str_intern(&s, "router.weight");
	for (int i = 0; i < 500; i++) {
		snprintf(buf, sizeof buf, "v%d", i);
		str_intern(&s, buf);
	}
	ck_assert_ptr_eq(x, str_intern(&s, "router.weight"));
	ck_assert_ptr_eq(str_find(&s, "v499"), str_intern(&s, "v499"));
	ck_assert_ptr_null(str_find(&s, "nope"));
	str_free(&s);
	arena_free(a);
}
END_TEST

START_TEST(test_crc32c_known_value)
{
	/* the standard check value of CRC-32C */
	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xe3069283u);
	/* incremental equals one shot */
	ck_assert_uint_eq(crc32c(crc32c(0, "12345", 5), "6789", 4), 0xe3069283u);
}
END_TEST

START_TEST(test_bf16_rounds_to_nearest_even)
{
	ck_assert_uint_eq(f32_to_bf16(1.0f), 0x3f80);
	/* 1 + 2^-8 is halfway between 1 and 1+2^-7: ties to even (1.0) */
	ck_assert_uint_eq(f32_to_bf16(1.00390625f), 0x3f80);
	/* 1 + 3*2^-8 ties up to 1 + 2^-6 */
	ck_assert_uint_eq(f32_to_bf16(1.01171875f), 0x3f82);
	ck_assert(isnan(bf16_to_f32(f32_to_bf16(NAN))));
}
END_TEST

START_TEST(test_f16_exact_and_overflow)
{
	ck_assert_uint_eq(f32_to_f16(1.0f), 0x3c00);
	ck_assert_uint_eq(f32_to_f16(65504.0f), 0x7bff);
	ck_assert_uint_eq(f32_to_f16(70000.0f), 0x7c00);
	ck_assert_uint_eq(f32_to_f16(-2.0f), 0xc000);
	ck_assert_float_eq(f16_to_f32(0x0001), ldexpf(1, -24));	/* smallest subnormal */
	for (unsigned h = 0; h < 0x7c00; h++)	/* every finite positive f16 round-trips */
		ck_assert_uint_eq(f32_to_f16(f16_to_f32((uint16_t)h)), h);
}
END_TEST

START_TEST(test_f8_roundtrip_and_saturation)
{
	for (unsigned v = 0; v < 256; v++) {
		if ((v & 0x7f) != 0x7f)
			ck_assert_uint_eq(f32_to_f8e4m3(f8e4m3_to_f32((uint8_t)v)), v);
		if (((v >> 2) & 0x1f) != 0x1f)
			ck_assert_uint_eq(f32_to_f8e5m2(f8e5m2_to_f32((uint8_t)v)), v);
	}
	ck_assert_float_eq(f8e4m3_to_f32(f32_to_f8e4m3(1000.0f)), 448.0f);
	ck_assert_float_eq(f8e4m3_to_f32(f32_to_f8e4m3(-1000.0f)), -448.0f);
	ck_assert_float_eq(f8e4m3_to_f32(0x01), ldexpf(1, -9));
}
END_TEST

/* e4m3fn against the definition: the nearest of the 253 finite values
 * (ties to the even code), saturating at 448; every code's value from
 * its fields, sampled floats over the whole range, midpoints included. */
static float
e4m3_value(unsigned v)
{
	int e = (v >> 3) & 15, m = v & 7;
	float x = e ? ldexpf(1 + m / 8.0f, e - 7) : ldexpf((float)m, -9);
	return v & 0x80 ? -x : x;
}

static unsigned
e4m3_nearest(float f)
{
	unsigned best = 0;
	double bd = INFINITY;

	if (fabsf(f) > 448)
		return signbit(f) ? 0xfe : 0x7e;
	for (unsigned v = 0; v < 256; v++) {
		double d = fabs((double)f - e4m3_value(v));
		if ((v & 0x7f) == 0x7f || (v == 0x80 && !signbit(f)) || (v == 0 && signbit(f)))
			continue;
		if (d < bd || (d == bd && !(v & 1) && (best & 1)))
			best = v, bd = d;
	}
	return best;
}

START_TEST(test_f8e4m3_against_definition)
{
	uint64_t r = 1;

	for (unsigned v = 0; v < 256; v++)
		if ((v & 0x7f) != 0x7f)
			ck_assert_float_eq(f8e4m3_to_f32((uint8_t)v), e4m3_value(v));
	for (unsigned v = 0; v + 1 < 127; v++) {	/* midpoints and their neighbours */
		float mid = (e4m3_value(v) + e4m3_value(v + 1)) / 2;
		float near[3] = {mid, nextafterf(mid, 0), nextafterf(mid, 1000)};
		for (int i = 0; i < 3; i++) {
			ck_assert_uint_eq(f32_to_f8e4m3(near[i]), e4m3_nearest(near[i]));
			ck_assert_uint_eq(f32_to_f8e4m3(-near[i]), e4m3_nearest(-near[i]));
		}
	}
	for (int i = 0; i < 200000; i++) {	/* |f| from 2^-12 to 2^10 */
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		float f = ldexpf(1 + (float)(r >> 40) / 16777216.0f, (int)((r >> 20) % 23) - 12);
		f = r & 1 ? -f : f;
		ck_assert_uint_eq(f32_to_f8e4m3(f), e4m3_nearest(f));
	}
	ck_assert_uint_eq(f32_to_f8e4m3(INFINITY), 0x7e);
	ck_assert_uint_eq(f32_to_f8e4m3(-INFINITY), 0xfe);
	ck_assert_uint_eq(f32_to_f8e4m3(NAN), 0x7f);
	ck_assert_uint_eq(f32_to_f8e4m3(-0.0f), 0x80);
	ck_assert_uint_eq(f32_to_f8e4m3(ldexpf(1, -10)), 0);	/* the tie of 0 and 2^-9: to 0 */
}
END_TEST

/* OCP MX: e2m1 is {0, .5, 1, 1.5, 2, 3, 4, 6}; e8m0 is 2^(e-127). */
START_TEST(test_f4e2m1_and_f8e8m0)
{
	static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
	uint8_t b[2] = {0, 0};

	for (unsigned v = 0; v < 16; v++) {
		ck_assert_float_eq(f4e2m1_to_f32(v), (v & 8 ? -1 : 1) * e2m1[v & 7]);
		ck_assert_uint_eq(f32_to_f4e2m1(f4e2m1_to_f32(v)), v);
	}
	ck_assert_uint_eq(f32_to_f4e2m1(0.25f), 0);	/* ties to even */
	ck_assert_uint_eq(f32_to_f4e2m1(0.75f), 2);
	ck_assert_uint_eq(f32_to_f4e2m1(2.5f), 4);
	ck_assert_uint_eq(f32_to_f4e2m1(3.5f), 6);
	ck_assert_uint_eq(f32_to_f4e2m1(5.0f), 6);
	ck_assert_uint_eq(f32_to_f4e2m1(5.1f), 7);
	ck_assert_uint_eq(f32_to_f4e2m1(-100.0f), 15);	/* saturates */
	ck_assert_uint_eq(f32_to_f4e2m1(INFINITY), 7);
	ck_assert_uint_eq(f32_to_f4e2m1(NAN), 8);	/* -0, as ml_dtypes */
	dtype_store(DT_F4E2M1, b, 0, -1.5);
	dtype_store(DT_F4E2M1, b, 1, 4);
	dtype_store(DT_F4E2M1, b, 2, 0.5);
	ck_assert_uint_eq(b[0], 0x6b);	/* low nibble first */
	ck_assert_double_eq(dtype_load(DT_F4E2M1, b, 2), 0.5);
	ck_assert_uint_eq(dtype_bytes(DT_F4E2M1, 3), 2);
	ck_assert(dtype_is_packed(DT_F4E2M1) && !dtype_is_packed(DT_F8E8M0));
	for (unsigned v = 0; v < 255; v++) {
		ck_assert_float_eq(f8e8m0_to_f32((uint8_t)v), ldexpf(1, (int)v - 127));
		ck_assert_uint_eq(f32_to_f8e8m0(f8e8m0_to_f32((uint8_t)v)), v);
	}
	ck_assert(isnan(f8e8m0_to_f32(0xff)));
	ck_assert_uint_eq(f32_to_f8e8m0(3.0f), 129);	/* rounds up: 4 */
	ck_assert_uint_eq(f32_to_f8e8m0(0.75f), 127);
	ck_assert_uint_eq(f32_to_f8e8m0(-2.0f), 128);	/* no sign */
	ck_assert_uint_eq(f32_to_f8e8m0(0.0f), 0);
	ck_assert_uint_eq(f32_to_f8e8m0(3e38f), 254);	/* saturates */
	ck_assert_uint_eq(f32_to_f8e8m0(NAN), 255);
	ck_assert_uint_eq(f32_to_f8e8m0(INFINITY), 255);
	ck_assert_int_eq(dtype_onnx(DT_F4E2M1), 23);
	ck_assert_int_eq(dtype_onnx(DT_F8E8M0), 24);
}
END_TEST

START_TEST(test_i4_packs_low_nibble_first)
{
	uint8_t b[2] = {0, 0};

	dtype_store_int(DT_I4, b, 0, -1);
	dtype_store_int(DT_I4, b, 1, 3);
	dtype_store_int(DT_I4, b, 2, 9);	/* saturates to 7 */
	ck_assert_uint_eq(b[0], 0x3f);
	ck_assert_int_eq(dtype_load_int(DT_I4, b, 0), -1);
	ck_assert_int_eq(dtype_load_int(DT_I4, b, 2), 7);
}
END_TEST

static void
roundtrip(const char *path, DType dt)
{
	Tensor t, u;
	int64_t dim[3] = {2, 3, 4};
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(tensor_alloc(&t, dt, 3, dim), 0);
	for (int i = 0; i < 24; i++)
		dtype_store(dt, t.data, (size_t)i, i - 7);
	ck_assert_int_eq(tensor_write(path, &t, &d), 0);
	ck_assert_int_eq(tensor_read(path, &u, &d), 0);
	ck_assert_int_eq(u.rank, 3);
	ck_assert_int_eq(u.dim[2], 4);
	for (int i = 0; i < 24; i++)
		ck_assert_double_eq(dtype_load(u.dt, u.data, (size_t)i), i - 7);
	tensor_free(&t);
	tensor_free(&u);
	remove(path);
}

START_TEST(test_tensor_files_roundtrip)
{
	roundtrip("/tmp/moec_check_t.npy", DT_F32);
	roundtrip("/tmp/moec_check_t.npy", DT_I64);
	roundtrip("/tmp/moec_check_t.pb", DT_BF16);
	roundtrip("/tmp/moec_check_t.pb", DT_I32);
}
END_TEST

START_TEST(test_pb_rejects_truncation)
{
	Tensor t;
	Diag d;
	/* dims {2}, data_type f32, raw_data length 8 but only 3 bytes present */
	const unsigned char buf[] = {0x08, 0x02, 0x10, 0x01, 0x4a, 0x08, 1, 2, 3};

	diag_init(&d, NULL);
	ck_assert_int_eq(pb_tensor_decode("t.pb", buf, sizeof buf, &t, &d), -1);
	ck_assert_int_eq(d.nerror, 1);
	ck_assert(strstr(d.last, "t.pb") != NULL);
}
END_TEST

START_TEST(test_str_remove_keeps_the_rest_findable)
{
	Arena *a = arena_new(0);
	StrSet s = {a, NULL, 0, 0};
	char buf[32];

	for (int i = 0; i < 300; i++) {
		snprintf(buf, sizeof buf, "t%d", i);
		str_intern(&s, buf);
	}
	for (int i = 0; i < 300; i += 3) {
		snprintf(buf, sizeof buf, "t%d", i);
		str_remove(&s, buf);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(buf, sizeof buf, "t%d", i);
		if (i % 3 == 0)
			ck_assert_ptr_null(str_find(&s, buf));
		else
			ck_assert_ptr_nonnull(str_find(&s, buf));
	}
	ck_assert_uint_eq(s.n, 200);
	str_free(&s);
	arena_free(a);
}
END_TEST

/* A routing of T=3 tokens over E=4 experts, top-2, from given values. */
static void
make_routing(Routing *r, const float *val, const int32_t *ids, int64_t ngroup)
{
	memset(r, 0, sizeof *r);
	r->T = 3, r->E = 4, r->k = 2, r->ngroup = ngroup, r->what = "logit";
	r->val = xmalloc(sizeof *r->val * 12);
	r->ids = xmalloc(sizeof *r->ids * 6);
	memcpy(r->val, val, sizeof *r->val * 12);
	memcpy(r->ids, ids, sizeof *r->ids * 6);
}

START_TEST(test_routing_flip_near_tie_or_not)
{
	/* token 0: experts 2 and 3 tie within 1e-6; token 2: a clear choice */
	static const float val[12] = {0.9f, 0.1f, 0.5f, 0.5000005f, 0.1f, 0.8f, 0.7f, 0.2f,
				      0.3f, 0.0f, 0.9f, 0.8f};
	static const int32_t ref_ids[6] = {0, 3, 1, 2, 2, 3};
	static const int32_t got_ids[6] = {0, 2, 2, 1, 2, 0};	/* token 1 reordered only */
	Routing a, b;
	RouteFlip f[4];
	char msg[256];

	make_routing(&a, val, ref_ids, 1);
	make_routing(&b, val, got_ids, 1);
	ck_assert_int_eq(routing_compare(&a, &b, 1e-4, 1e-3, f, 4), 2);
	ck_assert_int_eq(f[0].token, 0);
	ck_assert(f[0].near_tie);
	ck_assert_int_eq(f[1].token, 2);
	ck_assert(!f[1].near_tie);
	ck_assert_double_eq_tol(f[1].gap, 0.8 - 0.3, 1e-6);
	routing_describe(msg, sizeof msg, &a, &b, &f[1]);
	ck_assert_str_eq(msg, "token 2: experts {2,3} vs {2,0}, logit gap 0.5 (beyond a near tie)");
	/* with no tolerance, the tie is a flip like any other */
	ck_assert_int_eq(routing_compare(&a, &b, 0, 0, f, 4), 2);
	ck_assert(!f[0].near_tie);
	routing_free(&a);
	routing_free(&b);
}
END_TEST

START_TEST(test_routing_gap_between_groups)
{
	/* 2 groups of 2: token 0 picks group 0 (0.9+0.1 vs 0.6+0.4 with top2
	 * scoring: a tie of group scores), its experts far apart */
	static const float val[12] = {0.9f, 0.1f, 0.6f, 0.4f, 0, 0, 0, 0, 0, 0, 0, 0};
	static const int32_t ref_ids[6] = {0, 1, 0, 1, 0, 1};
	static const int32_t got_ids[6] = {2, 3, 0, 1, 0, 1};
	Routing a, b;
	RouteFlip f[2];

	make_routing(&a, val, ref_ids, 2);
	make_routing(&b, val, got_ids, 2);
	a.top2 = b.top2 = 1;
	ck_assert_int_eq(routing_compare(&a, &b, 1e-4, 1e-3, f, 2), 1);
	ck_assert(f[0].near_tie);
	ck_assert_double_lt(f[0].gap, 1e-6);
	routing_free(&a);
	routing_free(&b);
}
END_TEST

START_TEST(test_routing_clear_of_ties_by_groups)
{
	/* 2 groups of 2, one kept, top-1: token 0's best unchosen expert (0.5)
	 * is in the group left out, so only 0.1 competes; token 1's groups tie */
	static const float val[8] = {0.9f, 0.1f, 0.5f, 0.45f, 0.9f, 0.1f, 0.8999f, 0.0f};
	static const int32_t ids[2] = {0, 0};
	Routing r = {.T = 2, .E = 4, .k = 1, .ngroup = 2, .topk_group = 1, .what = "score"};

	r.val = xmalloc(sizeof val);
	r.ids = xmalloc(sizeof ids);
	memcpy(r.val, val, sizeof val);
	memcpy(r.ids, ids, sizeof ids);
	ck_assert(routing_clear(&r, 0, 1e-4, 1e-3));
	ck_assert(!routing_clear(&r, 1, 1e-4, 1e-3));
	r.ngroup = 1;	/* without groups, 0.8999 competes with 0.9 */
	ck_assert(!routing_clear(&r, 1, 1e-4, 1e-3));
	ck_assert(routing_clear(&r, 0, 1e-4, 1e-3));
	routing_free(&r);
}
END_TEST

/* What a sigmoid router with a selection bias ranks, from its logits (moert
 * test's device values): sigmoid(l) + bias in f32, "score"; a softmax's
 * row sums to 1; bare logits stay as they are.  A flip that is a near tie
 * only in those values (token 0: expert 1's logit is far below expert 2's,
 * the bias closes the gap) is one; the logits alone would call it wrong. */
START_TEST(test_routing_select_sigmoid_bias)
{
	static const float logit[4] = {2.0f, -1.0f, 1.0f, -3.0f};
	static const float bias[4] = {0.0f, 0.462f, 0.0f, 0.1f};
	static const int32_t ref_ids[2] = {0, 2}, got_ids[2] = {0, 1};
	Routing a = {.T = 1, .E = 4, .k = 2, .ngroup = 1, .topk_group = 1, .what = "logit"};
	Routing b = a;
	RouteFlip f;

	ck_assert_str_eq(route_select_name(ROUTE_SELECT_SIGMOID), "sigmoid");
	ck_assert_int_eq(route_select_parse("softmax", 7), ROUTE_SELECT_SOFTMAX);
	ck_assert_int_eq(route_select_parse("logits", 6), -1);
	a.val = xmalloc(sizeof logit), b.val = xmalloc(sizeof logit);
	memcpy(a.val, logit, sizeof logit), memcpy(b.val, logit, sizeof logit);
	a.ids = xmalloc(sizeof ref_ids), b.ids = xmalloc(sizeof got_ids);
	memcpy(a.ids, ref_ids, sizeof ref_ids), memcpy(b.ids, got_ids, sizeof got_ids);
	routing_select(&b, ROUTE_SELECT_LOGIT, NULL);
	ck_assert_str_eq(b.what, "logit");
	ck_assert(b.val[1] == -1.0f);
	ck_assert_int_eq(routing_compare(&b, &a, 1e-3, 1e-2, &f, 1), 1);
	ck_assert(!f.near_tie);	/* logits -1 and 1: far apart */
	routing_select(&a, ROUTE_SELECT_SIGMOID, bias);
	ck_assert_str_eq(a.what, "score");
	ck_assert_float_eq(a.val[0], (float)(1 / (1 + exp(-2.0))));
	ck_assert_float_eq(a.val[1], (float)(1 / (1 + exp(1.0))) + 0.462f);
	ck_assert_float_eq(a.val[3], (float)(1 / (1 + exp(3.0))) + 0.1f);
	ck_assert_double_lt(fabs(a.val[1] - a.val[2]), 2e-4);
	ck_assert_int_eq(routing_compare(&a, &b, 1e-3, 1e-2, &f, 1), 1);
	ck_assert(f.near_tie);	/* 0.73094 vs 0.73106 */
	ck_assert_double_lt(f.gap, 2e-4);
	routing_select(&b, ROUTE_SELECT_SOFTMAX, NULL);
	ck_assert_str_eq(b.what, "score");
	ck_assert_double_lt(fabs(b.val[0] + b.val[1] + b.val[2] + b.val[3] - 1.0), 1e-6);
	ck_assert(b.val[0] > b.val[2] && b.val[2] > b.val[1] && b.val[1] > b.val[3]);
	routing_free(&a);
	routing_free(&b);
}
END_TEST

START_TEST(test_routing_near_ties_only_failed_rows)
{
	/* the device's own routing: token 0 a near tie (3 at 0.5000005 vs 2 at
	 * 0.5), token 1 a clear choice, token 2 a near tie whose row passed */
	static const float val[12] = {0.9f, 0.1f, 0.5f, 0.5000005f, 0.1f, 0.8f, 0.7f, 0.2f,
				      0.3f, 0.0f, 0.8f, 0.8000001f};
	static const int32_t ids[6] = {0, 3, 1, 2, 3, 2};
	static const unsigned char bad[3] = {1, 1, 0};
	Routing r;
	RouteDiff d = {0};

	make_routing(&r, val, ids, 1);
	ck_assert_int_eq(routing_near_ties(&r, bad, 1e-4, 1e-3, &d), 1);
	ck_assert_int_eq(d.T, 3);
	ck_assert_int_eq(d.nflip, 1);
	ck_assert_int_eq(d.nbad, 0);
	ck_assert(d.drop[0] && !d.drop[1] && !d.drop[2]);
	ck_assert_str_eq(d.msg, "token 0: experts {0,3}, expert 2 within 4.8e-07 of 3: a near tie");
	/* token 1 fails for a reason the routing does not explain: kept */
	ck_assert(routing_clear(&r, 1, 1e-4, 1e-3));
	/* with no tolerance nothing is a near tie */
	route_diff_free(&d);
	ck_assert_int_eq(routing_near_ties(&r, bad, 0, 0, &d), 0);
	ck_assert(!d.drop[0]);
	route_diff_free(&d);
	routing_free(&r);
}
END_TEST

/* Leaving near-tie rows out never fails what passes whole: 4 rows of 100
 * bf16 values, one element of row 3 off (allowed: 400/200 = 2 whole, but
 * 200/200 = 1 of the two rows kept, and 0 of one), and a row left out that
 * makes a failing output pass. */
START_TEST(test_routing_close_never_stricter)
{
	int64_t dim[2] = {4, 100};
	Tensor a, b;
	RouteDiff d = {0};
	Compare c;

	ck_assert_int_eq(tensor_alloc(&a, DT_BF16, 2, dim), 0);
	ck_assert_int_eq(tensor_alloc(&b, DT_BF16, 2, dim), 0);
	for (int i = 0; i < 400; i++) {
		dtype_store(DT_BF16, a.data, (size_t)i, 1.0 + (i % 7) * 0.25);
		dtype_store(DT_BF16, b.data, (size_t)i, 1.0 + (i % 7) * 0.25);
	}
	dtype_store(DT_BF16, a.data, 350, 1.5);	/* row 3, off by 0.25 or more */
	d.T = 4, d.nflip = 3;
	d.drop = xcalloc(4, 1);
	d.drop[0] = d.drop[1] = d.drop[2] = 1;	/* kept: row 3 alone, 100 values, none allowed */
	ck_assert(routing_close(&a, &b, NULL, DT_BF16, &c));
	ck_assert(routing_close(&a, &b, &d, DT_BF16, &c));
	ck_assert_int_eq(c.nbad, 1);		/* the whole comparison, the one that passed */
	for (int i = 0; i < 100; i++)		/* row 0 wrong: fails whole, passes without it */
		dtype_store(DT_BF16, a.data, (size_t)i, 9.0);
	dtype_store(DT_BF16, a.data, 350, dtype_load(DT_BF16, b.data, 350));
	ck_assert(!routing_close(&a, &b, NULL, DT_BF16, &c));
	d.drop[1] = d.drop[2] = 0;
	ck_assert(routing_close(&a, &b, &d, DT_BF16, &c));
	ck_assert_int_eq(c.nbad, 0);
	d.drop[0] = 0, d.drop[1] = 1;		/* the wrong row kept: fails */
	ck_assert(!routing_close(&a, &b, &d, DT_BF16, &c));
	route_diff_free(&d);
	tensor_free(&a);
	tensor_free(&b);
}
END_TEST

START_TEST(test_route_log_compare_drops_flipped_rows)
{
	static const float val[12] = {0.9f, 0.1f, 0.5f, 0.5000005f, 0.1f, 0.8f, 0.7f, 0.2f,
				      0.3f, 0.0f, 0.9f, 0.8f};
	static const int32_t ref_ids[6] = {0, 3, 1, 2, 2, 3};
	static const int32_t got_ids[6] = {0, 2, 1, 2, 2, 3};
	RouteLog ref = {0}, got = {0};
	RouteDiff d;
	Routing r;
	Tensor t, kept;
	int64_t dim[2] = {3, 2};

	make_routing(&r, val, ref_ids, 1);
	route_log_push(&ref, &r);
	make_routing(&r, val, got_ids, 1);
	route_log_push(&got, &r);
	ck_assert_int_eq(route_log_compare(&ref, &got, 1e-4, 1e-3, &d), 1);
	ck_assert_int_eq(d.nflip, 1);
	ck_assert_int_eq(d.nbad, 0);
	ck_assert_int_eq(d.T, 3);
	ck_assert(d.drop[0] && !d.drop[1] && !d.drop[2]);
	ck_assert_ptr_nonnull(strstr(d.msg, "token 0: experts {0,3} vs {0,2}"));
	ck_assert_int_eq(tensor_alloc(&t, DT_F32, 2, dim), 0);
	for (int i = 0; i < 6; i++)
		((float *)t.data)[i] = (float)i;
	ck_assert_int_eq(tensor_drop_rows(&t, d.T, d.drop, &kept), 0);
	ck_assert_int_eq(kept.dim[0], 2);
	ck_assert_int_eq(kept.dim[1], 2);
	ck_assert_float_eq(((float *)kept.data)[0], 2.0f);
	tensor_free(&kept);
	ck_assert_int_eq(tensor_drop_rows(&t, 4, d.drop, &kept), -1);	/* 6 elements, not 4 rows */
	tensor_free(&t);
	route_diff_free(&d);
	route_log_free(&ref);
	route_log_free(&got);
}
END_TEST

/* debug.c's table: each flag one bit of its own below DBG_NBITS, each name
 * once, and --debug=NAME sets exactly that bit (a copied row or a bit past
 * the type's width would make two flags one switch). */
START_TEST(test_debug_flags_one_bit_each)
{
	DbgFlags all = 0, f;
	char why[128];

	ck_assert(DBG_BIT(DBG_NBITS - 1) != 0 && DBG_BIT(DBG_NBITS - 1) > DBG_BIT(63));
	for (int i = 0; i < ndebug_flags; i++) {
		DbgFlags b = debug_flags[i].bit;
		ck_assert_msg(b && !(b & (b - 1)), "%s: not one bit", debug_flags[i].name);
		ck_assert_msg(!(all & b), "%s: a bit another flag has", debug_flags[i].name);
		all |= b;
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(debug_flags[i].name, debug_flags[j].name);
		f = 0;
		ck_assert_int_eq(debug_parse(debug_flags[i].name, &f, why, sizeof why), 0);
		ck_assert(f == b);
	}
	f = 0;
	ck_assert_int_eq(debug_parse("fold,no-such-flag", &f, why, sizeof why), -1);
	ck_assert_ptr_nonnull(strstr(why, "no-such-flag"));
}
END_TEST

Suite *
util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_arena_alloc_is_aligned_and_zeroed);
	tcase_add_test(tc, test_str_intern_returns_one_copy);
	tcase_add_test(tc, test_crc32c_known_value);
	tcase_add_test(tc, test_bf16_rounds_to_nearest_even);
	tcase_add_test(tc, test_f16_exact_and_overflow);
	tcase_add_test(tc, test_f8_roundtrip_and_saturation);
	tcase_add_test(tc, test_f8e4m3_against_definition);
	tcase_add_test(tc, test_i4_packs_low_nibble_first);
	tcase_add_test(tc, test_f4e2m1_and_f8e8m0);
	tcase_add_test(tc, test_tensor_files_roundtrip);
	tcase_add_test(tc, test_pb_rejects_truncation);
	tcase_add_test(tc, test_str_remove_keeps_the_rest_findable);
	tcase_add_test(tc, test_routing_flip_near_tie_or_not);
	tcase_add_test(tc, test_routing_gap_between_groups);
	tcase_add_test(tc, test_routing_clear_of_ties_by_groups);
	tcase_add_test(tc, test_routing_near_ties_only_failed_rows);
	tcase_add_test(tc, test_routing_select_sigmoid_bias);
	tcase_add_test(tc, test_routing_close_never_stricter);
	tcase_add_test(tc, test_route_log_compare_drops_flipped_rows);
	tcase_add_test(tc, test_debug_flags_one_bit_each);
	suite_add_tcase(s, tc);
	return s;
}
