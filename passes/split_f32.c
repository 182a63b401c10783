/*
 * split-f32: an f32 GEMM whose A is provably bf16-exact and whose B is an
 * f32 weight becomes one bf16 GEMM with f32 accumulation over three times
 * the K, on tensor cores, computing the same products exactly.  The weight is
 * split, W = hi + mid + lo with hi = bf16(W), mid = bf16(W - hi), lo =
 * bf16(W - hi - mid), as weight-only IR that fold evaluates at compile time
 * for a real weight (a synthetic one's runs once at load), after the pass
 * has checked on W's values that the three parts add up to W exactly
 * (util: bf16_split3); A is read three times along K (fuse-gemm keeps the
 * concat in the GEMM kernel, which reads A's k index modulo K:
 * GemmSpec.a_rep):
 *
 *	%h = rms_norm %x, $g : bf16[T,H]           %h = rms_norm %x, $g : bf16[T,H]
 *	%a = cast %h, to=f32 : f32[T,H]      =>    %a3 = concat %h, %h, %h, axis=-1 : bf16[T,3H]
 *	%l = matmul %a, $w, trans_b=1, to=f32       %l = matmul %a3, %w3, trans_b=1, to=f32
 *	     ($w : f32[E,H])                        %w3 = concat(hi, mid, lo, axis=-1) : bf16[E,3H]
 *
 * (The pass writes cast(%a, to=bf16); canon's cast2 folds it into %h.)
 * Each product x * part has 8 x 8 significant bits, exact in f32, and x * W
 * = x*hi + x*mid + x*lo exactly, so the logits differ from the f32 GEMM's
 * only by the order of the f32 additions (as the CUDA-core kernel's order
 * differs from the interpreter's).  This is DeepSeek-V3's router (`F.linear`
 * of the bf16 norm upcast to f32 with the f32 gate weight), 7% of its block
 * at T = 4096 on CUDA cores.
 *
 * A is bf16-exact when, through reshapes and float casts that lose nothing,
 * it is a cast of a value whose type holds only bf16 values (bf16, f8e4m3,
 * f8e5m2, int8/uint8, bool): the graph's semantics, whatever op spelled the
 * upcast.  Left alone, and said in the fusion report: A computed in f32 (a
 * true f32 activation; `moec compile -v` then names the CUDA-core kernel),
 * a weight the split does not represent exactly (non-finite, or |w| so small
 * a part would be subnormal: below about 2^-103), a bundle for the decode
 * range only (max_tokens <= 64: the decode front's CUDA-core router reads
 * the f32 weight, 2/3 of the split's bytes; with --debug=no-front there is
 * no front and the split is taken), and --debug=simt-router.
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

#define SPLIT_DECODE_T 64	/* codegen's CG_FRONT_MAX_T: max_tokens up to it get a decode front */
/* An f32 GEMM left as it is: the H100/H200 peaks, f32 on CUDA cores vs three bf16 passes on tensor cores */
#define SIMT_COST "cost: the GEMM on CUDA cores, about 67 TFLOP/s f32 peak where the exact bf16 x3 split runs at about 330 (989 / 3)"

/* Every value of type dt is a bf16 value. */
static int
bf16_dtype(DType dt)
{
	return dt == DT_BF16 || dt == DT_F8E4M3 || dt == DT_F8E5M2 || dt == DT_I8 || dt == DT_U8 ||
	       dt == DT_BOOL;
}

/* v holds only bf16 values: a bf16 type, or views and casts (a float cast
 * from a bf16-exact value loses nothing, and widening keeps it exact). */
static int
bf16_exact(const Value *v)
{
	for (int hops = 0; hops < 16; hops++) {
		if (bf16_dtype(v->type.dt))
			return 1;
		if (v->kind != V_RESULT)
			return 0;
		const Node *n = v->def;
		if (ir_is_view(n) || n->op == OP_TRANSPOSE || n->op == OP_IDENTITY)
			v = n->in[0];
		else if (n->op == OP_CAST && dtype_is_float(v->type.dt) && dtype_bits(v->type.dt) >= 16 &&
			 (v->type.dt != DT_F16 || dtype_bits(n->in[0]->type.dt) <= 8))
			v = n->in[0];	/* f32, bf16 and f16 hold every value a bf16-exact operand has
					 * (f16 only the 8-bit ones: bf16's range is wider) */
		else
			return 0;
	}
	return 0;
}

/* Why matmul n is no candidate (NULL: it is one): f32 x f32 weight, to f32. */
static const char *
not_candidate(const Node *n)
{
	const Value *a = n->in[0], *w = n->in[1];

	if (a->type.dt != DT_F32 || w->type.dt != DT_F32 || n->out[0]->type.dt != DT_F32)
		return "";	/* not an f32 GEMM: nothing to say */
	if (w->kind != V_WEIGHT || w->type.rank != 2)
		return "B is not a 2-D f32 weight known at compile time";
	if (ir_attr_int(n, "trans_a", 0) || a->type.rank < 2)
		return "A is transposed or a vector";
	if (n->nin > 2 && n->in[2])
		return "it has a bias";
	return NULL;
}

/* The first element of $w the split does not represent exactly (bf16_split3),
 * or -1 when there is none; -2 with a diagnostic when w has no data. */
