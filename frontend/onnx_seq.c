/*
 * onnx_seq.c — sequences of a length known at import: SplitToSequence,
 * SequenceConstruct, SequenceInsert, SequenceAt, SequenceLength and
 * ConcatFromSequence.  torch.onnx.export (dynamo) writes torch's chunk,
 * split and unbind as SplitToSequence + SequenceAt when its graph optimiser
 * is off (`optimize=False`); every MoE expert's gate|up chunk is one.
 *
 * The IR has no sequence type: a sequence is its tensors' IR values, held
 * by the ONNX value (OVal.seq) while the graph is imported.  Only the ops
 * below read one (run_importer refuses the others), and a graph output
 * cannot be one.
 */
#include <string.h>

#include "onnx_int.h"

#define SEQ_MAX 1024	/* tensors in one sequence (a split's outputs) */

/* The operators that take a sequence operand (Identity passes it on). */
int
ox_reads_seq(const char *domain, const char *op)
{
	static const char *const readers[] = {
		"SequenceInsert", "SequenceAt", "SequenceLength", "ConcatFromSequence", "Identity",
	};

	for (size_t i = 0; i < NELEM(readers) && !*domain; i++)
		if (!strcmp(op, readers[i]))
			return 1;
	return 0;
}

/* Output i is the sequence v[0..k). */
static int
seq_set(ONode *n, int i, Value *const *v, int k)
{
	OVal *o = i < n->nout ? n->out[i] : NULL;

	for (int j = 0; j < k; j++)
		if (!v[j])
			return -1;
	if (!o)
		return 0;
	o->seq = arena_array(n->c->tmp, Value *, k + 1);
	memcpy(o->seq, v, sizeof *v * (size_t)k);
	o->nseq = k;
	o->v = NULL;
	o->k = NULL;
	o->type = k ? v[0]->type : ir_type(DT_F32, 0, NULL);
	o->state = 1;
	return 0;
}

/* Input i as a sequence; NULL (with a diagnostic) if it is a tensor. */
static OVal *
seq_in(ONode *n, int i)
{
	if (!n->in[i]->seq)
		ox_err(n, "input %d ('%s') is a tensor, not a sequence", i, n->in[i]->name);
	return n->in[i]->seq ? n->in[i] : NULL;
}

/* A constant position in [-len, len] (at: [-len, len)), made non-negative. */
static int
seq_pos(ONode *n, int i, int len, int at, int *pos)
{
	int64_t p;

	if (ox_known_ints(ox_kin(n, i), &p, 1) != 1)
		return ox_err(n, "position must be a constant");
	if (p < -len || p > len - at)
		return ox_err(n, "position %lld is out of range for a sequence of %d", (long long)p, len);
	*pos = (int)(p < 0 ? p + len : p);
	return 0;
}

/* x without its dim `axis` (of size 1): keepdims=0. */
static Value *
drop_axis(ONode *n, Value *x, int64_t axis)
{
	Dim d[MAXRANK];
	int r = 0;

	if (!x)
		return NULL;
	for (int i = 0; i < x->type.rank; i++)
		if (i != axis)
			d[r++] = x->type.dim[i];
	ir_b_dims(n->b, "shape", d, r);
	return ir_b1(n->b, OP_RESHAPE, x);
}

/* SplitToSequence(x, split?): without split, pieces of 1 along axis (and
 * keepdims=0 drops that axis); a scalar split is a chunk length (the last
 * piece shorter); a 1-D split lists the lengths, or computes them (JetMoE's
 * rows per expert: slices at their running sum, as Split does). */
int
imp_split_to_sequence(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	int64_t axis, d, sizes[SEQ_MAX], chunk;
	int k, whole = !ox_has(n, 1), keep = ox_attr_i(n, "keepdims", 1) != 0;
	Value *x = ox_in(n, 0), *out[SEQ_MAX];
	Node *r;

	if (ox_axis(n, ox_attr_i(n, "axis", 0), t->rank, &axis))
		return -1;
	d = t->dim[axis];
	if (whole || ox_tin(n, 1)->rank == 0) {
		if (d < 0)
			return ox_err(n, "splitting symbolic dim %d into pieces needs its length", (int)axis);
		chunk = 1;
		if (!whole && ox_known_ints(ox_kin(n, 1), &chunk, 1) != 1)
			return ox_err(n, "split must be a constant");
		if (chunk < 1)
			return ox_err(n, "split %lld is not positive", (long long)chunk);
		if ((d + chunk - 1) / chunk > SEQ_MAX)
			return ox_err(n, "more than %d pieces", SEQ_MAX);
		k = (int)((d + chunk - 1) / chunk);
		for (int i = 0; i < k; i++)
			sizes[i] = MIN(chunk, d - i * chunk);
	} else if (ox_known_ints(ox_kin(n, 1), sizes, SEQ_MAX) < 0 && ox_tin(n, 1)->rank == 1 &&
		   ox_tin(n, 1)->dim[0] >= 1 && ox_tin(n, 1)->dim[0] <= 64 && !dtype_is_float(ox_tin(n, 1)->dt)) {
		k = (int)ox_tin(n, 1)->dim[0];
		if (ox_split_by_data(n, x, ox_in(n, 1), axis, k, out))
			return -1;
		return seq_set(n, 0, out, k);
	} else {
		k = ox_known_ints(ox_kin(n, 1), sizes, SEQ_MAX);
		if (k < 0 || k > SEQ_MAX)
			return ox_err(n, "split must be a constant of at most %d lengths, or a computed "
				      "vector of at most 64", SEQ_MAX);
		for (int i = 0; i < k; i++)
			if (sizes[i] < 0)
				return ox_err(n, "split length %lld is negative", (long long)sizes[i]);
	}
	if (k < 1)
		return ox_err(n, "an empty sequence (dim %d has length 0)", (int)axis);
	ir_b_int(n->b, "axis", axis);
	ir_b_ints(n->b, "sizes", sizes, k);
	if (!(r = ir_b_node(n->b, OP_SPLIT, &x, 1, k)))
		return -1;
	for (int i = 0; i < k; i++)
		out[i] = whole && !keep ? drop_axis(n, r->out[i], axis) : r->out[i];
	return seq_set(n, 0, out, k);
}

