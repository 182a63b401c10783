/*
 * tune.c — time a GEMM's candidate kernels (moert tune, docs/runtime.md §7):
 * a bundle compiled with `moec compile --tune-candidates` carries, for each
 * tensor-core GEMM, "candidate" lines: other tilings of the GEMM of one
 * launch step of the plan (bundle.md §2).  For one candidate at T tokens:
 *
 *	run the plan's steps before that launch (routing, permute, ...)
 *	poison the GEMM's output, run the plan's launch: the reference
 *	poison it again, run the candidate: compare (relative L2, NaN pattern)
 *	time the candidate alone: warm-up, then each launch between events,
 *	after an L2 flush and the split-K workspace reset; the median
 *
 * The plan itself is never changed; choosing the variant and writing the
 * tuning table is the tool's (tools/moert.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int
moert_num_candidates(const moert_program *p)
{
	return p ? p->m->ncand : 0;
}

moert_status
moert_candidate_info_get(const moert_program *p, int i, moert_candidate_info *info)
{
	const MCand *c;

	if (!p || !info || i < 0 || i >= p->m->ncand)
		return moert_seterr(MOERT_EINVAL, "no candidate %d (the bundle has %d)", i,
				    p ? p->m->ncand : 0);
	c = &p->m->cand[i];
	*info = (moert_candidate_info){c->s.kernel, c->key, c->variant, c->s.tlo, c->s.thi,
				       p->m->step[c->of].kernel, dtype_name(c->dt)};
	return MOERT_OK;
}

/* The device pointer and size at T of the GEMM's output (argument c->out). */
static moert_status
output_region(const moert_program *p, const MCand *c, int64_t tokens, const uint64_t *out,
	      uint64_t *ptr, size_t *bytes)
{
	const MArg *a = &c->s.arg[c->out];
	int64_t n;

	if (a->kind == ARG_OUT) {
		moert_tensor_info ti;
		moert_status s = moert_tensor_resolve(&p->m->out[a->index], tokens, &ti);
		*ptr = out[a->index];
		*bytes = ti.bytes;
		return s;
	}
	if (bundle_expr_eval(&p->m->buf[a->index].bytes, tokens, &n) || (uint64_t)n < a->off)
		return moert_seterr(MOERT_EINVAL, "candidate %s: its output buf:%s+%llu lies past "
				    "the buffer at T=%lld", c->s.kernel, a->name,
				    (unsigned long long)a->off, (long long)tokens);
	*ptr = p->bases.arena + p->m->buf[a->index].offset + a->off;
	*bytes = (size_t)((uint64_t)n - a->off);
	return MOERT_OK;
}

/* Does another pointer argument of the candidate use the output's tensor?
 * Then poisoning it would clobber an operand: compare without the poison. */
static int
output_shared(const MCand *c)
{
	const MArg *o = &c->s.arg[c->out];

	for (int i = 0; i < c->s.narg; i++)
		if (i != c->out && c->s.arg[i].kind == o->kind && c->s.arg[i].index == o->index &&
		    (o->kind == ARG_BUF || o->kind == ARG_OUT))
			return 1;
	return 0;
}

/* Zero split-K's workspace (its flags must start at 0 for every launch). */
static moert_status
reset_workspace(moert_program *p, int64_t tokens)
{
	int b = bundle_find_buffer(p->m, "splitk$ws");
	int64_t n;

	if (b < 0 || bundle_expr_eval(&p->m->buf[b].bytes, tokens, &n) || n <= 0)
		return MOERT_OK;
	return CU(MOERT_ELAUNCH, cuMemsetD8Async,
		  (p->bases.arena + p->m->buf[b].offset, 0, (size_t)n, p->stream));
}

static double
element(DType dt, const unsigned char *b, size_t i)
{
	uint16_t h;
	float f;

	switch (dt) {
	case DT_BF16:
		memcpy(&h, b + 2 * i, 2);
		return bf16_to_f32(h);
	case DT_F16:
		memcpy(&h, b + 2 * i, 2);
		return f16_to_f32(h);
	case DT_F32:
		memcpy(&f, b + 4 * i, 4);
		return f;
	default:
		return b[i];	/* other types: bytes, compared exactly in effect */
	}
}

/* Relative L2 of got against want; INFINITY where one is NaN and the other
 * not (an element one kernel wrote and the other did not). */
