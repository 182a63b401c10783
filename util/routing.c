/*
 * routing.c — routing decisions (the experts each token picks) and how two
 * of them compare.  A test that compares a block's outputs first compares
 * its routing: a token whose experts differ is a flip, explained when the
 * reference's own values put the competing experts (or groups) within the
 * comparison tolerance of each other (a near tie: rounding alone may pick
 * either), and a failure otherwise.  Rows of flipped tokens are then left
 * out of the output comparison, since they computed different experts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void
routing_free(Routing *r)
{
	if (!r)
		return;
	free(r->ids);
	free(r->val);
	memset(r, 0, sizeof *r);
}

static int
has(const int32_t *ids, int64_t k, int32_t x)
{
	for (int64_t j = 0; j < k; j++)
		if (ids[j] == x)
			return 1;
	return 0;
}

/* Score of group g as the router ranks groups: its best value, or top 2. */
static double
group_score(const Routing *r, const float *v, int64_t g)
{
	int64_t gs = r->E / r->ngroup;
	double b1 = -INFINITY, b2 = -INFINITY;

	for (int64_t x = g * gs; x < (g + 1) * gs; x++) {
		if (v[x] > b1)
			b2 = b1, b1 = v[x];
		else if (v[x] > b2)
			b2 = v[x];
	}
	return r->top2 && gs > 1 ? b1 + b2 : b1;
}

/* The reference's margin between its choice a (row t) and the other's b:
 * the values' gap, or the groups' when b lies in a group a's side left out. */
static double
gap(const Routing *ref, int64_t t, int32_t a, int32_t b)
{
	const float *v = &ref->val[t * ref->E];
	double g = fabs((double)v[a] - v[b]);

	if (ref->ngroup > 1 && ref->E % ref->ngroup == 0) {
		int64_t gs = ref->E / ref->ngroup, ga = a / gs, gb = b / gs;
		if (ga != gb)
			g = fmin(g, fabs(group_score(ref, v, ga) - group_score(ref, v, gb)));
	}
	return g;
}

static int
apart(double hi, double lo, double atol, double rtol)
{
	return hi - lo > atol + rtol * fmax(fabs(hi), fabs(lo));
}

int
routing_clear(const Routing *r, int64_t t, double atol, double rtol)
{
	const float *v = &r->val[t * r->E];
	const int32_t *ids = &r->ids[t * r->k];
	int64_t gs = r->ngroup > 1 && r->E % r->ngroup == 0 ? r->E / r->ngroup : r->E;
	int64_t ng = r->E / gs, keep = ng > 1 ? MIN(MAX(r->topk_group, 1), ng) : 1;
	double worst = INFINITY, best = -INFINITY;
	unsigned char *kept = xcalloc((size_t)ng + 1, 1);
	int clear = 1;

	if (ng > 1) {	/* the kept groups, best first, ahead of the others */
		double *sc = xmalloc(sizeof *sc * (size_t)ng);
		for (int64_t g = 0; g < ng; g++)
			sc[g] = group_score(r, v, g);
		for (int64_t j = 0; j < keep; j++) {
			int64_t b = -1;
			for (int64_t g = 0; g < ng; g++)
				if (!kept[g] && (b < 0 || sc[g] > sc[b]))
					b = g;
			kept[b] = 1;
			worst = fmin(worst, sc[b]);
		}
		for (int64_t g = 0; g < ng; g++)
			if (!kept[g])
				best = fmax(best, sc[g]);
		clear = keep == ng || apart(worst, best, atol, rtol);
		free(sc);
	} else {
		kept[0] = 1;
	}
	worst = INFINITY, best = -INFINITY;
	for (int64_t x = 0; x < r->E; x++) {
		if (!kept[x / gs])
			continue;
		if (has(ids, r->k, (int32_t)x))
			worst = fmin(worst, v[x]);
		else
			best = fmax(best, v[x]);
	}
	free(kept);
	return clear && (best == -INFINITY || apart(worst, best, atol, rtol));
}

static const char *const select_names[NROUTE_SELECT] = {"logit", "sigmoid", "softmax"};

const char *
route_select_name(RouteSelect s)
{
	return (unsigned)s < NROUTE_SELECT ? select_names[s] : "?";
}

int
route_select_parse(const char *s, size_t n)
{
	for (int i = 0; i < NROUTE_SELECT; i++)
		if (strlen(select_names[i]) == n && !memcmp(select_names[i], s, n))
			return i;
	return -1;
}