static int64_t
inexact(Value *w, Diag *d)
{
	const float *x = ir_weight_data(w->weight, d);
	int64_t n = ir_type_numel(&w->type);
	uint16_t p[3];

	if (!x)
		return -2;
	for (int64_t i = 0; i < n; i++)
		if (bf16_split3(x[i], p))
			return i;
	return -1;
}

/*
 * [hi | mid | lo] of $w along K (B[N,K]: columns; B[K,N]: rows) as
 * weight-only IR: hi = bf16(w), r = w - hi (exact in f32), mid = bf16(r),
 * lo = bf16(r - mid).  fold computes it from a real weight at compile time;
 * a synthetic weight's runs once at load on the device (an init step), so a
 * bundle carries no split data it can generate.
 */
static Value *
split_ops(Builder *b, Value *w, int trans_b)
{
	Value *part[3], *r = w;

	for (int s = 0; s < 3; s++) {
		ir_b_str(b, "to", "bf16");
		part[s] = ir_b1(b, OP_CAST, r);
		if (s < 2) {
			ir_b_str(b, "to", "f32");
			Value *back = ir_b1(b, OP_CAST, part[s]);
			r = ir_b2(b, OP_SUB, r, back);
		}
	}
	ir_b_int(b, "axis", trans_b ? -1 : 0);
	Node *c = ir_b_node(b, OP_CONCAT, part, 3, 1);
	return c && !b->err ? c->out[0] : NULL;
}

/* Rewrite matmul n as the bf16 x3 GEMM; 1 done, 0 refused (reported), -1 error. */
static int
split_one(Graph *g, Node *n, const char *what, PassCtx *c)
{
	Value *a = n->in[0], *w = n->in[1];
	int tb = (int)ir_attr_int(n, "trans_b", 0);
	int64_t bad;
	Diag quiet;

	diag_init(&quiet, NULL);
	if ((bad = inexact(w, &quiet)) == -2)
		return diag_error(c->d, n->loc, "split-f32: weight $%s: %s", w->name, quiet.last), -1;
	if (bad >= 0) {
		report_skip(c->report, "%s %%%s kept an f32 GEMM: $%s[%lld] = %g is not three "
			    "normal bf16 parts exactly (not finite, or a part would be subnormal); %s",
			    what, n->out[0]->name, w->name, (long long)bad,
			    (double)((const float *)ir_weight_data(w->weight, &quiet))[bad], SIMT_COST);
		return 0;
	}
	Builder b = {.g = g, .before = n, .loc = n->loc, .d = c->d};
	Value *w3 = split_ops(&b, w, tb);
	if (!w3)
		return -1;
	/* w3 keeps a temporary's name: one naming the layer would name its init
	 * step's kernel too, and layers would no longer share kernels (--layers) */
	ir_b_str(&b, "to", "bf16");
	Value *h = ir_b1(&b, OP_CAST, a);
	Value *three[3] = {h, h, h};
	ir_b_int(&b, "axis", -1);
	Node *cat = ir_b_node(&b, OP_CONCAT, three, 3, 1);
	if (!cat)
		return -1;
	if (tb)
		ir_b_int(&b, "trans_b", 1);
	ir_b_str(&b, "to", "f32");
	Value *y = ir_b2(&b, OP_MATMUL, cat->out[0], w3);
	if (b.err || !y)
		return -1;
	const char *name = n->out[0]->name;
	ir_replace_uses(g, n->out[0], y);
	ir_erase(g, n);
	ir_set_name(g, n->out[0], NULL);	/* frees its name for y */
	ir_set_name(g, y, name);
	report_note(c->report, "%s %%%s split: $%s = hi + mid + lo in bf16 exactly (%%%s), %%%s is "
		    "bf16-exact: one bf16 GEMM over 3K with f32 accumulation (tensor cores where a tile fits)",
		    what, y->name, w->name, w3->name, a->name);
	return 1;
}

int
split_f32(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++) {
		Graph *g = m->graph[i];
		if (g->kind != G_GRAPH)
			continue;
		ir_fill_uses(g);
		unsigned char *routing = pass_feeds_routing(g);
		for (Node *n = g->first, *next; n; n = next) {
			next = n->next;
			if (n->op != OP_MATMUL)
				continue;
			const char *why = not_candidate(n), *what =
				routing[n->out[0]->id] ? "router GEMM" : "f32 GEMM";
			int k = 0;
			if (why && !*why)
				continue;
			if (!why && !bf16_exact(n->in[0]))
				why = "A is not provably bf16-exact (computed in f32, not a cast of bf16 values)";
			if (!why && (c->debug & DBG_SIMT_ROUTER))
				why = "--debug=simt-router";
			if (!why && c->max_tokens > 0 && c->max_tokens <= SPLIT_DECODE_T && !(c->debug & DBG_NO_FRONT))
				why = "max_tokens is in the decode range (the decode front reads the f32 weight)";
			if (why)
				report_skip(c->report, "%s %%%s kept an f32 GEMM: %s; %s", what,
					    n->out[0]->name, why, SIMT_COST);
			else if ((k = split_one(g, n, what, c)) < 0) {
				free(routing);
				return -1;
			}
			changed |= k;
		}
		free(routing);
	}
	return changed;
}
