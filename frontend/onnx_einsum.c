/*
 * onnx_einsum.c — Einsum equations of one or two operands that are
 * matmul-shaped: every label is a batch dim (in both operands and the
 * output), a row or column dim (in one operand and the output), a
 * contracted dim (in both, not the output) or a summed dim (in one only).
 *
 *	"bhid,bhjd->bhij"  =>  %b' = transpose %b, perm=[0,1,3,2]
 *			       %y = matmul %a, %b'
 *
 * Groups of row, column and contracted dims are merged by reshapes, so
 * any number of each works.  Repeated labels in one operand (diagonals)
 * are not matmul-shaped and are refused.
 */
#include <ctype.h>
#include <string.h>

#include "onnx_int.h"

#define NLAB 52

typedef struct {
	int nop;
	int lab[3][MAXRANK];	/* labels of operand 0, 1 and the output */
	int n[3];
} Eq;

static int
label(int c)
{
	return islower(c) ? c - 'a' : c - 'A' + 26;
}

/* One operand's labels; "..." takes ell labels counted from the right. */
static int
parse_term(ONode *n, const char *s, size_t len, int rank, int *lab, int *nl, int *ellrank)
{
	int k = 0, seen_ell = 0, nletters = 0;

	for (size_t i = 0; i < len; i++)
		nletters += isalpha((unsigned char)s[i]) != 0;
	*ellrank = rank >= 0 ? rank - nletters : 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.') {
			if (seen_ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
				return ox_err(n, "bad ellipsis in the equation");
			seen_ell = 1;
			i += 2;
			if (*ellrank < 0)
				return ox_err(n, "the equation names more dims than the operand has");
			for (int j = 0; j < *ellrank; j++)
				lab[k++] = NLAB + MAXRANK - *ellrank + j;	/* ellipsis dims */
		} else if (isalpha((unsigned char)s[i])) {
			if (k >= MAXRANK)
				return ox_err(n, "too many labels");
			lab[k++] = label((unsigned char)s[i]);
		} else {
			return ox_err(n, "unexpected '%c' in the equation", s[i]);
		}
	}
	if (!seen_ell)
		*ellrank = 0;
	*nl = k;
	return 0;
}

static int
strip(const char *s, char *out, size_t max)
{
	size_t k = 0;

	for (; *s; s++)
		if (!isspace((unsigned char)*s)) {
			if (k + 1 >= max)
				return -1;
			out[k++] = *s;
		}
	out[k] = 0;
	return 0;
}

/* Implicit output: the ellipsis dims, then labels used once, sorted. */
static void
implicit_output(Eq *e, int ellmax)
{
	int count[NLAB + MAXRANK] = {0};

	e->n[2] = 0;
	for (int j = 0; j < ellmax; j++)
		e->lab[2][e->n[2]++] = NLAB + MAXRANK - ellmax + j;
	for (int o = 0; o < e->nop; o++)
		for (int i = 0; i < e->n[o]; i++)
			count[e->lab[o][i]]++;
	for (int l = 0; l < NLAB; l++)
		if (count[l] == 1 && e->n[2] < MAXRANK)
			e->lab[2][e->n[2]++] = l;
}

static int
parse_eq(ONode *n, Eq *e)
{
	const char *raw = ox_attr_s(n, "equation", NULL);
	char s[256], *arrow, *comma;
	int ell[3] = {0}, ellmax = 0;

	if (!raw || strip(raw, s, sizeof s))
		return ox_err(n, "needs an equation");
	arrow = strstr(s, "->");
	comma = strchr(s, ',');
	e->nop = comma && (!arrow || comma < arrow) ? 2 : 1;
	if (e->nop != n->nin || (comma && strchr(comma + 1, ',') && (!arrow ||
	    strchr(comma + 1, ',') < arrow)))
		return ox_err(n, "only one- and two-operand equations are supported");
	const char *t0 = s, *t1 = comma ? comma + 1 : NULL;
	size_t l0 = (size_t)((comma ? comma : arrow ? arrow : s + strlen(s)) - s);
	size_t l1 = t1 ? (size_t)((arrow ? arrow : s + strlen(s)) - t1) : 0;
	if (parse_term(n, t0, l0, ox_tin(n, 0)->rank, e->lab[0], &e->n[0], &ell[0]) ||
	    (t1 && parse_term(n, t1, l1, ox_tin(n, 1)->rank, e->lab[1], &e->n[1], &ell[1])))
		return -1;
	ellmax = MAX(ell[0], ell[1]);
	if (arrow) {
		int letters = 0;
		for (const char *p = arrow + 2; *p; p++)
			letters += isalpha((unsigned char)*p) != 0;
		return parse_term(n, arrow + 2, strlen(arrow + 2), letters + ellmax, e->lab[2],
				  &e->n[2], &ell[2]);
	}
	implicit_output(e, ellmax);
	return 0;
}

