/*
 * cfg_weights.c — the weights of a config-built block.  A WSpec says what
 * the config implies (name, dtype, shape) and which checkpoint tensors make
 * it up (per-expert tensors stacked, gate and up concatenated, a transposed
 * stacked tensor).  With synthetic weights nothing is read or allocated:
 * the weight records a seed and a recipe (norm weights 1 +- 0.1, biases
 * +- 0.05, matrices +- 1/sqrt(fan_in)).  With real weights every tensor's
 * dtype and shape is checked against the spec before anything is read, and
 * an error names the tensor, what the config implies and from which keys.
 */
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

WSpec
cfg_wspec(Cfg *c, const char *name, int recipe, int rank, const int64_t *dim,
	  const char *why)
{
	WSpec w = {.name = name, .why = why, .scale = -1};
	Dim dd[MAXRANK];

	for (int i = 0; i < rank; i++)
		dd[i] = dim[i];
	w.t = ir_type(c->dt, rank, dd);
	if (recipe == RECIPE_NORM)
		w.mean = 1, w.scale = 0.1;
	else if (recipe == RECIPE_BIAS)
		w.scale = 0.05;
	return w;
}

void
cfg_add_piece(WSpec *w, const char *name, int64_t off, int rank, const int64_t *dim,
	      int trans)
{
	Piece p = {.name = name, .off = off, .rank = rank, .trans = trans};

	memcpy(p.dim, dim, sizeof *dim * (size_t)rank);
	vec_push(&w->piece, p);	/* doubling: a piece per expert, thousands */
}

void
cfg_add_blocks(WSpec *w, const char *name, int64_t off, int rank, const int64_t *dim,
	       int64_t nblk, int64_t bstride, int trans)
{
	Piece p = {.name = name, .off = off, .rank = rank, .trans = trans, .nblk = nblk,
		   .bstride = bstride};

	memcpy(p.dim, dim, sizeof *dim * (size_t)rank);
	vec_push(&w->piece, p);
}

int
cfg_ckpt_has(Cfg *c, const char *name)
{
	size_t n = strlen(name);
	char buf[512];

	if (!c->st)
		return 0;
	if (st_find(c->st, name))
		return 1;
	if (n < 7 || n - 7 > 400 || strcmp(name + n - 7, ".weight"))
		return 0;
	snprintf(buf, sizeof buf, "%.*s.weight_packed", (int)(n - 7), name);
	if (st_find(c->st, buf))
		return 1;
	snprintf(buf, sizeof buf, "%.*s.qweight", (int)(n - 7), name);
	return st_find(c->st, buf) != NULL;
}

static Value *
synth(Cfg *c, const WSpec *w)
{
	Type t = w->t;
	Weight *wt;

	if (w->f32ok == F32_KEEP)
		t.dt = DT_F32;
	wt = ir_add_weight(c->m, w->name, t);
	wt->seed = c->o->seed;
	wt->mean = w->mean;
	wt->scale = w->scale;
	wt->source = "synthetic";
	return wt->value;
}

