/*
 * tensor.c — host tensors and the comparison every numeric test uses.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int64_t
tensor_numel(const Tensor *t)
{
	int64_t n = 1;

	for (int i = 0; i < t->rank; i++)
		n *= t->dim[i];
	return n;
}

size_t
tensor_nbytes(const Tensor *t)
{
	return dtype_bytes(t->dt, (size_t)tensor_numel(t));
}

int
tensor_size(DType dt, int rank, const int64_t *dim, size_t *bytes)
{
	uint64_t n = 1;

	if (rank < 0 || rank > MAXRANK)
		return -1;
	for (int i = 0; i < rank; i++) {
		if (dim[i] < 0)
			return -1;
		if (dim[i] && n > (uint64_t)TENSOR_MAX_BYTES / (uint64_t)dim[i])
			return -1;
		n *= (uint64_t)dim[i];
	}
	if (dtype_bytes(dt, n) > TENSOR_MAX_BYTES)
		return -1;
	*bytes = dtype_bytes(dt, n);
	return 0;
}

int
tensor_alloc(Tensor *t, DType dt, int rank, const int64_t *dim)
{
	size_t bytes;

	memset(t, 0, sizeof *t);
	if (tensor_size(dt, rank, dim, &bytes) != 0)
		return -1;
	t->dt = dt;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dim[i] = dim[i];
	t->data = calloc(bytes + 8, 1);	/* +8: never zero-sized */
	return t->data ? 0 : -1;
}

void
tensor_free(Tensor *t)
{
	free(t->data);
	free(t->name);
	t->data = NULL;
	t->name = NULL;
}

void
tensor_shape_string(char *buf, size_t n, const Tensor *t)
{
	size_t k = (size_t)snprintf(buf, n, "%s[", dtype_name(t->dt));

	for (int i = 0; i < t->rank && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "",
				      (long long)t->dim[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

void
tensor_compare(const Tensor *a, const Tensor *b, double atol, double rtol,
	       Compare *c)
{
	int64_t n = tensor_numel(b);
	double num = 0, den = 0;

	memset(c, 0, sizeof *c);
	c->worst = -1;
	for (int64_t i = 0; i < n; i++) {
		double x = dtype_load(a->dt, a->data, (size_t)i);
		double y = dtype_load(b->dt, b->data, (size_t)i);
		double e;

		if (isnan(x) || isnan(y)) {
			if (!(isnan(x) && isnan(y)))
				c->nbad++, c->worst = i, c->max_abs = INFINITY;
			continue;
		}
		if (isinf(x) || isinf(y)) {
			if (x != y)
				c->nbad++, c->worst = i, c->max_abs = INFINITY;
			continue;
		}
		e = fabs(x - y);
		num += e * e;
		den += y * y;
		if (e > c->max_abs)
			c->max_abs = e, c->worst = i;
		if (e > atol + rtol * fabs(y))
			c->nbad++;
	}
	c->rel_l2 = sqrt(num) / MAX(sqrt(den), 1e-30);
	if (den == 0 && num == 0)
		c->rel_l2 = 0;
}

/*
 * Per-element tolerances by the dtype compared (docs/testing.md).  A result
 * passes when every element is within atol + rtol*|want|; for low-precision
 * floats the relative L2 error must also stay under rel_l2.
 */
void
tolerance_for(DType t, double *atol, double *rtol, double *rel)
{
	switch (t) {
	case DT_F64: *atol = 1e-7, *rtol = 1e-6, *rel = 1e-6; break;
	case DT_F32: *atol = 1e-4, *rtol = 1e-3, *rel = 1e-4; break;
	case DT_TF32: *atol = 1e-3, *rtol = 1e-2, *rel = 2e-3; break;
	case DT_F16: *atol = 1e-3, *rtol = 1e-2, *rel = 5e-3; break;
	case DT_BF16: *atol = 1e-2, *rtol = 4e-2, *rel = 2e-2; break;
	case DT_F8E4M3:
	case DT_F8E5M2: *atol = 0.1, *rtol = 0.25, *rel = 0.1; break;
	default: *atol = 0, *rtol = 0, *rel = 0; break;
	}
}

DType
tolerance_dtype(DType t, DType precision)
{
	double a, r, rel_t, rel_p;

	if (!(dtype_flags(t) & DTF_FLOAT) || !(dtype_flags(precision) & DTF_FLOAT))
		return t;
	tolerance_for(t, &a, &r, &rel_t);
	tolerance_for(precision, &a, &r, &rel_p);
	return rel_p > rel_t ? precision : t;
}

int
tensor_close(const Compare *c, DType t, int64_t numel)
{
	double atol, rtol, rel;
	int64_t allowed = 0;

	tolerance_for(t, &atol, &rtol, &rel);
	if (c->max_abs == (double)INFINITY && c->nbad)
		return 0;	/* NaN or inf where the other has a number */
	if (t == DT_BF16 || t == DT_F16 || t == DT_TF32 || t == DT_F8E4M3 || t == DT_F8E5M2)
		allowed = numel / 200;
	return c->nbad <= allowed && c->rel_l2 <= rel;
}