/* One row's scores in place (f32, as the kernels store them), then + bias. */
static void
select_row(float *v, int64_t E, RouteSelect s, const float *bias)
{
	double m = -INFINITY, sum = 0;

	for (int64_t x = 0; s == ROUTE_SELECT_SOFTMAX && x < E; x++)
		m = fmax(m, v[x]);
	for (int64_t x = 0; s == ROUTE_SELECT_SOFTMAX && x < E; x++)
		sum += exp(v[x] - m);
	for (int64_t x = 0; x < E; x++) {
		float sc = s == ROUTE_SELECT_SIGMOID ? (float)(1 / (1 + exp(-(double)v[x])))
			 : s == ROUTE_SELECT_SOFTMAX ? (float)(exp(v[x] - m) / sum) : v[x];
		v[x] = bias ? sc + bias[x] : sc;
	}
}

void
routing_select(Routing *r, RouteSelect s, const float *bias)
{
	if (s == ROUTE_SELECT_LOGIT && !bias)
		return;
	for (int64_t t = 0; t < r->T; t++)
		select_row(&r->val[t * r->E], r->E, s, bias);
	r->what = "score";
}

int
routing_same_shape(const Routing *a, const Routing *b)
{
	return a->T == b->T && a->E == b->E && a->k == b->k;
}

int64_t
routing_compare(const Routing *ref, const Routing *got, double atol, double rtol,
		RouteFlip *flips, int64_t max)
{
	int64_t n = 0;

	for (int64_t t = 0; t < ref->T; t++) {
		const int32_t *a = &ref->ids[t * ref->k], *b = &got->ids[t * got->k];
		const float *v = &ref->val[t * ref->E];
		RouteFlip f = {t, INFINITY, 0};
		int differ = 0;

		for (int64_t i = 0; i < ref->k; i++) {
			if (has(b, got->k, a[i]))
				continue;
			differ = 1;
			for (int64_t j = 0; j < got->k; j++) {
				if (b[j] < 0 || b[j] >= ref->E || has(a, ref->k, b[j]))
					continue;
				double g = gap(ref, t, a[i], b[j]);
				double lim = atol + rtol * fmax(fabs(v[a[i]]), fabs(v[b[j]]));
				if (g < f.gap)
					f.gap = g, f.near_tie = g <= lim;
			}
		}
		if (!differ)
			continue;
		if (n < max)
			flips[n] = f;
		n++;
	}
	return n;
}

static size_t
ids_string(char *buf, size_t n, const int32_t *ids, int64_t k)
{
	size_t w = 0;

	for (int64_t j = 0; j < k; j++)
		w += (size_t)snprintf(buf + MIN(w, n), n - MIN(w, n), "%s%d", j ? "," : "{",
				      ids[j]);
	w += (size_t)snprintf(buf + MIN(w, n), n - MIN(w, n), "}");
	return w;
}

void
routing_describe(char *buf, size_t n, const Routing *ref, const Routing *got,
		 const RouteFlip *f)
{
	char a[256], b[256];

	ids_string(a, sizeof a, &ref->ids[f->token * ref->k], ref->k);
	ids_string(b, sizeof b, &got->ids[f->token * got->k], got->k);
	snprintf(buf, n, "token %lld: experts %s vs %s, %s gap %.2g%s", (long long)f->token, a, b,
		 ref->what ? ref->what : "logit", f->gap,
		 f->near_tie ? " (a near tie)" : " (beyond a near tie)");
}

/* Rows [T, rest] of t without the rows marked in drop; t's leading dims
 * must hold T rows.  0 ok, -1 if t is not T rows. */
int
tensor_drop_rows(const Tensor *t, int64_t T, const unsigned char *drop, Tensor *out)
{
	int64_t n = tensor_numel(t), rest, keep = 0, dim[2];
	size_t rb;

	memset(out, 0, sizeof *out);
	if (T <= 0 || n % T)
		return -1;
	rest = n / T;
	for (int64_t r = 0; r < T; r++)
		keep += !drop[r];
	dim[0] = keep, dim[1] = rest;
	if (tensor_alloc(out, t->dt, 2, dim))
		return -1;
	if (dtype_bits(t->dt) % 8)
		return tensor_free(out), -1;
	rb = (size_t)rest * (size_t)dtype_bits(t->dt) / 8;
	for (int64_t r = 0, k = 0; r < T; r++)
		if (!drop[r])
			memcpy((char *)out->data + (size_t)k++ * rb,
			       (const char *)t->data + (size_t)r * rb, rb);
	return 0;
}

int64_t
routing_compare_kept(const Tensor *got, const Tensor *want, const RouteDiff *rd,
		     double atol, double rtol, Compare *c)
{
	Tensor dg = {0}, dw = {0};
	const Tensor *a = got, *b = want;
	int64_t n;

	if (rd && rd->nflip && !tensor_drop_rows(got, rd->T, rd->drop, &dg) &&
	    !tensor_drop_rows(want, rd->T, rd->drop, &dw))
		a = &dg, b = &dw;
	tensor_compare(a, b, atol, rtol, c);
	n = tensor_numel(b);
	tensor_free(&dg);
	tensor_free(&dw);
	return n;
}