int
imp_sequence_construct(ONode *n)
{
	Value *v[SEQ_MAX];

	if (n->nin > SEQ_MAX)
		return ox_err(n, "more than %d tensors", SEQ_MAX);
	for (int i = 0; i < n->nin; i++)
		if (n->in[i]->seq)
			return ox_err(n, "input %d ('%s') is a sequence, not a tensor", i, n->in[i]->name);
		else
			v[i] = ox_in(n, i);
	return seq_set(n, 0, v, n->nin);
}

int
imp_sequence_insert(ONode *n)
{
	OVal *s = seq_in(n, 0);
	Value *v[SEQ_MAX + 1];
	int pos;

	if (!s)
		return -1;
	if (n->in[1]->seq)
		return ox_err(n, "input 1 ('%s') is a sequence, not a tensor", n->in[1]->name);
	if (s->nseq >= SEQ_MAX)
		return ox_err(n, "more than %d tensors", SEQ_MAX);
	pos = s->nseq;
	if (ox_has(n, 2) && seq_pos(n, 2, s->nseq, 0, &pos))
		return -1;
	memcpy(v, s->seq, sizeof *v * (size_t)pos);
	v[pos] = ox_in(n, 1);
	memcpy(v + pos + 1, s->seq + pos, sizeof *v * (size_t)(s->nseq - pos));
	return seq_set(n, 0, v, s->nseq + 1);
}

int
imp_sequence_at(ONode *n)
{
	OVal *s = seq_in(n, 0);
	int pos;

	if (!s || seq_pos(n, 1, s->nseq, 1, &pos))
		return -1;
	return ox_set(n, 0, s->seq[pos]);
}

int
imp_sequence_length(ONode *n)
{
	OVal *s = seq_in(n, 0);
	Known *k;

	if (!s)
		return -1;
	k = ox_known_new(n->c, DT_I64, 0, NULL);
	k->iv[0] = (SInt){s->nseq, SI_NUM};
	ox_set_known(n, 0, k);
	return 0;
}

/* ConcatFromSequence: Concat of the tensors, or with new_axis=1 a stack
 * (each gets a dim of 1 at axis first). */
int
imp_concat_from_sequence(ONode *n)
{
	OVal *s = seq_in(n, 0);
	int stack = ox_attr_i(n, "new_axis", 0) != 0, rank;
	int64_t axis;
	Value *v[SEQ_MAX];
	Node *r;

	if (!s)
		return -1;
	if (!ox_attr(n, "axis"))
		return ox_err(n, "attribute 'axis' is required");
	if (s->nseq < 1)
		return ox_err(n, "the sequence is empty");
	rank = s->seq[0]->type.rank;
	if (ox_axis(n, ox_attr_i(n, "axis", 0), rank + stack, &axis))
		return -1;
	for (int i = 0; i < s->nseq; i++) {
		v[i] = s->seq[i];
		if (stack) {
			Dim d[MAXRANK];
			if (rank + 1 > MAXRANK)
				return ox_err(n, "rank %d is too large to stack", rank);
			for (int j = 0, q = 0; j <= rank; j++) {
				d[j] = j == axis ? 1 : v[i]->type.dim[q++];
				if (ir_dim_has_unknown(n->c->m, d[j]))
					return ox_err(n, "new_axis=1 over a dim computed from data");
			}
			ir_b_dims(n->b, "shape", d, rank + 1);
			v[i] = ir_b1(n->b, OP_RESHAPE, v[i]);
		}
	}
	if (s->nseq == 1)
		return ox_set(n, 0, v[0]);
	ir_b_int(n->b, "axis", axis);
	r = ir_b_node(n->b, OP_CONCAT, v, s->nseq, 1);
	return ox_set(n, 0, r ? r->out[0] : NULL);
}
