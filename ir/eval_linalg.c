/*
 * eval_linalg.c — matmul (numpy semantics: 1-D operands, broadcast batch
 * dims, transposes, bias) and grouped_matmul (rows of a split among experts
 * by offsets).  Operands are read into doubles once; every dot product
 * accumulates in double in k order and is rounded once when stored.
 */
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

/* One operand seen as a batch of matrices [rows, cols] through strides. */
typedef struct {
	int64_t rows, cols;
	int64_t srow, scol;		/* element strides */
	int64_t sbatch[MAXRANK];	/* per result batch dim, 0 when broadcast */
} Mat;

/* A 1-D operand is a row (a) or a column (b) vector and ignores trans. */
static void
as_mat(const Tensor *t, int trans, int is_b, int nb, Mat *m)
{
	int64_t str[MAXRANK];
	int r = t->rank;

	ev_strides(t, str);
	memset(m, 0, sizeof *m);
	if (r == 1) {
		m->rows = is_b ? t->dim[0] : 1;
		m->cols = is_b ? 1 : t->dim[0];
		m->srow = is_b ? 1 : 0;
		m->scol = is_b ? 0 : 1;
		return;
	}
	m->rows = t->dim[r - (trans ? 1 : 2)];
	m->cols = t->dim[r - (trans ? 2 : 1)];
	m->srow = str[r - (trans ? 1 : 2)];
	m->scol = str[r - (trans ? 2 : 1)];
	for (int i = 0; i < nb; i++) {
		int j = i - (nb - (r - 2));
		m->sbatch[i] = j < 0 || t->dim[j] == 1 ? 0 : str[j];
	}
}

/* The bias must broadcast to the result without growing it. */
static int
bias_strides(Ev *e, const Node *n, const Tensor *bias, const Tensor *y, int64_t *str)
{
	if (bias->rank > y->rank)
		return ev_err(e, n, "%s: the bias has a higher rank than the result",
			      ir_opname(n->op));
	for (int i = 0; i < bias->rank; i++) {
		int64_t d = bias->dim[i], want = y->dim[y->rank - bias->rank + i];
		if (d != 1 && d != want)
			return ev_err(e, n, "%s: bias dim %d is %lld, the result has %lld",
				      ir_opname(n->op), i, (long long)d, (long long)want);
	}
	ev_bstrides(bias, y->rank, str);
	return 0;
}

int
ev_matmul(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *a = in[0], *b = in[1], *bias = n->nin > 2 ? in[2] : NULL;
	Tensor *y = &out[0];
	int ta = (int)ir_attr_int(n, "trans_a", 0), tb = (int)ir_attr_int(n, "trans_b", 0);
	int nb = y->rank - (a->rank > 1) - (b->rank > 1);
	int64_t c[MAXRANK] = {0}, bstr[MAXRANK], len = tensor_numel(y);
	double *av, *bv, *biasv = NULL;
	Mat ma, mb;

	if (bias && bias_strides(e, n, bias, y, bstr))
		return -1;
	as_mat(a, ta, 0, nb, &ma);
	as_mat(b, tb, 1, nb, &mb);
	av = ev_doubles(a);
	bv = ev_doubles(b);
	if (bias)
		biasv = ev_doubles(bias);
	for (int64_t i = 0; i < len; i++, ev_next(c, y->dim, y->rank)) {
		int64_t row = a->rank > 1 ? c[nb] : 0, col = b->rank > 1 ? c[y->rank - 1] : 0;
		int64_t oa = ev_off(c, ma.sbatch, nb) + row * ma.srow;
		int64_t ob = ev_off(c, mb.sbatch, nb) + col * mb.scol;
		double acc = 0;
		for (int64_t k = 0; k < ma.cols; k++)
			acc += av[oa + k * ma.scol] * bv[ob + k * mb.srow];
		if (bias)
			acc += biasv[ev_off(c, bstr, y->rank)];
		dtype_store(y->dt, y->data, (size_t)i, acc);
	}
	free(av);
	free(bv);
	free(biasv);
	return 0;
}

/* offsets[0..E] must be non-decreasing inside [0, R]. */
static int
check_offsets(Ev *e, const Node *n, const Tensor *o, int64_t rows, int64_t *off)
{
	int64_t ne = o->dim[0];

	for (int64_t i = 0; i < ne; i++) {
		off[i] = dtype_load_int(o->dt, o->data, (size_t)i);
		if (off[i] < 0 || off[i] > rows || (i && off[i] < off[i - 1]))
			return ev_err(e, n, "grouped_matmul: offsets[%lld] = %lld is not "
				      "non-decreasing within 0..%lld", (long long)i,
				      (long long)off[i], (long long)rows);
	}
	return 0;
}

int
ev_grouped_matmul(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *a = in[0], *w = in[1], *bias = n->nin > 3 ? in[3] : NULL;
	Tensor *y = &out[0];
	int tb = (int)ir_attr_int(n, "trans_b", 1);
	int64_t ne = w->dim[0], nn = y->dim[1], kk = a->dim[1];
	int64_t *off = xmalloc(sizeof *off * (size_t)(ne + 1));
	double *av = NULL, *wv = NULL, *bv = NULL;
	int rc = -1;

	if (check_offsets(e, n, in[2], a->dim[0], off))
		goto out;
	if (bias && (bias->rank != 2 || bias->dim[0] != ne || bias->dim[1] != nn)) {
		ev_err(e, n, "grouped_matmul: the bias must be [%lld,%lld]", (long long)ne,
		       (long long)nn);
		goto out;
	}
	/* weights are read a column of the result at a time, only for experts
	 * that have rows: a full-size expert stack is never copied as doubles */
	av = ev_doubles(a);
	wv = xmalloc(sizeof *wv * (size_t)(kk + 1));
	bv = bias ? ev_doubles(bias) : NULL;
	for (int64_t x = 0; x < ne; x++)
		for (int64_t j = 0; off[x] < off[x + 1] && j < nn; j++) {
			if (tb)
				dtype_load_n(w->dt, w->data, (size_t)((x * nn + j) * kk), (size_t)kk, wv);
			else
				for (int64_t k = 0; k < kk; k++)
					wv[k] = dtype_load(w->dt, w->data, (size_t)(x * nn * kk + k * nn + j));
			for (int64_t r = off[x]; r < off[x + 1]; r++) {
				double acc = 0;
				for (int64_t k = 0; k < kk; k++)
					acc += av[r * kk + k] * wv[k];
				if (bv)
					acc += bv[x * nn + j];
				dtype_store(y->dt, y->data, (size_t)(r * nn + j), acc);
			}
		}
	rc = 0;
out:
	free(off);
	free(av);
	free(wv);
	free(bv);
	return rc;
}
