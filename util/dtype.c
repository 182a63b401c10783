/*
 * dtype.c — the element-type table and exact conversions between every
 * storage type and double.
 *
 * Reading is exact.  Writing a float type rounds to nearest even, first to
 * f32 and then to the narrower format; f8 saturates (ONNX saturate=1).
 * Writing an integer type truncates toward zero and saturates, as a C cast
 * of an in-range value does.  f4e2m1 (OCP MX FP4) rounds to nearest even and
 * saturates to +-6 like f8e4m3 (it has no inf or NaN: NaN becomes -0, as
 * ml_dtypes and ONNX's Cast tests have it);
 * f8e8m0 (the MX scale: 2^(e-127), no sign, no zero, 0xff NaN) rounds up to
 * the next power of two, as ONNX Cast's default round_mode=up, and saturates
 * (at both ends: ONNX's reference rounds an f32 subnormal 2^-127 up to 2^-126).
 */
#include <math.h>
#include <string.h>

#include "util.h"

static const struct {
	const char *name;
	int bits, onnx, flags;
} dtab[NDTYPE] = {
#define DTYPE(e, s, bits, onnx, fl) [DT_##e] = {s, bits, onnx, fl},
#include "dtype.def"
#undef DTYPE
};

const char *
dtype_name(DType t)
{
	return (unsigned)t < NDTYPE ? dtab[t].name : "?";
}

int
dtype_parse(const char *s, size_t n, DType *t)
{
	for (int i = 0; i < NDTYPE; i++)
		if (!(dtab[i].flags & DTF_COMPUTE) && strlen(dtab[i].name) == n &&
		    memcmp(dtab[i].name, s, n) == 0) {
			*t = (DType)i;
			return 0;
		}
	return -1;
}

int
precision_parse(const char *s, size_t n, DType *t)
{
	if (n == 4 && memcmp(s, "tf32", 4) == 0) {
		*t = DT_TF32;
		return 0;
	}
	return dtype_parse(s, n, t) || (*t != DT_F32 && *t != DT_BF16 && *t != DT_F16) ? -1 : 0;
}

int dtype_bits(DType t) { return dtab[t].bits; }
int dtype_flags(DType t) { return dtab[t].flags; }
int dtype_onnx(DType t) { return dtab[t].onnx; }
int dtype_is_float(DType t) { return dtab[t].flags & DTF_FLOAT; }
int dtype_is_int(DType t) { return dtab[t].flags & DTF_INT; }

int
dtype_from_onnx(int code, DType *t)
{
	for (int i = 0; i < NDTYPE; i++)
		if (dtab[i].onnx == code && code >= 0) {
			*t = (DType)i;
			return 0;
		}
	return -1;
}

int dtype_is_packed(DType t) { return dtab[t].bits == 4; }
int dtype_is_quantised(DType t) { return dtab[t].bits <= 8 && t != DT_BOOL; }

size_t
dtype_bytes(DType t, size_t n)
{
	return (n * (size_t)dtab[t].bits + 7) / 8;
}

