/*
 * plan.c — the runtime's decisions that need no GPU, as pure functions:
 * which code section to load for a compute capability (docs/bundle.md §4),
 * the token range, shapes resolved at T and checked against host tensors,
 * grids and memsets evaluated at T, the device memory plan, and kernel
 * params laid out and marshalled into the param buffer.  The unit tests
 * call these directly; load.c and run.c only add the driver calls.
 */
#include <string.h>

#include "internal.h"

/* --- code choice --------------------------------------------------------- */

/*
 * Rank of code section `name` on device sm `dev`: 0 if it cannot run.
 * An exact cubin beats any PTX; among PTX the highest target wins; an
 * arch-specific target (sm_90a) runs only on its own sm and beats sm_90.
 */
static int
rank_code(const char *name, int dev)
{
	int sm, a;

	if (strncmp(name, "cubin:", 6) == 0 && bundle_parse_sm(name + 6, &sm, &a))
		return sm == dev ? 100000 + 2 * sm + a : 0;
	if (strncmp(name, "ptx:", 4) == 0 && bundle_parse_sm(name + 4, &sm, &a))
		return (a ? sm == dev : sm <= dev) ? 2 * sm + a + 1 : 0;
	return 0;
}

moert_status
moert_pick_code(const char *const *names, int n, int major, int minor,
		int *pick)
{
	int dev = major * 10 + minor, best = 0, r;
	char has[1024];
	size_t k = 0;

	*pick = -1;
	for (int i = 0; i < n; i++)
		if ((r = rank_code(names[i], dev)) > best)
			best = r, *pick = i;
	if (*pick >= 0)
		return MOERT_OK;
	has[0] = 0;
	for (int i = 0; i < n && k < sizeof has; i++)
		if (!strncmp(names[i], "ptx:", 4) || !strncmp(names[i], "cubin:", 6))
			k += (size_t)snprintf(has + k, sizeof has - k, "%s%s",
					      k ? ", " : "", names[i]);
	return moert_seterr(MOERT_EARCH, "no code for sm_%d in bundle (has: %s)",
			    dev, k ? has : "none");
}

/* --- tokens and shapes --------------------------------------------------- */

moert_status
moert_check_tokens(const Manifest *m, int64_t tokens)
{
	if (tokens < 1 || tokens > m->max_tokens)
		return moert_seterr(MOERT_ETOKENS, "T=%lld outside 1..%lld "
				    "(max_tokens of the bundle)",
				    (long long)tokens, (long long)m->max_tokens);
	return MOERT_OK;
}

