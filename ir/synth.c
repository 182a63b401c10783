/*
 * synth.c — synthetic weights.  Element i of weight `name` is
 *
 *	h = mix64(seed ^ mix64(hash(name) ^ mix64(i)))
 *	u = (int)(h >> 40) / 2^23 - 1            (24 bits: exact in f32, in [-1, 1))
 *	v = mean + scale * u                     (f32, no fused multiply-add)
 *
 * rounded to the weight's dtype.  Only integer arithmetic and one f32
 * multiply and add, so the device generator (codegen) is bit-identical.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

float
ir_synth_value(uint64_t seed, uint64_t namehash, uint64_t i, float mean,
	       float scale)
{
	uint64_t h = mix64(seed ^ mix64(namehash ^ mix64(i)));
	float u = (float)((int32_t)(h >> 40) - (1 << 23)) * (1.0f / (1 << 23));
	float p = scale * u;

	return mean + p;
}

uint64_t
ir_synth_index(const Weight *w, uint64_t i)
{
	const Type *t = &w->value->type;
	uint64_t rows, cols, cr = w->col_repeat > 1 ? (uint64_t)w->col_repeat : 1;

	if (t->rank < 1 || t->dim[t->rank - 1] <= 0)
		return i;
	cols = (uint64_t)t->dim[t->rank - 1] / cr;	/* the generated weight's */
	i = i / (cols * cr) * cols + i % (cols * cr) / cr;
	if (w->row_block <= 1 || t->rank < 2 || t->dim[t->rank - 2] <= 0)
		return i;
	rows = (uint64_t)t->dim[t->rank - 2];
	return i - i / cols % rows % (uint64_t)w->row_block * cols;
}

double
ir_weight_scale(const Weight *w)
{
	const Type *t = &w->value->type;
	int64_t fan;

	if (w->scale >= 0)
		return w->scale;
	fan = t->rank ? t->dim[t->rank - 1] : 1;
	return fan > 0 ? 1.0 / sqrt((double)fan) : 1.0;
}

const void *
ir_weight_data(Weight *w, Diag *d)
{
	const Type *t = &w->value->type;
	int64_t n = ir_type_numel(t);
	uint64_t nh;
	float mean, scale;

	if (w->data)
		return w->data;
	if (w->cache)
		return w->cache;
	if (n < 0) {
		diag_error(d, loc_file(w->source), "weight $%s has a symbolic shape",
			   w->value->name);
		return NULL;
	}
	if (dtype_bytes(t->dt, (size_t)n) > TENSOR_MAX_BYTES) {
		diag_error(d, loc_file(w->source), "weight $%s is too large to generate on the host",
			   w->value->name);
		return NULL;
	}
	w->cache = calloc(dtype_bytes(t->dt, (size_t)n) + 8, 1);
	if (!w->cache) {
		diag_error(d, loc_file(w->source), "out of memory generating $%s", w->value->name);
		return NULL;
	}
	nh = hash_str(w->value->name);
	mean = (float)w->mean;
	scale = (float)ir_weight_scale(w);
	for (int64_t i = 0; i < n; i++) {
		float v = ir_synth_value(w->seed, nh, ir_synth_index(w, (uint64_t)i), mean, scale);
		if (t->dt == DT_BF16)	/* the common case, without the switch */
			((uint16_t *)w->cache)[i] = f32_to_bf16(v);
		else if (dtype_is_int(t->dt))
			dtype_store_int(t->dt, w->cache, (size_t)i, (int64_t)nearbyintf(v));
		else
			dtype_store(t->dt, w->cache, (size_t)i, v);
	}
	return w->cache;
}

void
ir_weight_elems(Weight *w, int64_t first, int64_t n, double *out)
{
	const Type *t = &w->value->type;
	const void *data = w->data ? w->data : w->cache;

	if (data) {
		dtype_load_n(t->dt, data, (size_t)first, (size_t)n, out);
		return;
	}
	uint64_t nh = hash_str(w->value->name);
	float mean = (float)w->mean, scale = (float)ir_weight_scale(w);
	unsigned char buf[16];
	for (int64_t i = 0; i < n; i++) {	/* as ir_weight_data stores it */
		float v = ir_synth_value(w->seed, nh, ir_synth_index(w, (uint64_t)(first + i)), mean, scale);
		if (t->dt == DT_BF16) {
			out[i] = bf16_to_f32(f32_to_bf16(v));
			continue;
		}
		if (dtype_is_int(t->dt))
			dtype_store_int(t->dt, buf, 0, (int64_t)nearbyintf(v));
		else
			dtype_store(t->dt, buf, 0, v);
		out[i] = dtype_load(t->dt, buf, 0);
	}
}