static int
check_labels(ONode *n, const Eq *e)
{
	for (int o = 0; o < e->nop; o++) {
		if (e->n[o] != ox_tin(n, o)->rank)
			return ox_err(n, "operand %d has rank %d, the equation says %d", o,
				      ox_tin(n, o)->rank, e->n[o]);
		for (int i = 0; i < e->n[o]; i++)
			for (int j = 0; j < i; j++)
				if (e->lab[o][i] == e->lab[o][j])
					return ox_err(n, "a label repeated in operand %d (a diagonal) "
						      "is not matmul-shaped", o);
	}
	for (int i = 0; i < e->n[2]; i++) {
		int found = 0;
		for (int o = 0; o < e->nop; o++)
			for (int j = 0; j < e->n[o]; j++)
				found |= e->lab[o][j] == e->lab[2][i];
		if (!found)
			return ox_err(n, "output label is in no operand");
	}
	return 0;
}

/* --- building ------------------------------------------------------------ */

static int
find(const int *lab, int n, int l)
{
	for (int i = 0; i < n; i++)
		if (lab[i] == l)
			return i;
	return -1;
}

static Value *
transpose(Builder *b, Value *x, const int64_t *perm, int r)
{
	int id = 1;

	for (int i = 0; i < r; i++)
		id &= perm[i] == i;
	if (!x || id)
		return x;
	ir_b_ints(b, "perm", perm, r);
	return ir_b1(b, OP_TRANSPOSE, x);
}

static Value *
reshape(ONode *n, Value *x, const Dim *dims, int r)
{
	if (!x)
		return NULL;
	for (int i = 0; i < r; i++)
		if (ir_dim_has_unknown(n->c->m, dims[i])) {
			ox_err(n, "data-dependent dims are not supported in Einsum");
			return NULL;
		}
	if (x->type.rank == r && !memcmp(x->type.dim, dims, sizeof(Dim) * (size_t)r))
		return x;
	ir_b_dims(n->b, "shape", dims, r);
	return ir_b1(n->b, OP_RESHAPE, x);
}

/* Sum the labels of operand o that neither the other operand nor the
 * output has; lab/nl get the labels left. */
static Value *
sum_private(ONode *n, const Eq *e, int o, int *lab, int *nl)
{
	int64_t axes[MAXRANK];
	int na = 0, k = 0;
	Value *x = ox_in(n, o);

	for (int i = 0; i < e->n[o]; i++) {
		int l = e->lab[o][i];
		if (find(e->lab[2], e->n[2], l) < 0 &&
		    (e->nop == 1 || find(e->lab[1 - o], e->n[1 - o], l) < 0))
			axes[na++] = i;
		else
			lab[k++] = l;
	}
	*nl = k;
	if (!na || !x)
		return x;
	ir_b_ints(n->b, "axes", axes, na);
	ir_b_int(n->b, "keepdims", 0);
	return ir_b1(n->b, OP_REDUCE_SUM, x);
}

/* y has labels lab[0..nl); transpose it to the output's order. */
static int
finish(ONode *n, const Eq *e, Value *y, const int *lab, int nl)
{
	int64_t perm[MAXRANK];

	if (nl != e->n[2])
		return ox_err(n, "the output labels do not match the operands");
	for (int i = 0; i < nl; i++)
		if ((perm[i] = find(lab, nl, e->lab[2][i])) < 0)
			return ox_err(n, "the output labels do not match the operands");
	return ox_set(n, 0, transpose(n->b, y, perm, nl));
}

