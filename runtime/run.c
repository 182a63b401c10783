/*
 * run.c — replay the launch plan for T tokens: each step's grid and args
 * evaluated at T and marshalled into the param buffer, launched in order on
 * the caller's stream.  With use_graph the plan for T is captured once on
 * our own stream as a CUDA graph, cached by T (and the pointers it was
 * captured with), and replayed on the caller's stream.  Timing with events.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * A launch through cuLaunchKernelEx, with its attributes: a kernel of
 * thread-block clusters (its kernel line's cluster=N) the cluster dimension
 * (N, 1, 1), its grid's x a multiple of N (moec's persistent grids of
 * clusters); a pdl=1 kernel on sm_90 code programmatic stream serialization
 * (it may start while the kernel before it on the stream finishes: it opens
 * with griddepcontrol.wait; docs/runtime.md).  A pdl kernel alone, without
 * the entry point, launches plainly.  *done = 0: no attribute, the caller's
 * plain launch.
 */
static moert_status
launch_ex(moert_program *p, const MStep *s, const unsigned *g, CUstream stream, void **args, int *done)
{
	const MKernel *k = &p->m->k[s->kidx];
	MoertLaunchAttr a[2] = {{0}};
	MoertLaunchConfig c = {{g[0], g[1], g[2]},
			       {(unsigned)s->block[0], (unsigned)s->block[1], (unsigned)s->block[2]},
			       (unsigned)s->smem, stream, a, 0};
	int n = k->cluster;

	if (n > 1)
		a[c.nattrs++] = (MoertLaunchAttr){.id = 4, .val = {(unsigned)n, 1, 1}};
	/* no more clusters than the device holds at once (load.c's cluster_room): moec's kernels of clusters
	 * are persistent and stride their work by the grid (%nctaid.x), so fewer compute the same, where a
	 * cluster past those resident would run its whole share after the others */
	if (n > 1 && p->maxcl && p->maxcl[s->kidx] > 0 && g[0] % (unsigned)n == 0 &&
	    g[0] / (unsigned)n > (unsigned)p->maxcl[s->kidx])
		c.grid[0] = (unsigned)p->maxcl[s->kidx] * (unsigned)n;
	if (k->pdl && p->griddep && moert_cu.cuLaunchKernelEx)
		a[c.nattrs++] = (MoertLaunchAttr){.id = 6, .val = {1}};
	*done = c.nattrs > 0;
	if (!*done)
		return MOERT_OK;
	if (!moert_cu.cuLaunchKernelEx)
		return moert_seterr(MOERT_ELAUNCH, "kernel '%s' (manifest line %d) runs in clusters of %d: "
				    "cuLaunchKernelEx, which this driver lacks (CUDA 12+)", s->kernel, s->line, n);
	if (n > 1 && g[0] % (unsigned)n)
		return moert_seterr(MOERT_ELAUNCH, "kernel '%s' (manifest line %d): grid.x %u is not a multiple "
				    "of its clusters of %d", s->kernel, s->line, g[0], n);
	return CU(MOERT_ELAUNCH, cuLaunchKernelEx, (&c, p->fn[s->kidx], args, NULL));
}

moert_status
moert_launch_step(moert_program *p, const MStep *s, int64_t tokens,
		  CUstream stream)
{
	return moert_launch_with(p, s, tokens, stream, &p->bases, p->pbuf, p->pptr);
}