static float
f32_of_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t
bits_of_f32(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

float
bf16_to_f32(uint16_t h)
{
	return f32_of_bits((uint32_t)h << 16);
}

uint16_t
f32_to_bf16(float f)
{
	uint32_t u = bits_of_f32(f);

	if (isnan(f))
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/* bf16 bits h: zero, or a finite value with a nonzero exponent field */
static int
bf16_normal_or_zero(uint16_t h)
{
	unsigned e = (h >> 7) & 0xff;

	return (h & 0x7fff) == 0 || (e != 0 && e != 0xff);
}

int
bf16_split3(float w, uint16_t part[3])
{
	double r = w;

	if (!isfinite(w))
		return -1;
	if (w == 0) {	/* -0 too: (-0 + -0) + -0 is -0 */
		part[0] = part[1] = part[2] = f32_to_bf16(w);
		return 0;
	}
	for (int i = 0; i < 3; i++) {
		part[i] = f32_to_bf16((float)r);	/* r is an f32 value: w minus bf16 parts, exact */
		if (!bf16_normal_or_zero(part[i]))
			return -1;
		r -= bf16_to_f32(part[i]);
	}
	return r == 0 ? 0 : -1;
}

float
f32_to_tf32(float f)
{
	uint32_t u = bits_of_f32(f);

	if (isnan(f))
		return f32_of_bits((u | 0x400000) & ~0x1fffu);	/* quiet, still a NaN */
	return f32_of_bits((u + 0x1000) & ~0x1fffu);	/* ties away; the top rounds to inf */
}

/*
 * A small float format: 1 sign bit, ebits exponent bits with the given bias,
 * mbits mantissa bits.  Decoding is generic; the special values differ.
 */
static double
decode_small(unsigned v, int ebits, int mbits, int bias)
{
	int s = (v >> (ebits + mbits)) & 1;
	int e = (v >> mbits) & ((1 << ebits) - 1);
	int m = v & ((1 << mbits) - 1);
	double x;

	if (e == 0)
		x = ldexp(m, 1 - bias - mbits);
	else
		x = ldexp(m + (1 << mbits), e - bias - mbits);
	return s ? -x : x;
}

/* Round a finite nonzero |x| to mbits fraction bits, exponent >= emin. */
static double
round_fmt(double x, int mbits, int emin)
{
	int e;

	frexp(x, &e);
	e -= 1;
	if (e < emin)
		e = emin;
	double q = ldexp(1.0, e - mbits);
	return nearbyint(x / q) * q;
}

/* Encode a value already representable in the format (|x| <= max). */
static unsigned
encode_small(double x, int ebits, int mbits, int bias)
{
	unsigned s = signbit(x) ? 1u : 0u, e, m;
	int ex;

	x = fabs(x);
	if (x == 0)
		return s << (ebits + mbits);
	frexp(x, &ex);
	ex -= 1;
	if (ex < 1 - bias) {	/* subnormal */
		e = 0;
		m = (unsigned)ldexp(x, bias - 1 + mbits);
	} else {
		e = (unsigned)(ex + bias);
		m = (unsigned)(ldexp(x, mbits - ex) - (1 << mbits));
	}
	return s << (ebits + mbits) | e << mbits | m;
}

float
f16_to_f32(uint16_t h)
{
	if (((h >> 10) & 0x1f) == 0x1f)
		return (h & 0x3ff) ? NAN : (h & 0x8000 ? -INFINITY : INFINITY);
	return (float)decode_small(h, 5, 10, 15);
}

uint16_t
f32_to_f16(float f)
{
	double x;

	if (isnan(f))
		return 0x7e00;
	if (isinf(f))
		return signbit(f) ? 0xfc00 : 0x7c00;
	if (f == 0)
		return signbit(f) ? 0x8000 : 0;
	x = round_fmt(fabs(f), 10, -14);
	if (x > 65504)
		return signbit(f) ? 0xfc00 : 0x7c00;
	return (uint16_t)encode_small(signbit(f) ? -x : x, 5, 10, 15);
}

/* e4m3fn in bit operations: the interpreter converts every element of an FP8
 * expert stack (22.5 G of DeepSeek-V3's) through these two. */
float
f8e4m3_to_f32(uint8_t v)
{
	uint32_t s = (uint32_t)(v >> 7) << 31, e = (v >> 3) & 15, m = v & 7;

	if ((v & 0x7f) == 0x7f)
		return NAN;
	if (e == 0)	/* subnormal: m * 2^-9 */
		return s ? -(float)m / 512 : (float)m / 512;
	return f32_of_bits(s | (e + 120) << 23 | m << 20);
}

/* Round to nearest even, saturate to +-448 (no inf in e4m3fn). */
uint8_t
f32_to_f8e4m3(float f)
{
	uint32_t u = bits_of_f32(f), s = (u >> 24) & 0x80, a = u & 0x7fffffff;

	if (isnan(f))
		return 0x7f;
	if (a < 0x3c800000)	/* |f| < 2^-6: multiples of 2^-9, 8 of them 2^-6 */
		return (uint8_t)(s | (uint32_t)nearbyintf(f32_of_bits(a) * 512));
	a += 0x7ffff + ((a >> 20) & 1);	/* round the mantissa to 3 bits */
	if (a > 0x43e00000)	/* past 448 (inf included) */
		return (uint8_t)(s | 0x7e);
	return (uint8_t)(s | ((a >> 23) - 120) << 3 | ((a >> 20) & 7));
}

float
f8e5m2_to_f32(uint8_t v)
{
	if (((v >> 2) & 0x1f) == 0x1f)
		return (v & 3) ? NAN : (v & 0x80 ? -INFINITY : INFINITY);
	return (float)decode_small(v, 5, 2, 15);
}

uint8_t
f32_to_f8e5m2(float f)
{
	double x;

	if (isnan(f))
		return 0x7f;
	if (f == 0)
		return signbit(f) ? 0x80 : 0;
	x = isinf(f) ? 57344 : round_fmt(fabs(f), 2, -14);
	if (x > 57344)
		x = 57344;
	return (uint8_t)encode_small(signbit(f) ? -x : x, 5, 2, 15);
}

float
f4e2m1_to_f32(unsigned v)
{
	return (float)decode_small(v & 0xf, 2, 1, 1);
}

unsigned
f32_to_f4e2m1(float f)
{
	double x;

	if (isnan(f))
		return 0x8;	/* -0, as ml_dtypes and ONNX's Cast tests */
	if (f == 0)
		return signbit(f) ? 0x8 : 0;
	x = isinf(f) ? 6 : round_fmt(fabs(f), 1, 0);
	if (x > 6)
		x = 6;
	return encode_small(signbit(f) ? -x : x, 2, 1, 1);
}

float
f8e8m0_to_f32(uint8_t v)
{
	return v == 0xff ? NAN : ldexpf(1.0f, v - 127);
}

/* The exponent field of f's f32 bits, plus one if any fraction bit is set. */
uint8_t
f32_to_f8e8m0(float f)
{
	uint32_t u = bits_of_f32(f), e = (u >> 23) & 0xff;

	if (e == 0xff)
		return 0xff;
	if (e == 0)	/* f32 subnormals: 2^-127 is 0x400000; nothing is below it */
		return (u & 0x7fffff) > 0x400000;
	return (uint8_t)(e + ((u & 0x7fffff) && e < 0xfe));
}

static int
nibble(const void *p, size_t i)
{
	const uint8_t *b = p;

	return (b[i / 2] >> (4 * (i & 1))) & 0xf;
}

static void
set_nibble(uint8_t *b, size_t i, unsigned n)
{
	int sh = 4 * (int)(i & 1);

	b[i / 2] = (uint8_t)((b[i / 2] & ~(0xf << sh)) | n << sh);
}

int64_t
dtype_load_int(DType t, const void *p, size_t i)
{
	switch (t) {
	case DT_I64: return ((const int64_t *)p)[i];
	case DT_I32: return ((const int32_t *)p)[i];
	case DT_I16: return ((const int16_t *)p)[i];
	case DT_U16: return ((const uint16_t *)p)[i];
	case DT_I8: return ((const int8_t *)p)[i];
	case DT_U8: return ((const uint8_t *)p)[i];
	case DT_BOOL: return ((const uint8_t *)p)[i] != 0;
	case DT_I4: { int v = nibble(p, i); return v >= 8 ? v - 16 : v; }
	case DT_U4: return nibble(p, i);
	default: return (int64_t)dtype_load(t, p, i);
	}
}

double
dtype_load(DType t, const void *p, size_t i)
{
	switch (t) {
	case DT_F32:
	case DT_TF32: return ((const float *)p)[i];
	case DT_F64: return ((const double *)p)[i];
	case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
	case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
	case DT_F8E4M3: return f8e4m3_to_f32(((const uint8_t *)p)[i]);
	case DT_F8E5M2: return f8e5m2_to_f32(((const uint8_t *)p)[i]);
	case DT_F4E2M1: return f4e2m1_to_f32((unsigned)nibble(p, i));
	case DT_F8E8M0: return f8e8m0_to_f32(((const uint8_t *)p)[i]);
	default: return (double)dtype_load_int(t, p, i);
	}
}

static int64_t
clampi(double v, double lo, double hi)
{
	if (isnan(v))
		return 0;
	if (v < lo)
		return (int64_t)lo;
	if (v > hi)
		return (int64_t)hi;
	return (int64_t)v;	/* truncates toward zero */
}

void
dtype_store_int(DType t, void *p, size_t i, int64_t v)
{
	uint8_t *b = p;

	switch (t) {
	case DT_I64: ((int64_t *)p)[i] = v; break;
	case DT_I32: ((int32_t *)p)[i] = (int32_t)MAX(MIN(v, INT32_MAX), INT32_MIN); break;
	case DT_I16: ((int16_t *)p)[i] = (int16_t)MAX(MIN(v, INT16_MAX), INT16_MIN); break;
	case DT_U16: ((uint16_t *)p)[i] = (uint16_t)MAX(MIN(v, UINT16_MAX), 0); break;
	case DT_I8: ((int8_t *)p)[i] = (int8_t)MAX(MIN(v, 127), -128); break;
	case DT_U8: ((uint8_t *)p)[i] = (uint8_t)MAX(MIN(v, 255), 0); break;
	case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	case DT_I4:
	case DT_U4: {
		int64_t lo = t == DT_I4 ? -8 : 0, hi = t == DT_I4 ? 7 : 15;
		set_nibble(b, i, (unsigned)MAX(MIN(v, hi), lo) & 0xf);
		break;
	}
	default: dtype_store(t, p, i, (double)v); break;
	}
}

void
dtype_store(DType t, void *p, size_t i, double v)
{
	switch (t) {
	case DT_F32: ((float *)p)[i] = (float)v; break;
	case DT_TF32: ((float *)p)[i] = f32_to_tf32((float)v); break;
	case DT_F64: ((double *)p)[i] = v; break;
	case DT_F16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
	case DT_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
	case DT_F8E4M3: ((uint8_t *)p)[i] = f32_to_f8e4m3((float)v); break;
	case DT_F8E5M2: ((uint8_t *)p)[i] = f32_to_f8e5m2((float)v); break;
	case DT_F4E2M1: set_nibble(p, i, f32_to_f4e2m1((float)v)); break;
	case DT_F8E8M0: ((uint8_t *)p)[i] = f32_to_f8e8m0((float)v); break;
	case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	case DT_I64: ((int64_t *)p)[i] = clampi(v, -9223372036854775808.0, 9223372036854774784.0); break;
	case DT_I32: dtype_store_int(t, p, i, clampi(v, INT32_MIN, INT32_MAX)); break;
	default: dtype_store_int(t, p, i, clampi(v, -32768.0, 65535.0)); break;
	}
}

void
dtype_load_n(DType t, const void *p, size_t i, size_t n, double *out)
{
	const uint16_t *h = (const uint16_t *)p + i;
	const float *f = (const float *)p + i;

	switch (t) {
	case DT_BF16:
		for (size_t k = 0; k < n; k++)
			out[k] = bf16_to_f32(h[k]);
		break;
	case DT_F32:
		for (size_t k = 0; k < n; k++)
			out[k] = f[k];
		break;
	default:
		for (size_t k = 0; k < n; k++)
			out[k] = dtype_load(t, p, i + k);
		break;
	}
}