void
cfg_shape_str(char *buf, size_t n, int rank, const int64_t *dim)
{
	size_t k = (size_t)snprintf(buf, n, "[");

	for (int i = 0; i < rank && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dim[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

Loc
cfg_tensor_loc(Cfg *c, const StTensor *t, const char *name)
{
	Loc l = loc_file(t ? st_shard_path(c->st, t) : c->stpath);

	l.name = t && t->stored ? t->stored : name;	/* as the file names it */
	return l;
}

/* The checkpoint tensor of piece p, checked; *dt may turn f32 (f32ok). */
static const StTensor *
check_piece(Cfg *c, const WSpec *w, const Piece *p, int first, DType *dt)
{
	const StTensor *t = st_find(c->st, p->name);
	char want[96], got[96];

	cfg_shape_str(want, sizeof want, p->rank, p->dim);
	if (!t) {
		diag_error(c->d, cfg_tensor_loc(c, NULL, p->name), "tensor not found; the config "
			   "implies %s%s (%s)", dtype_name(*dt), want, w->why);
		return NULL;
	}
	if (first && w->f32ok && t->dt == DT_F32)
		*dt = DT_F32;
	if (t->dt != *dt && (t->dt == DT_F8E4M3 || t->dt == DT_F8E5M2)) {
		diag_error(c->d, cfg_tensor_loc(c, t, p->name), "dtype %s needs a scale scheme "
			   "moec honours, and config.json has none (quantization_config)",
			   t->dtname);
		return NULL;
	}
	if (t->dt != *dt) {
		diag_error(c->d, cfg_tensor_loc(c, t, p->name), "dtype %s but the config implies "
			   "%s (dtype)", t->dtname, dtype_name(*dt));
		return NULL;
	}
	cfg_shape_str(got, sizeof got, t->rank, t->dim);
	if (strcmp(got, want) != 0) {
		diag_error(c->d, cfg_tensor_loc(c, t, p->name), "shape %s but the config implies "
			   "%s (%s)", got, want, w->why);
		return NULL;
	}
	return t;
}

/* [B, a, b] -> [B, b, a] for elements of es bytes. */
static void
transpose_last2(char *dst, const char *src, int rank, const int64_t *dim, size_t es)
{
	int64_t nb = rank == 3 ? dim[0] : 1, a = dim[rank - 2], b = dim[rank - 1];

	for (int64_t k = 0; k < nb; k++)
		for (int64_t i = 0; i < a; i++)
			for (int64_t j = 0; j < b; j++)
				memcpy(dst + (size_t)((k * b + j) * a + i) * es,
				       src + (size_t)((k * a + i) * b + j) * es, es);
}

static int
read_piece(Cfg *c, const Piece *p, const StTensor *t, char *data, size_t es)
{
	char *tmp;
	int rc;

	int64_t nblk = p->nblk > 1 ? p->nblk : 1, bdim[2] = {0, 0};
	size_t bsize = 0;

	if (nblk > 1) {	/* nblk blocks along dim 0: [rows/nblk, cols] (rank 2), [1, a, b] (rank 3) */
		bdim[0] = p->rank == 3 ? p->dim[1] : p->dim[0] / nblk;
		bdim[1] = p->dim[p->rank - 1];
		bsize = (size_t)(bdim[0] * bdim[1]) * es;
	}
	if (!p->trans && nblk == 1)
		return st_read(c->st, t, data + (size_t)p->off * es, c->d);
	if (!(tmp = malloc((size_t)t->size)))
		return diag_error(c->d, cfg_tensor_loc(c, t, p->name), "out of memory");
	rc = st_read(c->st, t, tmp, c->d);
	for (int64_t j = 0; !rc && nblk > 1 && j < nblk; j++) {
		char *dst = data + (size_t)(p->off + j * p->bstride) * es;
		if (p->trans)
			transpose_last2(dst, tmp + (size_t)j * bsize, 2, bdim, es);
		else
			memcpy(dst, tmp + (size_t)j * bsize, bsize);
	}
	if (!rc && nblk == 1)
		transpose_last2(data + (size_t)p->off * es, tmp, p->rank, p->dim, es);
	free(tmp);
	return rc;
}

static void
free_data(void *p, size_t n)
{
	free(p);
}

static Value *
load(Cfg *c, WSpec *w)
{
	const StTensor **t = xcalloc(w->piece.n, sizeof *t);
	int64_t n = ir_type_numel(&w->t);
	size_t max = c->o->max_bytes > 0 ? (size_t)c->o->max_bytes : TENSOR_MAX_BYTES, size, es;
	DType dt = w->t.dt;
	Weight *wt = NULL;
	char *data = NULL;
	int bad = 0;

	/* the first bad piece is reported: one missing expert means all are */
	for (size_t i = 0; i < w->piece.n && !bad; i++)
		bad = !(t[i] = check_piece(c, w, &w->piece.v[i], i == 0, &dt));
	size = dtype_bytes(dt, (size_t)n);
	es = (size_t)dtype_bits(dt) / 8;
	if (!bad && size > max)
		bad = diag_error(c->d, cfg_tensor_loc(c, t[0], w->name), "%zu bytes is above the "
				 "limit of %zu", size, max);
	if (!bad && !(data = malloc(size ? size : 1)))
		bad = diag_error(c->d, cfg_tensor_loc(c, t[0], w->name), "out of memory");
	for (size_t i = 0; i < w->piece.n && !bad; i++)
		bad = read_piece(c, &w->piece.v[i], t[i], data, es) != 0;
	if (!bad) {
		w->t.dt = dt;
		wt = ir_add_weight(c->m, w->name, w->t);
		wt->data = data;
		wt->size = size;
		wt->free_data = free_data;
		wt->source = ir_intern(c->m, st_shard_path(c->st, t[0]));
	} else {
		free(data);
		c->err = 1;
	}
	free(t);
	return wt ? wt->value : NULL;
}

Value *
cfg_weight(Cfg *c, WSpec *w)
{
	Value *v;
	int64_t dim[MAXRANK];
	char shape[96];
	int q;

	for (int i = 0; i < w->t.rank; i++)
		dim[i] = w->t.dim[i];
	if (!ir_type_ok(c->m, &w->t)) {
		/* refused here, not by the verifier later: the keys are the cause */
		cfg_shape_str(shape, sizeof shape, w->t.rank, dim);
		cfg_error(c, w->why, "weight '%s' would be %s, more than 2^48 elements",
			  w->name, shape);
		v = NULL;
	} else if ((q = cfg_quant_wanted(c, w)) != 0) {
		v = q > 0 ? cfg_quant_weight(c, w) : NULL;
	} else if (!c->st) {
		v = synth(c, w);
	} else {
		if (!w->piece.n)
			cfg_add_piece(w, w->name, 0, w->t.rank, dim, 0);
		v = load(c, w);
	}
	vec_free(&w->piece);
	return v;
}

Value *
cfg_weight2(Cfg *c, const char *name, int64_t rows, int64_t cols, const char *why)
{
	WSpec w = cfg_wspec(c, name, RECIPE_MATRIX, 2, (int64_t[]){rows, cols}, why);

	w.quant = QW_LINEAR;	/* only cfg_linear reads [out, in] weights this way */
	return cfg_weight(c, &w);
}

Value *
cfg_vector(Cfg *c, const char *name, int recipe, int64_t n, const char *why)
{
	WSpec w = cfg_wspec(c, name, recipe, 1, &n, why);

	return cfg_weight(c, &w);
}