moert_status
moert_launch_with(moert_program *p, const MStep *s, int64_t tokens,
		  CUstream stream, const MoertBases *b, unsigned char *pbuf,
		  void **pptr)
{
	const size_t *off;
	unsigned g[3];
	uint64_t at, n;
	moert_status st;
	int ex;

	if (s->kind == STEP_ALL_TO_ALL) {	/* sizes from T alone: capturable */
		int64_t chunk;
		if (!p->comm)
			return moert_seterr(MOERT_EINVAL, "all_to_all (manifest line %d): no "
					    "communicator (moert_program_set_comm)", s->line);
		if (bundle_expr_eval(&s->bytes, tokens, &chunk) || chunk < 0)
			return moert_seterr(MOERT_ELAUNCH, "all_to_all (manifest line %d): chunk "
					    "size overflows at T=%lld", s->line, (long long)tokens);
		st = moert_all_to_all(p->comm, b->arena + p->m->buf[s->src.index].offset + s->src.off,
				      b->arena + p->m->buf[s->dst.index].offset + s->dst.off,
				      (size_t)chunk, stream);
		return st ? moert_context(st, "all_to_all (manifest line %d)", s->line) : MOERT_OK;
	}
	if (s->kind == STEP_MEMSET) {
		/* when=shared: the plan leaves these bytes 0, and nothing but this
		 * program writes its own arena (zeroed at load) */
		if (s->shared_only && p->own_arena && b->arena == p->own_arena)
			return MOERT_OK;
		if ((st = moert_eval_memset(p->m, s, tokens, &at, &n)))
			return st;
		if (n && (st = CU(MOERT_ELAUNCH, cuMemsetD8Async,
				  (b->arena + at, 0, n, stream))))
			return moert_context(st, "memset (manifest line %d)",
					     s->line);
		return MOERT_OK;
	}
	off = p->param_off[s->kidx];
	if ((st = moert_eval_grid(s, tokens, g)) ||
	    (st = moert_marshal(p->m, s, tokens, b, off, pbuf)))
		return st;
	for (int i = 0; i < s->narg; i++)
		pptr[i] = pbuf + off[i];
	st = launch_ex(p, s, g, stream, s->narg ? pptr : NULL, &ex);
	if (!st && !ex)
		st = CU(MOERT_ELAUNCH, cuLaunchKernel,
			(p->fn[s->kidx], g[0], g[1], g[2], (unsigned)s->block[0],
			 (unsigned)s->block[1], (unsigned)s->block[2], (unsigned)s->smem,
			 stream, s->narg ? pptr : NULL, NULL));
	if (st)
		return moert_context(st, "kernel '%s' (manifest line %d)",
				     s->kernel, s->line);
	return MOERT_OK;
}

static moert_status
enqueue(moert_program *p, int64_t tokens, CUstream stream)
{
	moert_status s;

	for (int i = 0; i < p->m->nstep; i++)
		if (p->m->step[i].kind != STEP_INIT && bundle_step_runs(&p->m->step[i], tokens) &&
		    (s = moert_launch_step(p, &p->m->step[i], tokens, stream)))
			return s;
	return MOERT_OK;
}

moert_status
moert_check_run(const moert_program *p, int64_t tokens, const uint64_t *in,
	  const uint64_t *out)
{
	const Manifest *m = p->m;
	moert_status s;

	if ((s = moert_check_tokens(m, tokens)))
		return s;
	if (m->ep_ranks && !p->comm)
		return moert_seterr(MOERT_EINVAL, "rank %d of %d (expert parallelism): attach a "
				    "communicator of %d ranks first (moert_program_set_comm)",
				    m->ep_rank, m->ep_ranks, m->ep_ranks);
	for (int i = 0; i < m->nin; i++)
		if (!in || !in[i])
			return moert_seterr(MOERT_EINVAL, "input %d '%s': no "
					    "device pointer", i, m->in[i].name);
	for (int i = 0; i < m->nout; i++)
		if (!out || !out[i])
			return moert_seterr(MOERT_EINVAL, "output %d '%s': no "
					    "device pointer", i, m->out[i].name);
	if (!p->dev)
		return moert_seterr(MOERT_EINVAL, "the program is not loaded "
				    "on a device (moert_load_host only)");
	return MOERT_OK;
}

/* --- reading an arena buffer back (tests) ------------------------------------ */

