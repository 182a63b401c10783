/*
 * partition_ep: lower-moe with --ep=N writes one rank's part of each moe.
 * The router runs on every rank (replicated) on the rank's own T tokens;
 * each token row goes once to every rank that holds one of its experts;
 * each rank runs its slice of the experts on what it received; the
 * weighted slot outputs of a token are summed on each rank (in f32, choice
 * order) and one partial per (token, rank) goes back, where the partials
 * are summed in rank order: deterministic, within f32 rounding of the
 * unpartitioned sum.  --ep-combine=slots returns every slot instead and
 * sums over k at home exactly as the unpartitioned lowering does
 * (bit-identical: every slot is computed by the same ops on the same row).
 *
 *	%y = moe %x, %l, ...   =>   %w, %ids = route %l, ...
 *	                            %xs, %ws, %is, %back = ep_pack %x, %w, %ids, ranks=N, owner, local
 *	                            %xr = all_to_all %xs ; %wr = all_to_all %ws ; %ir = all_to_all %is
 *	                            %slots = <lower-moe's experts> over [N*T] rows, the rank's slice
 *	                            %part = reduce_sum (where %ir >= 0, %slots, 0) over k
 *	                            %ret = all_to_all %part as [N, T, H]
 *	                            %ys = gather %ret, %back ; %y = reduce_sum [T,N,H] over N
 *	   (--ep-combine=slots:     %ret = all_to_all %slots as [N, T*k, H]
 *	                            %ys = gather %ret, %back ; %y = reduce_sum [T,k,H] over k)
 *
 * The slice is a weight-only gather of the rank's experts from each stack
 * (folded at compile time, or run once at load).  Shared experts and dense
 * layers are not moe ops: they stay whole on every rank (replicated).
 * Buffers are padded to T rows per peer (the worst case), so the sizes of
 * every exchange are known from T on the host: no count is read back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* --- placement ------------------------------------------------------------ */

/* "3", "4-7": one item of a rank's list; 0 ok. */
static int
parse_item(const char *s, int64_t *lo, int64_t *hi)
{
	char *end;

	*lo = strtoll(s, &end, 10);
	if (end == s || *lo < 0)
		return -1;
	*hi = *lo;
	if (*end == '-') {
		const char *p = end + 1;
		*hi = strtoll(p, &end, 10);
		if (end == p || *hi < *lo)
			return -1;
	}
	return *end ? -1 : 0;
}