static void
shape_string(char *buf, size_t n, const MTensor *t)
{
	size_t k = (size_t)snprintf(buf, n, "%s[", dtype_name(t->dt));

	for (int i = 0; i < t->rank && k < n; i++) {
		if (i && k < n)
			buf[k++] = ',';
		k += (size_t)bundle_expr_print(buf + k, n - k, &t->dim[i]);
	}
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

moert_status
moert_tensor_resolve(const MTensor *t, int64_t tokens, moert_tensor_info *info)
{
	int64_t n = 1, v;

	memset(info, 0, sizeof *info);
	info->name = t->name;
	info->dtype = dtype_name(t->dt);
	info->rank = t->rank;
	for (int i = 0; i < t->rank; i++) {
		if (bundle_expr_eval(&t->dim[i], tokens, &v) ||
		    __builtin_mul_overflow(n, v, &n) || n > (INT64_MAX >> 4))
			return moert_seterr(MOERT_ESHAPE, "'%s' overflows at "
					    "T=%lld", t->name, (long long)tokens);
		info->dim[i] = v;
	}
	info->bytes = dtype_bytes(t->dt, (size_t)n);
	return MOERT_OK;
}

/* Dim i of tensor t (declared a*T) is `got`: the T it implies. */
static moert_status
implied_tokens(const char *what, const MTensor *t, int i, int64_t got,
	       int64_t max, int64_t *tokens)
{
	int64_t a = t->dim[i].a, T;

	if (got % a)
		return moert_seterr(MOERT_ESHAPE, "%s '%s' dim %d is %lld, not "
				    "a multiple of %lld (declared %lld*T)", what,
				    t->name, i, (long long)got, (long long)a,
				    (long long)a);
	T = got / a;
	if (*tokens >= 0 && T != *tokens)
		return moert_seterr(MOERT_ESHAPE, "%s '%s' dim %d implies T=%lld, "
				    "but T=%lld already", what, t->name, i,
				    (long long)T, (long long)*tokens);
	if (T < 1 || T > max)
		return moert_seterr(MOERT_ETOKENS, "%s '%s' dim %d implies "
				    "T=%lld, outside 1..%lld (max_tokens)", what,
				    t->name, i, (long long)T, (long long)max);
	*tokens = T;
	return MOERT_OK;
}

/* A host tensor (dtype name, dims) against a declared input or output. */
static moert_status
check_tensor(const char *what, const MTensor *t, int64_t max,
	     const char *dtype, int rank, const int64_t *dim, int64_t *tokens)
{
	char decl[160];
	moert_status s;
	int64_t flat[MAXRANK];

	shape_string(decl, sizeof decl, t);
	/* Leading dims (batch, seq) may come unflattened: tensors are row-major,
	 * so [2,8,32] is the declared [T,32] with T = 16. */
	if (rank > t->rank && t->rank >= 1 && t->dim[0].a && rank <= MAXRANK) {
		int extra = rank - t->rank;
		flat[0] = 1;
		for (int i = 0; i <= extra; i++)
			flat[0] *= dim[i];
		for (int i = 1; i < t->rank; i++)
			flat[i] = dim[extra + i];
		dim = flat;
		rank = t->rank;
	}
	if (strcmp(dtype, dtype_name(t->dt)) != 0)
		return moert_seterr(MOERT_ESHAPE, "%s '%s' has dtype %s, the "
				    "bundle declares %s", what, t->name, dtype,
				    decl);
	if (rank != t->rank)
		return moert_seterr(MOERT_ESHAPE, "%s '%s' has rank %d, the "
				    "bundle declares %s", what, t->name, rank,
				    decl);
	for (int i = 0; i < rank; i++) {
		if (t->dim[i].a == 0 && dim[i] != t->dim[i].b)
			return moert_seterr(MOERT_ESHAPE, "%s '%s' dim %d is "
					    "%lld, the bundle declares %s", what,
					    t->name, i, (long long)dim[i], decl);
		if (t->dim[i].a &&
		    (s = implied_tokens(what, t, i, dim[i], max, tokens)))
			return s;
	}
	return MOERT_OK;
}

/* --- grids, memsets, params ---------------------------------------------- */

static const char *
step_name(const Manifest *m, const MStep *s)
{
	return s->kind == STEP_MEMSET ? "memset" : s->kind == STEP_ALL_TO_ALL ? "all_to_all"
	       : m->k[s->kidx].name;
}

moert_status
moert_eval_grid(const MStep *s, int64_t tokens, unsigned grid[3])
{
	static const int64_t lim[3] = {INT32_MAX, 65535, 65535};
	int64_t v;

	for (int i = 0; i < 3; i++) {
		if (bundle_expr_eval(&s->grid[i], tokens, &v) || v < 1 ||
		    v > lim[i])
			return moert_seterr(MOERT_ELAUNCH, "kernel '%s' "
					    "(manifest line %d): grid dim %d "
					    "out of range at T=%lld", s->kernel,
					    s->line, i, (long long)tokens);
		grid[i] = (unsigned)v;
	}
	return MOERT_OK;
}

moert_status
moert_eval_memset(const Manifest *m, const MStep *s, int64_t tokens,
		  uint64_t *off, uint64_t *bytes)
{
	const MBuffer *b = &m->buf[s->dst.index];
	int64_t n, size;

	if (bundle_expr_eval(&s->bytes, tokens, &n) ||
	    bundle_expr_eval(&b->bytes, tokens, &size) ||
	    s->dst.off > (uint64_t)size || (uint64_t)n > size - s->dst.off)
		return moert_seterr(MOERT_ELAUNCH, "memset (manifest line %d) "
				    "overruns buffer '%s' at T=%lld", s->line,
				    b->name, (long long)tokens);
	*off = b->offset + s->dst.off;
	*bytes = (uint64_t)n;
	return MOERT_OK;
}

moert_status
moert_param_layout(const MKernel *k, size_t *off, size_t *size)
{
	size_t pos = 0, n;

	for (int i = 0; i < k->nparam; i++) {
		size_t al;
		n = bundle_mtype_size(k->param[i]);
		al = n > 64 ? 64 : n;	/* natural alignment; a tensor map's is 64 */
		pos = (pos + al - 1) / al * al;
		off[i] = pos;
		pos += n;
	}
	*size = pos;
	if (pos > MOERT_MAXPARAM)
		return moert_seterr(MOERT_ELOAD, "kernel '%s': params take %zu "
				    "bytes, above the limit of %d", k->name, pos,
				    MOERT_MAXPARAM);
	return MOERT_OK;
}

static void
put(unsigned char *p, const void *v, size_t n)
{
	memcpy(p, v, n);	/* the param buffer is host-endian, like the GPU */
}

/* The device pointer of a pointer argument. */
static uint64_t
pointer(const Manifest *m, const MoertBases *b, const MArg *a)
{
	switch (a->kind) {
	case ARG_IN: return b->in[a->index];
	case ARG_OUT: return b->out[a->index];
	case ARG_W: return b->w[a->index];
	default: return b->arena + m->buf[a->index].offset + a->off;
	}
}

/*
 * Tensor map t at T = tokens over this run's pointers, into the 128 bytes at
 * p: cuTensorMapEncodeTiled, dims at least 1 (rows past a kernel's M are
 * never stored), element strides 1, no interleave, L2 promotion 128 B,
 * zeros out of bounds.
 */
static moert_status
encode_tmap(const Manifest *m, const MStep *s, const MTmap *t, int64_t tokens,
	    const MoertBases *b, unsigned char *p)
{
	static const int swz[129] = {[32] = 1, [64] = 2, [128] = 3};
	_Alignas(64) unsigned char map[128];
	unsigned long long dims[MTMAP_MAXRANK], strides[MTMAP_MAXRANK];
	unsigned box[MTMAP_MAXRANK], es[MTMAP_MAXRANK];
	/* CUtensorMapDataType: BFLOAT16 9, FLOAT16 6, FLOAT32 7, UINT8 0 (f8e4m3: bytes to the TMA) */
	int dt = t->dt == DT_BF16 ? 9 : t->dt == DT_F16 ? 6 : t->dt == DT_F8E4M3 ? 0 : 7;
	int64_t v;
	CUresult r;

	if (!moert_cu.cuTensorMapEncodeTiled)
		return moert_seterr(MOERT_ELAUNCH, "kernel '%s': tensormap '%s' needs "
				    "cuTensorMapEncodeTiled, which this driver lacks (CUDA 12+)",
				    step_name(m, s), t->name);
	for (int i = 0; i < t->rank; i++) {
		if (bundle_expr_eval(&t->dim[i], tokens, &v) || v < 0)
			return moert_seterr(MOERT_ELAUNCH, "tensormap '%s': dim %d out of range at "
					    "T=%lld", t->name, i, (long long)tokens);
		dims[i] = v > 0 ? (unsigned long long)v : 1;
		box[i] = (unsigned)t->box[i];
		es[i] = 1;
		if (i + 1 < t->rank)
			strides[i] = (unsigned long long)t->stride[i];
	}
	r = moert_cu.cuTensorMapEncodeTiled(map, dt, (unsigned)t->rank,
					    (void *)(uintptr_t)pointer(m, b, &t->of), dims, strides,
					    box, es, 0, swz[t->swizzle], 2, 0);
	if (r != CUDA_SUCCESS) {
		moert_cu_check(r, MOERT_ELAUNCH, "cuTensorMapEncodeTiled", __FILE__, __LINE__);
		return moert_context(MOERT_ELAUNCH, "kernel '%s': tensormap '%s' at T=%lld",
				     step_name(m, s), t->name, (long long)tokens);
	}
	memcpy(p, map, sizeof map);
	return MOERT_OK;
}

moert_status
moert_marshal(const Manifest *m, const MStep *s, int64_t tokens,
	      const MoertBases *b, const size_t *off, unsigned char *buf)
{
	for (int i = 0; i < s->narg; i++) {
		const MArg *a = &s->arg[i];
		unsigned char *p = buf + off[i];
		uint64_t u;
		int32_t v32;
		int64_t v64;

		switch (a->kind) {
		case ARG_IN: u = b->in[a->index]; put(p, &u, 8); break;
		case ARG_OUT: u = b->out[a->index]; put(p, &u, 8); break;
		case ARG_W: u = b->w[a->index]; put(p, &u, 8); break;
		case ARG_BUF:
			u = b->arena + m->buf[a->index].offset + a->off;
			put(p, &u, 8);
			break;
		case ARG_T: v32 = (int32_t)tokens; put(p, &v32, 4); break;
		case ARG_I32: v32 = (int32_t)a->v.i; put(p, &v32, 4); break;
		case ARG_I64: v64 = a->v.i; put(p, &v64, 8); break;
		case ARG_U64: put(p, &a->v.u, 8); break;
		case ARG_F32: put(p, &a->v.f, 4); break;
		case ARG_TMAP: {
			moert_status st = encode_tmap(m, s, &m->tmap[a->index], tokens, b, p);
			if (st)
				return st;
			break;
		}
		default:
			return moert_seterr(MOERT_EINVAL, "kernel '%s': bad "
					    "argument kind %d", step_name(m, s),
					    a->kind);
		}
	}
	return MOERT_OK;
}

/* --- the device memory plan ---------------------------------------------- */

moert_status
moert_mem_plan(const Manifest *m, uint64_t weights_size, uint64_t *woff,
	       uint64_t *wsize, uint64_t *total)
{
	uint64_t base = BUNDLE_ALIGN_UP(weights_size), gen = bundle_generated_layout(m, woff);

	if (gen > UINT64_MAX / 2 - base)
		return moert_seterr(MOERT_ENOMEM, "weights overflow 64 bits");
	for (int i = 0; i < m->nw; i++)	/* packed ones, then the generated region */
		woff[i] = m->w[i].synth ? base + woff[i] : m->w[i].at;
	uint64_t pos = base + gen;
	*wsize = pos;
	if (m->arena > UINT64_MAX / 2 - pos)
		return moert_seterr(MOERT_ENOMEM, "arena overflows 64 bits");
	*total = pos + m->arena;
	return MOERT_OK;
}

/* --- public, host-only queries ------------------------------------------- */

int
moert_num_inputs(const moert_program *p)
{
	return p ? p->m->nin : 0;
}

int
moert_num_steps(const moert_program *p)
{
	return p ? p->m->nstep : 0;
}

const char *
moert_step_name(const moert_program *p, int i)
{
	if (!p || i < 0 || i >= p->m->nstep)
		return "";
	return p->m->step[i].kind == STEP_MEMSET ? "memset"
	       : p->m->step[i].kind == STEP_ALL_TO_ALL ? "all_to_all" : p->m->step[i].kernel;
}

int
moert_num_outputs(const moert_program *p)
{
	return p ? p->m->nout : 0;
}

int64_t
moert_max_tokens(const moert_program *p)
{
	return p ? p->m->max_tokens : 0;
}

/* How the compiler ran GEMMs with f32 operands: "f32" (exactly), "bf16" or
 * "f16" (tensor cores, rounded operands): outputs are checked to that
 * precision's tolerance (docs/testing.md). */
const char *
moert_precision(const moert_program *p)
{
	return p ? dtype_name(p->m->precision) : "f32";
}

/* No input or output dim is T: the compiler fixed every launch (a model
 * without symbols), so any T in 1..max_tokens runs the same plan. */
int
moert_is_static(const moert_program *p)
{
	if (!p)
		return 0;
	for (int i = 0; i < p->m->nin + p->m->nout; i++) {
		const MTensor *t = i < p->m->nin ? &p->m->in[i] : &p->m->out[i - p->m->nin];
		for (int k = 0; k < t->rank; k++)
			if (t->dim[k].a)
				return 0;
	}
	return 1;
}

static moert_status
info(const moert_program *p, int out, int i, int64_t tokens,
     moert_tensor_info *ti)
{
	int n = out ? p->m->nout : p->m->nin;
	moert_status s;

	if (i < 0 || i >= n)
		return moert_seterr(MOERT_EINVAL, "no %s %d (the bundle has %d)",
				    out ? "output" : "input", i, n);
	if ((s = moert_check_tokens(p->m, tokens)))
		return s;
	return moert_tensor_resolve(out ? &p->m->out[i] : &p->m->in[i], tokens, ti);
}

moert_status
moert_input_info(const moert_program *p, int i, int64_t tokens,
		 moert_tensor_info *ti)
{
	return info(p, 0, i, tokens, ti);
}

moert_status
moert_output_info(const moert_program *p, int i, int64_t tokens,
		  moert_tensor_info *ti)
{
	return info(p, 1, i, tokens, ti);
}

moert_status
moert_check_input(const moert_program *p, int i, const char *dtype, int rank,
		  const int64_t *dim, int64_t *tokens)
{
	if (i < 0 || i >= p->m->nin)
		return moert_seterr(MOERT_EINVAL, "no input %d (the bundle has "
				    "%d)", i, p->m->nin);
	return check_tensor("input", &p->m->in[i], p->m->max_tokens, dtype,
			    rank, dim, tokens);
}

moert_status
moert_check_output(const moert_program *p, int i, const char *dtype, int rank,
		   const int64_t *dim, int64_t *tokens)
{
	if (i < 0 || i >= p->m->nout)
		return moert_seterr(MOERT_EINVAL, "no output %d (the bundle has "
				    "%d)", i, p->m->nout);
	return check_tensor("output", &p->m->out[i], p->m->max_tokens, dtype,
			    rank, dim, tokens);
}

moert_status
moert_cost(const moert_program *p, int64_t tokens, double *flops,
	   double *bytes)
{
	int64_t f, b;
	moert_status s;

	if (!p->m->has_cost)
		return moert_seterr(MOERT_EINVAL, "the bundle has no cost line");
	if ((s = moert_check_tokens(p->m, tokens)))
		return s;
	if (bundle_expr_eval(&p->m->flops, tokens, &f) ||
	    bundle_expr_eval(&p->m->bytes, tokens, &b))
		return moert_seterr(MOERT_EINVAL, "cost overflows at T=%lld",
				    (long long)tokens);
	*flops = (double)f;
	*bytes = (double)b;
	return MOERT_OK;
}

/* --- routing and arena buffers --------------------------------------------- */

int
moert_num_routes(const moert_program *p)
{
	return p ? p->m->nroute : 0;
}

moert_status
moert_route_info_get(const moert_program *p, int i, moert_route_info *info)
{
	const MRoute *r;

	if (!p || !info || i < 0 || i >= p->m->nroute)
		return moert_seterr(MOERT_EINVAL, "no route %d (the bundle has %d)", i,
				    p ? p->m->nroute : 0);
	r = &p->m->route[i];
	*info = (moert_route_info){r->logits, r->ids, dtype_name(r->dt), r->experts, r->k,
				   r->groups, r->topk_group, r->top2,
				   route_select_name(r->select), r->bias};
	return MOERT_OK;
}

/* Buffer `name`'s index and its bytes at T. */
moert_status
moert_find_buffer(const Manifest *m, const char *name, int64_t tokens, int *b, size_t *bytes)
{
	int64_t n;
	moert_status s;

	if ((*b = name ? bundle_find_buffer(m, name) : -1) < 0)
		return moert_seterr(MOERT_EINVAL, "no buffer '%s' in the bundle",
				    name ? name : "(null)");
	if ((s = moert_check_tokens(m, tokens)))
		return s;
	if (bundle_expr_eval(&m->buf[*b].bytes, tokens, &n) || (uint64_t)n > SIZE_MAX)
		return moert_seterr(MOERT_EINVAL, "buffer '%s' overflows at T=%lld", name,
				    (long long)tokens);
	*bytes = (size_t)n;
	return MOERT_OK;
}

/* The last step that runs at T and names buffer b (an arg or a memset's
 * destination); -1 if none.  Buffers the planner laid over b's bytes are
 * used only after it, so b holds what the plan left there up to then. */
int
moert_last_use(const Manifest *m, int b, int64_t tokens)
{
	int last = -1;

	for (int i = 0; i < m->nstep; i++) {
		const MStep *s = &m->step[i];
		if (s->kind == STEP_INIT || !bundle_step_runs(s, tokens))
			continue;
		if ((s->kind == STEP_MEMSET || s->kind == STEP_ALL_TO_ALL) && s->dst.index == b)
			last = i;
		for (int k = 0; s->kind == STEP_LAUNCH && k < s->narg; k++)
			if (s->arg[k].kind == ARG_BUF && s->arg[k].index == b)
				last = i;
	}
	return last;
}

moert_status
moert_buffer_size(const moert_program *p, const char *name, int64_t tokens, size_t *bytes)
{
	int b;

	if (!p || !bytes)
		return moert_seterr(MOERT_EINVAL, "no program");
	return moert_find_buffer(p->m, name, tokens, &b, bytes);
}

/*
 * Launch lines with arch= run only on that code target (per-target launch
 * plans: docs/bundle.md): drop the others, so that everything after load
 * (runs, graphs, profiles, shared memory limits) sees one plan.
 */
void
moert_keep_arch(Manifest *m, const char *target)
{
	int n = 0;

	for (int i = 0; i < m->nstep; i++)
		if (!m->step[i].arch || strcmp(m->step[i].arch, target) == 0)
			m->step[n++] = m->step[i];
	m->nstep = n;
}