int
routing_close(const Tensor *got, const Tensor *want, const RouteDiff *rd, DType dt, Compare *c)
{
	double atol, rtol, rel;
	Compare all;
	int ok;

	tolerance_for(dt, &atol, &rtol, &rel);
	tensor_compare(got, want, atol, rtol, &all);
	ok = tensor_close(&all, dt, tensor_numel(want));
	if (!rd || !rd->nflip) {
		*c = all;
		return ok;
	}
	if (tensor_close(c, dt, routing_compare_kept(got, want, rd, atol, rtol, c)))
		return 1;
	if (ok)
		*c = all;
	return ok;
}

void
route_log_push(RouteLog *l, Routing *r)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->r = xrealloc(l->r, sizeof *l->r * (size_t)l->cap);
	}
	l->r[l->n++] = *r;
	memset(r, 0, sizeof *r);
}

void
route_log_free(RouteLog *l)
{
	for (int i = 0; i < l->n; i++)
		routing_free(&l->r[i]);
	free(l->r);
	memset(l, 0, sizeof *l);
}

static void
append(RouteDiff *d, const char *s)
{
	size_t k = strlen(d->msg);

	snprintf(d->msg + k, sizeof d->msg - k, "%s%s", k ? "; " : "", s);
}

static void
diff_one(const Routing *ref, const Routing *got, double atol, double rtol, RouteDiff *d)
{
	int64_t n = routing_compare(ref, got, atol, rtol, NULL, 0);
	RouteFlip *f = xmalloc(sizeof *f * (size_t)(n + 1));
	char line[512];

	routing_compare(ref, got, atol, rtol, f, n);
	if (!d->drop) {
		d->T = ref->T;
		d->drop = xcalloc((size_t)ref->T + 1, 1);
	}
	for (int64_t i = 0; i < n; i++) {
		d->nbad += !f[i].near_tie;
		if (ref->T == d->T)
			d->drop[f[i].token] = 1;
		if (i < 4) {
			routing_describe(line, sizeof line, ref, got, &f[i]);
			append(d, line);
		}
	}
	if (n > 4) {
		snprintf(line, sizeof line, "%lld more", (long long)(n - 4));
		append(d, line);
	}
	d->nflip += n;
	free(f);
}

int
route_log_compare(const RouteLog *ref, const RouteLog *got, double atol, double rtol,
		  RouteDiff *d)
{
	unsigned char *used = xcalloc((size_t)ref->n + 1, 1);
	int matched = 0;

	memset(d, 0, sizeof *d);
	for (int i = 0; i < got->n; i++)
		for (int j = 0; j < ref->n; j++) {
			if (used[j] || !routing_same_shape(&ref->r[j], &got->r[i]))
				continue;
			used[j] = 1;
			matched++;
			diff_one(&ref->r[j], &got->r[i], atol, rtol, d);
			break;
		}
	free(used);
	return matched;
}

/* Token t's last chosen expert (*a) and best unchosen one (*b). */
static void
margin(const Routing *r, int64_t t, int32_t *a, int32_t *b)
{
	const float *v = &r->val[t * r->E];
	const int32_t *ids = &r->ids[t * r->k];

	*a = ids[0], *b = -1;
	for (int64_t j = 0; j < r->k; j++)
		if (ids[j] >= 0 && ids[j] < r->E && v[ids[j]] < v[*a])
			*a = ids[j];
	for (int32_t x = 0; x < r->E; x++)
		if (!has(ids, r->k, x) && (*b < 0 || v[x] > v[*b]))
			*b = x;
}

int64_t
routing_near_ties(const Routing *r, const unsigned char *bad, double atol, double rtol,
		  RouteDiff *d)
{
	char line[512], ids[256];
	int64_t n = 0;
	int32_t a, b;

	if (!d->drop) {
		d->T = r->T;
		d->drop = xcalloc((size_t)r->T + 1, 1);
	}
	if (d->T != r->T)
		return 0;
	for (int64_t t = 0; t < r->T; t++) {
		if (!bad[t] || routing_clear(r, t, atol, rtol))
			continue;
		margin(r, t, &a, &b);
		ids_string(ids, sizeof ids, &r->ids[t * r->k], r->k);
		if (b >= 0 && a >= 0 && a < r->E)
			snprintf(line, sizeof line, "token %lld: experts %s, expert %d within %.2g of %d: "
				 "a near tie", (long long)t, ids, b,
				 fabs((double)r->val[t * r->E + a] - r->val[t * r->E + b]), a);
		else
			snprintf(line, sizeof line, "token %lld: experts %s: a near tie", (long long)t, ids);
		if (d->nflip < 4)
			append(d, line);
		else if (d->nflip == 4)
			append(d, "more");
		d->drop[t] = 1;
		d->nflip++;
		n++;
	}
	return n;
}

void
route_diff_free(RouteDiff *d)
{
	free(d->drop);
	memset(d, 0, sizeof *d);
}
