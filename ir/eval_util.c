/*
 * eval_util.c — helpers the interpreter's op files share: diagnostics at a
 * node, result allocation under the size limit, row-major and broadcast
 * strides, exact element copies and rounding, and a stable ordering by
 * value that topk and the moe router use.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

int
ev_err(Ev *e, const Node *n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(e->d, n->loc, fmt, ap);
	va_end(ap);
	return -1;
}

int
ev_alloc(Ev *e, const Node *n, Tensor *t, DType dt, int rank, const int64_t *dim)
{
	uint64_t max = e->o->max_bytes > 0 ? (uint64_t)e->o->max_bytes : TENSOR_MAX_BYTES;
	uint64_t numel = 1;
	char buf[160];
	size_t k = 0;

	memset(t, 0, sizeof *t);
	if (rank < 0 || rank > MAXRANK)
		return ev_err(e, n, "%s: result rank %d exceeds %d", ir_opname(n->op), rank, MAXRANK);
	for (int i = 0; i < rank; i++) {
		if (dim[i] < 0)
			return ev_err(e, n, "%s: negative dim %lld in a result", ir_opname(n->op),
				      (long long)dim[i]);
		if (dim[i] && numel > max * 8 / (uint64_t)dim[i])
			numel = max * 8 + 1;
		else
			numel *= (uint64_t)dim[i];
	}
	if (dtype_bytes(dt, numel) > max) {
		for (int i = 0; i < rank; i++)
			k += (size_t)snprintf(buf + MIN(k, sizeof buf), sizeof buf - MIN(k, sizeof buf),
					      "%s%lld", i ? "," : "", (long long)dim[i]);
		return ev_err(e, n, "%s: result %s[%s] exceeds the %llu-byte tensor limit",
			      ir_opname(n->op), dtype_name(dt), buf, (unsigned long long)max);
	}
	if (tensor_alloc(t, dt, rank, dim) != 0)
		return ev_err(e, n, "%s: cannot allocate the result", ir_opname(n->op));
	return 0;
}

Tensor *
ev_shape_of(const Value *v, Tensor *t)
{
	memset(t, 0, sizeof *t);
	t->dt = v->type.dt;
	t->rank = v->type.rank;
	for (int k = 0; k < t->rank; k++)
		t->dim[k] = v->type.dim[k];
	return t;
}

void
ev_strides(const Tensor *t, int64_t *str)
{
	int64_t s = 1;

	for (int i = t->rank - 1; i >= 0; i--) {
		str[i] = s;
		s *= t->dim[i];
	}
}

void
ev_bstrides(const Tensor *t, int r, int64_t *str)
{
	int64_t own[MAXRANK];

	ev_strides(t, own);
	for (int i = 0; i < r; i++) {
		int j = i - (r - t->rank);
		str[i] = j < 0 || t->dim[j] == 1 ? 0 : own[j];
	}
}

int64_t
ev_off(const int64_t *c, const int64_t *str, int r)
{
	int64_t o = 0;

	for (int i = 0; i < r; i++)
		o += c[i] * str[i];
	return o;
}

int
ev_next(int64_t *c, const int64_t *dim, int r)
{
	for (int i = r - 1; i >= 0; i--) {
		if (++c[i] < dim[i])
			return 1;
		c[i] = 0;
	}
	return 0;
}

void
ev_copy(DType dt, void *dst, int64_t di, const void *src, int64_t si, int64_t n)
{
	int bits = dtype_bits(dt);

	if (bits % 8 == 0) {
		memcpy((char *)dst + di * bits / 8, (const char *)src + si * bits / 8,
		       (size_t)(n * bits / 8));
		return;
	}
	/* packed 4-bit codes (i4, u4, f4e2m1), low nibble first: the bits move
	 * as they are (through an int, f4e2m1's 0.5 became 0) */
	for (int64_t i = 0; i < n; i++) {
		int64_t a = si + i, b = di + i;
		unsigned code = ((const unsigned char *)src)[a / 2] >> (a % 2 * 4) & 0xf;
		unsigned char *d = (unsigned char *)dst + b / 2;
		*d = (unsigned char)((*d & (0xf0 >> (b % 2 * 4))) | code << (b % 2 * 4));
	}
}

double
ev_round(DType dt, double v)
{
	unsigned char buf[16] = {0};

	dtype_store(dt, buf, 0, v);
	return dtype_load(dt, buf, 0);
}

double *
ev_doubles(const Tensor *t)
{
	int64_t n = tensor_numel(t);
	double *v = xmalloc(sizeof(double) * (size_t)(n + 1));

	for (int64_t i = 0; i < n; i++)
		v[i] = dtype_load(t->dt, t->data, (size_t)i);
	return v;
}

int
ev_isint(DType t)
{
	return !dtype_is_float(t);
}

static int
before(double a, double b, int largest)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && !isnan(b) ? largest : !isnan(a) && isnan(b) ? !largest : 0;
	return largest ? a > b : a < b;
}

/* A stable merge sort, so equal values keep their index order. */
static void
msort(const double *v, int64_t *idx, int64_t *tmp, int64_t n, int largest)
{
	int64_t h = n / 2, i = 0, j = h, k = 0;

	if (n < 2)
		return;
	msort(v, idx, tmp, h, largest);
	msort(v, idx + h, tmp, n - h, largest);
	while (i < h || j < n) {
		if (j == n || (i < h && !before(v[idx[j]], v[idx[i]], largest)))
			tmp[k++] = idx[i++];
		else
			tmp[k++] = idx[j++];
	}
	memcpy(idx, tmp, sizeof *idx * (size_t)n);
}

void
ev_order(const double *v, int64_t n, int largest, int64_t *idx)
{
	int64_t *tmp = xmalloc(sizeof *tmp * (size_t)(n + 1));

	for (int64_t i = 0; i < n; i++)
		idx[i] = i;
	msort(v, idx, tmp, n, largest);
	free(tmp);
}