moert_status
moert_read_buffer(moert_program *p, const char *name, int64_t tokens, const uint64_t *inputs,
		  const uint64_t *outputs, void *host, size_t bytes)
{
	size_t want;
	int b, last;
	moert_status s;

	if (!p || !host)
		return moert_seterr(MOERT_EINVAL, "no program or no host memory");
	if ((s = moert_find_buffer(p->m, name, tokens, &b, &want)))
		return s;
	if (bytes != want)
		return moert_seterr(MOERT_EINVAL, "buffer '%s' holds %zu bytes at T=%lld, not %zu",
				    name, want, (long long)tokens, bytes);
	if ((s = moert_check_run(p, tokens, inputs, outputs)) || (s = moert_bind(p->dev)))
		return s;
	p->bases.in = inputs;
	p->bases.out = outputs;
	last = moert_last_use(p->m, b, tokens);
	for (int i = 0; i <= last; i++)
		if (p->m->step[i].kind != STEP_INIT && bundle_step_runs(&p->m->step[i], tokens) &&
		    (s = moert_launch_step(p, &p->m->step[i], tokens, NULL)))
			return s;
	/* the steps ran on the legacy stream: wait for it alone (a device-wide
	 * sync is refused while another thread captures a graph) */
	if ((s = CU(MOERT_ELAUNCH, cuStreamSynchronize, (NULL))))
		return s;
	if (!bytes)
		return MOERT_OK;
	return CU(MOERT_ELAUNCH, cuMemcpyDtoH_v2,
		  (host, p->bases.arena + p->m->buf[b].offset, bytes));
}

moert_status
moert_read_weight(moert_program *p, const char *name, void *host, size_t bytes)
{
	moert_status s;
	int w;

	if (!p || !host)
		return moert_seterr(MOERT_EINVAL, "no program or no host memory");
	if ((w = name ? bundle_find_weight(p->m, name) : -1) < 0)
		return moert_seterr(MOERT_EINVAL, "no weight '%s' in the bundle", name ? name : "(null)");
	if (bytes != p->m->w[w].bytes)
		return moert_seterr(MOERT_EINVAL, "weight '%s' holds %llu bytes, not %zu", name,
				    (unsigned long long)p->m->w[w].bytes, bytes);
	if (!p->dev || !p->bases.w)
		return moert_seterr(MOERT_EINVAL, "the program is not loaded on a device "
				    "(moert_load_host only)");
	if ((s = moert_bind(p->dev)))
		return s;
	if (!bytes)
		return MOERT_OK;
	return CU(MOERT_ELAUNCH, cuMemcpyDtoH_v2, (host, p->bases.w[w], bytes));
}

/* --- CUDA graphs ----------------------------------------------------------- */

static uint64_t
pointers_key(const moert_program *p, const uint64_t *in, const uint64_t *out)
{
	uint64_t h = hash_bytes(in, sizeof *in * (size_t)p->m->nin, 0);

	return hash_bytes(out, sizeof *out * (size_t)p->m->nout, h);
}

static moert_status
capture(moert_program *p, int64_t tokens, CUgraphExec *exec)
{
	CUgraph g = NULL;
	moert_status s, e;

	if ((s = CU(MOERT_ELAUNCH, cuStreamBeginCapture_v2,
		    (p->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))))
		return s;
	s = enqueue(p, tokens, p->stream);
	/* always end the capture, or the stream stays unusable */
	e = CU(MOERT_ELAUNCH, cuStreamEndCapture, (p->stream, &g));
	if (!s && !e)
		e = CU(MOERT_ELAUNCH, cuGraphInstantiateWithFlags, (exec, g, 0));
	if (g)
		moert_cu.cuGraphDestroy(g);
	if (s || e)
		return moert_context(s ? s : e, "capturing the plan for T=%lld",
				     (long long)tokens);
	return MOERT_OK;
}