static double
rel_l2(DType dt, const unsigned char *want, const unsigned char *got, size_t bytes)
{
	size_t es = dt == DT_BF16 || dt == DT_F16 ? 2 : dt == DT_F32 ? 4 : 1, n = bytes / es;
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double w = element(dt, want, i), g = element(dt, got, i);
		if (isnan(w) || isnan(g)) {
			if (isnan(w) != isnan(g))
				return INFINITY;
			continue;
		}
		num += (g - w) * (g - w);
		den += w * w;
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The plan's steps before step `of` that run at T, on our stream. */
static moert_status
prefix(moert_program *p, int of, int64_t tokens)
{
	moert_status s;

	for (int i = 0; i < of; i++)
		if (p->m->step[i].kind != STEP_INIT && bundle_step_runs(&p->m->step[i], tokens) &&
		    (s = moert_launch_step(p, &p->m->step[i], tokens, p->stream)))
			return s;
	return MOERT_OK;
}

/* Poison (unless shared), reset the workspace, launch step st, read the output back. */
static moert_status
one_output(moert_program *p, const MStep *st, int64_t tokens, int poison, uint64_t ptr,
	   size_t bytes, void *host)
{
	moert_status s;

	if ((poison && (s = CU(MOERT_ELAUNCH, cuMemsetD8Async, (ptr, 0xff, bytes, p->stream)))) ||
	    (s = reset_workspace(p, tokens)) || (s = moert_launch_step(p, st, tokens, p->stream)) ||
	    (s = CU(MOERT_ELAUNCH, cuStreamSynchronize, (p->stream))))
		return s;
	return CU(MOERT_ELAUNCH, cuMemcpyDtoH_v2, (host, ptr, bytes));
}

static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* warmup + iters launches of st, each after the flush and the workspace
 * reset; the median of the timed ones. */
static moert_status
time_launches(moert_program *p, const MStep *st, int64_t tokens, int warmup, int iters,
	      uint64_t flush, size_t flush_bytes, double *us)
{
	CUevent *ev = calloc(2 * (size_t)iters, sizeof *ev);
	float *ms = calloc((size_t)iters, sizeof *ms);
	moert_status s = ev && ms ? MOERT_OK : moert_seterr(MOERT_ENOMEM, "out of host memory");
	int nev = 0;

	for (; !s && nev < 2 * iters; nev++)
		s = CU(MOERT_ELAUNCH, cuEventCreate, (&ev[nev], CU_EVENT_DEFAULT));
	for (int i = 0; !s && i < warmup + iters; i++) {
		int t = i - warmup;
		if (flush_bytes)
			s = CU(MOERT_ELAUNCH, cuMemsetD8Async, (flush, (unsigned char)i, flush_bytes,
								p->stream));
		if (!s)
			s = reset_workspace(p, tokens);
		if (!s && t >= 0)
			s = CU(MOERT_ELAUNCH, cuEventRecord, (ev[2 * t], p->stream));
		if (!s)
			s = moert_launch_step(p, st, tokens, p->stream);
		if (!s && t >= 0)
			s = CU(MOERT_ELAUNCH, cuEventRecord, (ev[2 * t + 1], p->stream));
	}
	if (!s)
		s = CU(MOERT_ELAUNCH, cuStreamSynchronize, (p->stream));
	for (int i = 0; !s && i < iters; i++)
		s = CU(MOERT_ELAUNCH, cuEventElapsedTime, (&ms[i], ev[2 * i], ev[2 * i + 1]));
	if (!s) {
		qsort(ms, (size_t)iters, sizeof *ms, cmp_float);
		*us = 1e3 * (iters % 2 ? ms[iters / 2] : 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]));
	}
	for (int i = 0; i < nev; i++)
		moert_cu.cuEventDestroy_v2(ev[i]);
	free(ev);
	free(ms);
	return s;
}

moert_status
moert_tune_candidate(moert_program *p, int i, int64_t tokens, const uint64_t *inputs,
		     const uint64_t *outputs, const moert_tune_opts *o, moert_tune_result *r)
{
	const MCand *c;
	unsigned char *want = NULL, *got = NULL;
	uint64_t ptr = 0;
	size_t bytes = 0;
	int poison;
	moert_status s;

	if (!p || !o || !r || i < 0 || i >= p->m->ncand || o->iters < 1 || o->iters > 10000 ||
	    o->warmup < 0 || o->warmup > 10000)
		return moert_seterr(MOERT_EINVAL, "tune needs a program, a candidate of it, "
				    "1..10000 iters and 0..10000 warm-up runs");
	c = &p->m->cand[i];
	memset(r, 0, sizeof *r);
	r->us = r->plan_us = -1;
	if (tokens < c->s.tlo || tokens > c->s.thi)
		return moert_seterr(MOERT_ETOKENS, "candidate %s is for T=%lld..%lld, not %lld",
				    c->s.kernel, (long long)c->s.tlo, (long long)c->s.thi,
				    (long long)tokens);
	if ((s = moert_check_run(p, tokens, inputs, outputs)) || (s = moert_bind(p->dev)) ||
	    (s = CU(MOERT_ELAUNCH, cuCtxSynchronize, ())))
		return s;
	p->bases.in = inputs;
	p->bases.out = outputs;
	if ((s = output_region(p, c, tokens, outputs, &ptr, &bytes)))
		return s;
	poison = !output_shared(c);
	want = malloc(bytes ? bytes : 1);
	got = malloc(bytes ? bytes : 1);
	if (!want || !got)
		s = moert_seterr(MOERT_ENOMEM, "out of host memory for %zu output bytes", bytes);
	if (!s && !(s = prefix(p, c->of, tokens)))
		s = one_output(p, &p->m->step[c->of], tokens, poison, ptr, bytes, want);
	if (!s && (s = one_output(p, &c->s, tokens, poison, ptr, bytes, got)))
		s = moert_context(s, "candidate %s (%s)", c->s.kernel, c->variant);
	if (!s) {
		r->rel_err = rel_l2(c->dt, want, got, bytes);
		r->poisoned = poison;
		s = time_launches(p, &c->s, tokens, o->warmup, o->iters, o->flush, o->flush_bytes,
				  &r->us);
	}
	if (!s && o->time_plan)
		s = time_launches(p, &p->m->step[c->of], tokens, o->warmup, o->iters, o->flush,
				  o->flush_bytes, &r->plan_us);
	free(want);
	free(got);
	return s;
}