/* One line "R: e e-e ...": the experts marked with R in owner[]. */
static int
parse_line(char *line, const char *file, int ln, const EpOpts *o, int64_t ne, int64_t *owner,
	   const int *seen_rank, int64_t *rank, Diag *d)
{
	char *colon = strchr(line, ':'), *end, *save, *tok;
	Loc at = loc_line(file, ln, 1);

	if (!colon)
		return diag_error(d, at, "wants 'RANK: EXPERTS' (e.g. '0: 0-7 12')");
	*colon = 0;
	*rank = strtoll(line, &end, 10);
	while (*end == ' ' || *end == '\t')
		end++;
	if (end == line || *end)
		return diag_error(d, at, "'%s' is not a rank number", line);
	if (*rank < 0 || *rank >= o->ranks)
		return diag_error(d, at, "rank %lld is not in 0..%d (--ep=%d)", (long long)*rank,
				  o->ranks - 1, o->ranks);
	if (seen_rank[*rank])
		return diag_error(d, at, "rank %lld is listed twice (first on line %d)",
				  (long long)*rank, seen_rank[*rank]);
	for (tok = strtok_r(colon + 1, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
		int64_t lo, hi;
		if (parse_item(tok, &lo, &hi))
			return diag_error(d, at, "'%s' is not an expert or a range A-B", tok);
		if (hi >= ne)
			return diag_error(d, at, "expert %lld is not in 0..%lld", (long long)hi,
					  (long long)ne - 1);
		for (int64_t x = lo; x <= hi; x++) {
			if (owner[x] >= 0)
				return diag_error(d, at, "expert %lld is placed twice (on rank %lld "
						  "already)", (long long)x, (long long)owner[x]);
			owner[x] = *rank;
		}
	}
	return 0;
}

static int
read_placement(const EpOpts *o, int64_t ne, int64_t *owner, Diag *d)
{
	size_t len;
	char *text = file_read_max(o->placement, 1 << 20, &len, d), *save, *line;
	int *seen = xcalloc((size_t)o->ranks, sizeof *seen), ln = 0, rc = 0;

	if (!text) {
		free(seen);
		return -1;
	}
	for (int64_t x = 0; x < ne; x++)
		owner[x] = -1;
	/* strtok_r skips empty lines: count them by hand */
	for (line = text; line && !rc; line = save) {
		char *nl = strchr(line, '\n'), *hash;
		int64_t r = 0;
		save = nl ? nl + 1 : NULL;
		if (nl)
			*nl = 0;
		ln++;
		if ((hash = strchr(line, '#')))
			*hash = 0;
		line += strspn(line, " \t\r");
		line[strcspn(line, "\r")] = 0;
		if (!*line)
			continue;
		if (parse_line(line, o->placement, ln, o, ne, owner, seen, &r, d))
			rc = -1;
		else
			seen[r] = ln;
	}
	for (int r = 0; r < o->ranks && !rc; r++)
		if (!seen[r])
			rc = diag_error(d, loc_file(o->placement), "rank %d has no line (every rank "
					"0..%d needs its experts)", r, o->ranks - 1);
	for (int64_t x = 0; x < ne && !rc; x++)
		if (owner[x] < 0)
			rc = diag_error(d, loc_file(o->placement), "expert %lld is on no rank",
					(long long)x);
	free(text);
	free(seen);
	return rc;
}

int
ep_placement(const EpOpts *o, int64_t ne, int64_t *owner, int64_t *local, Diag *d)
{
	int64_t *count;

	if (o->ranks < 1 || o->ranks > IR_EP_MAX_RANKS)
		return diag_error(d, LOC_NONE, "--ep=%d: the ranks must be in 1..%d", o->ranks,
				  IR_EP_MAX_RANKS);
	if (o->ranks > ne)
		return diag_error(d, LOC_NONE, "--ep=%d: more ranks than the %lld experts", o->ranks,
				  (long long)ne);
	if (o->placement) {
		if (read_placement(o, ne, owner, d))
			return -1;
	} else if (ne % o->ranks) {
		return diag_error(d, LOC_NONE, "--ep=%d does not divide the %lld experts into "
				  "equal slices (give --ep-placement=FILE)", o->ranks, (long long)ne);
	} else {
		for (int64_t x = 0; x < ne; x++)
			owner[x] = x / (ne / o->ranks);
	}
	count = xcalloc((size_t)o->ranks, sizeof *count);
	for (int64_t x = 0; x < ne; x++)	/* in expert order on each rank */
		local[x] = count[owner[x]]++;
	for (int r = 0; r < o->ranks; r++)
		if (!count[r]) {
			free(count);
			return diag_error(d, o->placement ? loc_file(o->placement) : LOC_NONE,
					  "rank %d holds no expert", r);
		}
	free(count);
	return 0;
}

/* --- the partitioned block ------------------------------------------------ */

static Value *
reshape(Builder *b, Value *v, int rank, const Dim *dims)
{
	ir_b_dims(b, "shape", dims, rank);
	return ir_b1(b, OP_RESHAPE, v);
}

/* The rank's experts of a stack (NULL stays NULL). */
static Value *
slice(Builder *b, Value *stack, const int64_t *ids, int n)
{
	if (!stack)
		return NULL;
	Value *ix = ir_b_const_i(b, DT_I32, ids, n, 1);
	ir_b_int(b, "axis", 0);
	return ir_b2(b, OP_GATHER, stack, ix);
}

static Value *
all_to_all(Builder *b, Value *v, int ranks)
{
	ir_b_int(b, "ranks", ranks);
	return ir_b1(b, OP_ALL_TO_ALL, v);
}

Value *
partition_ep(Graph *g, Node *moe, PassCtx *c)
{
	Module *m = g->m;
	const EpOpts *o = c->ep;
	Builder b = {.g = g, .before = moe, .loc = moe->loc, .d = c->d};
	Value *x = moe->in[0], *v[18] = {0}, *in[3];
	int64_t ne = moe->in[3]->type.dim[0], *owner, *local, *mine, nmine = 0;
	Dim T = x->type.dim[0], H = x->type.dim[1], NT = ir_dim_mul(m, T, o->ranks);
	Value *y = NULL;
	Node *n;

	owner = xmalloc(sizeof *owner * (size_t)(3 * ne + 1));
	local = owner + ne;
	mine = local + ne;
	if (ep_placement(o, ne, owner, local, c->d) || !(n = lower_moe_route(&b, moe)))
		goto out;
	for (int64_t e = 0; e < ne; e++)
		if (owner[e] == o->rank)
			mine[nmine++] = e;
	int64_t k = n->out[1]->type.dim[1];
	Dim NTk = ir_dim_mul(m, NT, k), Tk = ir_dim_mul(m, T, k);

	/* dispatch: each row once per rank that holds one of its experts */
	in[0] = x, in[1] = n->out[0], in[2] = n->out[1];
	v[0] = in[1], v[1] = in[2];
	ir_b_int(&b, "ranks", o->ranks);
	ir_b_ints(&b, "owner", owner, (int)ne);
	ir_b_ints(&b, "local", local, (int)ne);
	if (!o->slots)
		ir_b_str(&b, "combine", "sum");
	if (!(n = ir_b_node(&b, OP_EP_PACK, in, 3, 4)))
		goto out;
	Value *xr = all_to_all(&b, n->out[0], o->ranks), *wr = all_to_all(&b, n->out[1], o->ranks);
	Value *ir = all_to_all(&b, n->out[2], o->ranks), *back = n->out[3];
	Dim xdim[2] = {NT, H}, kdim[2] = {NT, k};
	v[2] = xr, v[3] = wr, v[4] = ir, v[5] = back;
	v[15] = n->out[0], v[16] = n->out[1], v[17] = n->out[2];

	/* the rank's experts on every row it received: lower-moe's pipeline */
	MoeSlots s = {.x = reshape(&b, xr, 2, xdim), .w = reshape(&b, wr, 2, kdim),
		      .ids = reshape(&b, ir, 2, kdim), .experts = nmine,
		      .slots_x = lower_moe_slots_x(moe, c->debug)};	/* lower-moe's slots, bit for bit */
	s.slots_out = lower_moe_slots_out(moe, s.slots_x, c->debug);
	s.wgu = slice(&b, moe->in[3], mine, (int)nmine);
	s.wdn = slice(&b, moe->in[4], mine, (int)nmine);
	s.bgu = slice(&b, moe->nin > 5 ? moe->in[5] : NULL, mine, (int)nmine);
	s.bdn = slice(&b, moe->nin > 6 ? moe->in[6] : NULL, mine, (int)nmine);
	Value *slots = b.err ? NULL : lower_moe_slots(&b, moe, &s, &v[6]);
	if (slots && s.slots_out) {	/* weighted here in f32: lower_moe_sum's products at home, the same bits */
		Dim wdim[2] = {NTk, 1};
		slots = ir_b2(&b, OP_MUL, lower_moe_f32(&b, slots), reshape(&b, s.w, 2, wdim));
	}
	if (!slots)
		goto out;

	/* combine: the slots go home, and are summed there in choice order;
	 * or each rank sums its slots of a row first (masked: a slot it does
	 * not hold is never written) and one partial per row goes home, where
	 * the N partials are summed in rank order */
	if (o->slots) {
		Dim rdim[3] = {o->ranks, Tk, H}, fdim[2] = {NTk, H};
		Value *ret = all_to_all(&b, reshape(&b, slots, 3, rdim), o->ranks);
		Value *ret2 = reshape(&b, ret, 2, fdim);
		ir_b_int(&b, "axis", 0);
		Value *ys = ir_b2(&b, OP_GATHER, ret2, back);
		v[13] = ret, v[14] = ys;
		y = ys ? lower_moe_sum(&b, ys, T, k, x->type.dt, NULL) : NULL;
	} else {
		Dim sdim[3] = {NT, k, H}, mdim[3] = {NT, k, 1}, rdim[3] = {o->ranks, T, H},
		    fdim[2] = {NT, H};
		int64_t ax = 1, zero = 0;
		Value *ids3 = reshape(&b, s.ids, 3, mdim), *z = ir_b_const_i(&b, DT_I32, &zero, 1, 0);
		Value *keep = ir_b2(&b, OP_GREATER_EQUAL, ids3, z);
		slots = lower_moe_f32(&b, slots);	/* x's type (slots_x): the partial sum in f32 */
		Value *s3 = reshape(&b, slots, 3, sdim), *fz = ir_b_const_f(&b, DT_F32, 0);
		Value *in3[3] = {keep, s3, fz};
		Node *w = b.err ? NULL : ir_b_node(&b, OP_WHERE, in3, 3, 1);
		ir_b_ints(&b, "axes", &ax, 1);
		ir_b_int(&b, "keepdims", 0);
		Value *part = w ? ir_b1(&b, OP_REDUCE_SUM, w->out[0]) : NULL;
		Value *ret = part ? all_to_all(&b, reshape(&b, part, 3, rdim), o->ranks) : NULL;
		Value *ret2 = ret ? reshape(&b, ret, 2, fdim) : NULL;
		ir_b_int(&b, "axis", 0);
		Value *ys = ret2 ? ir_b2(&b, OP_GATHER, ret2, back) : NULL;
		v[13] = ret, v[14] = ys;
		y = ys ? lower_moe_sum(&b, ys, T, o->ranks, x->type.dt, NULL) : NULL;
	}
	if (y) {
		static const char *const suffix[] = {"w", "ids", "xr", "wr", "ir", "back", "offs",
						     "rows", "src", "xs", "act", "down", "slots",
						     "ret", "home", "xsend", "wsend", "isend"};
		lower_moe_names(g, moe, v, suffix, (int)NELEM(suffix));
	}
	if (y && c->report)
		report_note(c->report, "moe %%%s partitioned: rank %d of %d holds %lld of %lld experts; "
			    "route replicated, rows dispatched once per rank (all_to_all, padded to "
			    "T per peer), %s",
			    moe->out[0]->name, o->rank, o->ranks, (long long)nmine, (long long)ne,
			    o->slots ? "slots returned and summed over k in choice order"
				     : "one partial sum per token and rank returned (summed over the "
				       "rank's choices in choice order, then over ranks in rank order)");
out:
	free(owner);
	return b.err ? NULL : y;
}