static void
evict(moert_program *p, int i)
{
	moert_cu.cuGraphExecDestroy(p->graph[i].exec);
	memmove(&p->graph[i], &p->graph[i + 1],
		sizeof p->graph[0] * (size_t)(p->ngraph - i - 1));
	p->ngraph--;
}

void
moert_drop_graphs(moert_program *p)
{
	while (p->ngraph)
		evict(p, p->ngraph - 1);
}

/* The cached graph for T and these pointers, captured on first use. */
static moert_status
graph_for(moert_program *p, int64_t tokens, uint64_t key, CUgraphExec *exec)
{
	moert_status s;
	int i;

	for (i = 0; i < p->ngraph; i++)
		if (p->graph[i].tokens == tokens)
			break;
	if (i < p->ngraph && p->graph[i].key == key) {
		*exec = p->graph[i].exec;
		return MOERT_OK;
	}
	if (i < p->ngraph)
		evict(p, i);	/* same T, other pointers: capture again */
	if (p->ngraph == MOERT_MAXGRAPHS)
		evict(p, 0);	/* the oldest */
	if ((s = capture(p, tokens, exec)))
		return s;
	p->graph[p->ngraph++] = (GraphEnt){tokens, key, *exec};
	return MOERT_OK;
}

moert_status
moert_run(moert_program *p, int64_t tokens, const uint64_t *inputs,
	  const uint64_t *outputs, void *stream, int use_graph)
{
	CUgraphExec exec;
	moert_status s;

	if (!p)
		return moert_seterr(MOERT_EINVAL, "no program");
	if ((s = moert_check_run(p, tokens, inputs, outputs)) || (s = moert_bind(p->dev)))
		return s;
	p->bases.in = inputs;
	p->bases.out = outputs;
	if (!use_graph)
		return enqueue(p, tokens, (CUstream)stream);
	if ((s = graph_for(p, tokens, pointers_key(p, inputs, outputs), &exec)))
		return s;
	return CU(MOERT_ELAUNCH, cuGraphLaunch, (exec, (CUstream)stream));
}

/* --- timing ------------------------------------------------------------------ */

static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

static moert_status
timed(moert_program *p, int64_t tokens, const uint64_t *in,
      const uint64_t *out, int use_graph, int iters, CUevent *ev, float *ms)
{
	moert_status s;

	for (int i = 0; i < iters; i++)
		if ((s = CU(MOERT_ELAUNCH, cuEventRecord, (ev[2 * i], p->stream))) ||
		    (s = moert_run(p, tokens, in, out, p->stream, use_graph)) ||
		    (s = CU(MOERT_ELAUNCH, cuEventRecord, (ev[2 * i + 1], p->stream))))
			return s;
	if ((s = CU(MOERT_ELAUNCH, cuStreamSynchronize, (p->stream))))
		return s;
	for (int i = 0; i < iters; i++)
		if ((s = CU(MOERT_ELAUNCH, cuEventElapsedTime,
			    (&ms[i], ev[2 * i], ev[2 * i + 1]))))
			return s;
	return MOERT_OK;
}

moert_status
moert_bench(moert_program *p, int64_t tokens, const uint64_t *inputs,
	    const uint64_t *outputs, int use_graph, int warmup, int iters,
	    double *median_us)
{
	CUevent *ev;
	float *ms;
	int n = 0;
	moert_status s = MOERT_OK;

	if (!p || iters < 1 || iters > 100000 || warmup < 0)
		return moert_seterr(MOERT_EINVAL, "bench needs 1..100000 iters "
				    "and warmup >= 0");
	if ((s = moert_check_run(p, tokens, inputs, outputs)) || (s = moert_bind(p->dev)) ||
	    (s = CU(MOERT_ELAUNCH, cuCtxSynchronize, ())))
		return s;	/* the caller's uploads finish before our stream runs */
	ev = calloc(2 * (size_t)iters, sizeof *ev);
	ms = calloc((size_t)iters, sizeof *ms);
	if (!ev || !ms)
		s = moert_seterr(MOERT_ENOMEM, "out of host memory");
	for (; !s && n < 2 * iters; n++)
		s = CU(MOERT_ELAUNCH, cuEventCreate, (&ev[n], CU_EVENT_DEFAULT));
	for (int i = 0; !s && i < warmup; i++)
		s = moert_run(p, tokens, inputs, outputs, p->stream, use_graph);
	if (!s)
		s = timed(p, tokens, inputs, outputs, use_graph, iters, ev, ms);
	if (!s) {
		qsort(ms, (size_t)iters, sizeof *ms, cmp_float);
		*median_us = 1e3 * (iters % 2 ? ms[iters / 2]
				    : 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]));
	}
	for (int i = 0; i < n; i++)
		if (ev[i])
			moert_cu.cuEventDestroy_v2(ev[i]);
	free(ev);
	free(ms);
	return s;
}