/* Operand x (labels lab) as [batch..., A, B] where A and B merge the
 * labels of groups g1 and g2. */
static Value *
arrange(ONode *n, Value *x, const int *lab, int nl, const int *batch, int nb,
	const int *g1, int n1, const int *g2, int n2)
{
	int64_t perm[MAXRANK];
	Dim dims[MAXRANK], p1 = 1, p2 = 1;
	Module *m = n->c->m;
	int k = 0;

	if (!x)
		return NULL;
	for (int i = 0; i < nb; i++)
		perm[k++] = find(lab, nl, batch[i]);
	for (int i = 0; i < n1; i++)
		p1 = ir_dim_mul(m, p1, x->type.dim[perm[k++] = find(lab, nl, g1[i])]);
	for (int i = 0; i < n2; i++)
		p2 = ir_dim_mul(m, p2, x->type.dim[perm[k++] = find(lab, nl, g2[i])]);
	for (int i = 0; i < nb; i++)
		dims[i] = x->type.dim[perm[i]];
	dims[nb] = p1;
	dims[nb + 1] = p2;
	return reshape(n, transpose(n->b, x, perm, nl), dims, nb + 2);
}

static int
matmul2(ONode *n, const Eq *e)
{
	int la[MAXRANK], lb[MAXRANK], na, nb, batch[MAXRANK], rows[MAXRANK], cols[MAXRANK];
	int inner[MAXRANK], nbat = 0, nr = 0, nc = 0, ni = 0, lab[MAXRANK], k = 0;
	Value *a = sum_private(n, e, 0, la, &na), *b = sum_private(n, e, 1, lb, &nb), *y;
	Dim dims[MAXRANK];

	for (int i = 0; i < e->n[2]; i++) {
		int l = e->lab[2][i], ia = find(la, na, l), ib = find(lb, nb, l);
		if (ia >= 0 && ib >= 0)
			batch[nbat++] = l;
	}
	for (int i = 0; i < na; i++) {
		int l = la[i], out = find(e->lab[2], e->n[2], l) >= 0, inb = find(lb, nb, l) >= 0;
		if (out && !inb)
			rows[nr++] = l;
		else if (!out && inb)
			inner[ni++] = l;
	}
	for (int i = 0; i < nb; i++)
		if (find(la, na, lb[i]) < 0)
			cols[nc++] = lb[i];
	a = arrange(n, a, la, na, batch, nbat, rows, nr, inner, ni);
	b = arrange(n, b, lb, nb, batch, nbat, inner, ni, cols, nc);
	y = a && b ? ir_b2(n->b, OP_MATMUL, a, b) : NULL;
	if (!y)
		return -1;
	for (int i = 0; i < nbat; i++)
		dims[k] = y->type.dim[i], lab[k++] = batch[i];
	for (int i = 0; i < nr; i++)
		dims[k] = ox_tin(n, 0)->dim[find(e->lab[0], e->n[0], rows[i])], lab[k++] = rows[i];
	for (int i = 0; i < nc; i++)
		dims[k] = ox_tin(n, 1)->dim[find(e->lab[1], e->n[1], cols[i])], lab[k++] = cols[i];
	return finish(n, e, reshape(n, y, dims, k), lab, k);
}

int
imp_einsum(ONode *n)
{
	Eq e;
	int lab[MAXRANK], nl;
	Value *y;

	memset(&e, 0, sizeof e);
	if (n->nin < 1 || n->nin > 2 || !n->in[0] || (n->nin == 2 && !n->in[1]))
		return ox_err(n, "only one- and two-operand equations are supported");
	if (parse_eq(n, &e))
		return -1;
	if (check_labels(n, &e))
		return -1;
	if (e.nop == 2)
		return matmul2(n, &e);
	y = sum_private(n, &e, 0, lab, &nl);
	return y ? finish(n, &e, y, lab, nl) : -1;
}