/*
 * Where the time goes: each launch step timed alone with events around it,
 * medians over iters runs.  us[i] is for step i of the manifest (init steps
 * and memsets get 0).  Steps run back to back as in moert_run, so each one
 * sees the caches its predecessors left.
 */
moert_status
moert_profile(moert_program *p, int64_t tokens, const uint64_t *inputs,
	      const uint64_t *outputs, int iters, double *us)
{
	int ns, nev = 0;
	CUevent *ev;
	float *ms;
	moert_status s;

	if (!p || iters < 1 || iters > 10000)
		return moert_seterr(MOERT_EINVAL, "profile needs a program and 1..10000 iters");
	if ((s = moert_check_run(p, tokens, inputs, outputs)) || (s = moert_bind(p->dev)) ||
	    (s = CU(MOERT_ELAUNCH, cuCtxSynchronize, ())))
		return s;
	p->bases.in = inputs;
	p->bases.out = outputs;
	ns = p->m->nstep;
	ev = calloc(2 * (size_t)ns + 2, sizeof *ev);
	ms = calloc((size_t)ns * (size_t)iters + 1, sizeof *ms);
	if (!ev || !ms)
		s = moert_seterr(MOERT_ENOMEM, "out of host memory");
	for (; !s && nev < 2 * ns; nev++)
		s = CU(MOERT_ELAUNCH, cuEventCreate, (&ev[nev], CU_EVENT_DEFAULT));
	for (int it = 0; !s && it < iters; it++) {
		for (int i = 0; !s && i < ns; i++) {
			const MStep *st = &p->m->step[i];
			if (st->kind == STEP_INIT || !bundle_step_runs(st, tokens))
				continue;
			if (!(s = CU(MOERT_ELAUNCH, cuEventRecord, (ev[2 * i], p->stream))) &&
			    !(s = moert_launch_step(p, st, tokens, p->stream)))
				s = CU(MOERT_ELAUNCH, cuEventRecord, (ev[2 * i + 1], p->stream));
		}
		if (!s)
			s = CU(MOERT_ELAUNCH, cuStreamSynchronize, (p->stream));
		for (int i = 0; !s && i < ns; i++)
			if (p->m->step[i].kind != STEP_INIT && bundle_step_runs(&p->m->step[i], tokens))
				s = CU(MOERT_ELAUNCH, cuEventElapsedTime,
				       (&ms[(size_t)i * iters + it], ev[2 * i], ev[2 * i + 1]));
	}
	for (int i = 0; !s && i < ns; i++) {
		float *row = &ms[(size_t)i * iters];
		qsort(row, (size_t)iters, sizeof *row, cmp_float);
		us[i] = p->m->step[i].kind == STEP_INIT || !bundle_step_runs(&p->m->step[i], tokens)
			? 0 : 1e3 * row[iters / 2];
	}
	for (int i = 0; i < nev; i++)
		moert_cu.cuEventDestroy_v2(ev[i]);
	free(ev);
	free(ms);
	return s;
}
