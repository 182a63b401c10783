/*
 * load.c — bring a bundle onto a device: verify it and parse the manifest
 * (no driver needed), choose code, load the module (the JIT log goes into
 * the error), allocate one block for weights and arena, upload the real
 * weights once, then run the init steps, which generate synthetic weights
 * with kernels the compiler put in the PTX.  A failure at any point leaves
 * nothing allocated on the device.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define JITLOG 8192

/* Run bundle_read, collecting the first diagnostic (and a count). */
static moert_status
read_bundle(const char *file, Arena *a, const void *buf, size_t len,
	    Bundle *b)
{
	char *text = NULL, *nl;
	size_t n = 0;
	Diag d;
	int rc;

	diag_init(&d, open_memstream(&text, &n));
	rc = bundle_read(a, file, buf, len, b, &d);
	if (d.out)
		fclose(d.out);
	if (rc && text) {
		if ((nl = strchr(text, '\n')))
			*nl = 0;
		moert_seterr(MOERT_EFORMAT, "%s%s", text,
			     d.nerror > 1 ? " (and more errors)" : "");
	} else if (rc) {
		moert_seterr(MOERT_EFORMAT, "%s", d.last);
	}
	free(text);
	if (rc == BUNDLE_EVERSION)
		return MOERT_EVERSION;
	return rc ? MOERT_EFORMAT : MOERT_OK;
}

moert_status
moert_verify(const void *bundle, size_t len)
{
	Arena *a = arena_new(0);
	Bundle b;
	moert_status s = read_bundle(NULL, a, bundle, len, &b);

	arena_free(a);
	return s;
}

/*
 * Every program of the bundle, each a moert_program that sees the bundle as
 * a format-1 bundle of its own (bundle_program_view): its manifest, its
 * weights, the shared code.  The first is the handle returned; it owns the
 * others, whose tables live in its arena.
 */
static moert_status
programs(moert_program *p, const void *bundle)
{
	Bundle whole = p->b;

	p->nprog = whole.nprog;
	p->prog = arena_array(p->arena, moert_program *, p->nprog);
	for (int i = 0; i < p->nprog; i++) {
		moert_program *q = i ? calloc(1, sizeof *q) : p;
		if (!q)
			return moert_seterr(MOERT_ENOMEM, "out of host memory");
		p->prog[i] = q;
		if (i) {
			q->arena = arena_new(0);
			q->owner = p;
		}
		bundle_program_view(&whole, i, &q->b);
		q->m = q->b.manifest;
		q->name = whole.prog[i].name;
		q->bytes = bundle;
	}
	return MOERT_OK;
}

static moert_status
load_host(const char *file, const void *bundle, size_t len,
	  moert_program **out)
{
	moert_program *p;
	moert_status s;

	*out = NULL;
	if (!bundle)
		return moert_seterr(MOERT_EINVAL, "no bundle bytes");
	if (!(p = calloc(1, sizeof *p)))
		return moert_seterr(MOERT_ENOMEM, "out of host memory");
	p->arena = arena_new(0);
	if ((s = read_bundle(file, p->arena, bundle, len, &p->b))) {
		arena_free(p->arena);
		free(p);
		return s;
	}
	if ((s = programs(p, bundle))) {
		moert_unload(p);
		return s;
	}
	*out = p;
	return MOERT_OK;
}

int
moert_num_programs(const moert_program *p)
{
	return !p ? 0 : p->owner ? p->owner->nprog : p->nprog;
}

moert_program *
moert_program_at(moert_program *p, int i)
{
	if (p && p->owner)
		p = p->owner;
	if (!p || i < 0 || i >= p->nprog) {
		moert_seterr(MOERT_EINVAL, "program %d: the bundle holds %d", i,
			     moert_num_programs(p));
		return NULL;
	}
	return p->prog[i];
}

moert_program *
moert_find_program(moert_program *p, const char *name)
{
	if (p && p->owner)
		p = p->owner;
	for (int i = 0; p && name && i < p->nprog; i++)
		if (!strcmp(p->prog[i]->name, name))
			return p->prog[i];
	moert_seterr(MOERT_EINVAL, "no program '%s' in the bundle (it holds %d: %s%s)",
		     name ? name : "(null)", moert_num_programs(p),
		     p && p->nprog ? p->prog[0]->name : "", p && p->nprog > 1 ? ", ..." : "");
	return NULL;
}

const char *
moert_program_name(const moert_program *p)
{
	return p ? p->name : "";
}

moert_status
moert_load_host(const void *bundle, size_t len, moert_program **out)
{
	return load_host(NULL, bundle, len, out);
}

const char *
moert_code_section(const moert_program *p)
{
	return p ? p->code : "";
}

/* --- code ----------------------------------------------------------------- */

/* Kernel k is in the chosen code (kernels of one target only, e.g. sm_90a's
 * warp-specialised GEMMs, are not in the other targets' modules). */
static int
has_code(const moert_program *p, int k)
{
	const MKernel *mk = &p->m->k[k];
	const char *target = strchr(p->code, ':') + 1;

	for (int t = 0; t < mk->ntarget; t++)
		if (!strcmp(mk->target[t], target))
			return 1;
	return 0;
}

/* Some step (after moert_keep_arch) launches kernel k. */
static int
used(const Manifest *m, int k)
{
	for (int i = 0; i < m->nstep; i++)
		if (m->step[i].kind != STEP_MEMSET && m->step[i].kidx == k)
			return 1;
	return 0;
}

static moert_status
choose(moert_program *p)
{
	const char *names[BUNDLE_MAXSEC];
	const char *target;
	int pick;
	moert_status s;

	for (int i = 0; i < p->b.nsec; i++)
		names[i] = p->b.sec[i].name;
	if ((s = moert_pick_code(names, p->b.nsec, p->dev->major,
				 p->dev->minor, &pick)))
		return s;
	strcpy(p->code, names[pick]);
	target = strchr(p->code, ':') + 1;
	p->griddep = atoi(target + 3) >= 90;	/* "sm_90a": moec's pdl=1 code for it waits */
	moert_keep_arch(p->m, target);
	for (int i = 0; i < p->m->nk; i++) {
		const MKernel *k = &p->m->k[i];
		if (!has_code(p, i) && used(p->m, i))
			return moert_seterr(MOERT_EARCH, "kernel '%s' has no "
					    "code in %s, chosen for sm_%d%d",
					    k->name, p->code, p->dev->major,
					    p->dev->minor);
	}
	return MOERT_OK;
}

static moert_status
module(moert_program *p)
{
	const BundleSection *sec = bundle_find(&p->b, p->code);
	const moert_program *o = p->owner;
	char *log = calloc(1, JITLOG), *img = malloc(sec->size + 1);
	int opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *val[2] = {log, (void *)(uintptr_t)JITLOG};
	moert_status s;

	if (o && o->mod && o->dev == p->dev && !strcmp(o->code, p->code)) {
		free(log), free(img);	/* the code is shared: one module for all */
		p->mod = o->mod;
		p->mod_borrowed = 1;
		return MOERT_OK;
	}
	if (!log || !img) {
		free(log), free(img);
		return moert_seterr(MOERT_ENOMEM, "out of host memory");
	}
	memcpy(img, sec->data, sec->size);
	img[sec->size] = 0;	/* PTX is text: the driver wants it terminated */
	s = CU(MOERT_ELOAD, cuModuleLoadDataEx, (&p->mod, img, 2, opt, val));
	if (s) {
		log[JITLOG - 1] = 0;
		moert_context(s, "loading %s", p->code);
		if (log[0])
			moert_seterr(s, "%s; JIT log: %s", moert_last_error(), log);
		p->mod = NULL;
	}
	free(log);
	free(img);
	return s;
}

/* Largest dynamic shared memory any step (or tuning candidate) asks of kernel k. */
static int
max_smem(const Manifest *m, int k)
{
	int n = 0;

	for (int i = 0; i < m->nstep; i++)
		if (m->step[i].kind != STEP_MEMSET && m->step[i].kidx == k)
			n = MAX(n, m->step[i].smem);
	for (int i = 0; i < m->ncand; i++)
		if (m->cand[i].s.kidx == k)
			n = MAX(n, m->cand[i].s.smem);
	return n;
}

/*
 * Each kernel of clusters (cluster=N): how many of its clusters the device
 * holds at once, at its first launch's block and shared memory
 * (cuOccupancyMaxActiveClusters; 0 where the driver lacks it or says
 * nothing).  A cluster runs inside one GPC, so a 132-SM H100/H200 holds at
 * most 32 clusters of 4 (its GPCs have at most 18 SMs), and a persistent
 * grid of 33 would run the last cluster's whole share after the others
 * (run.c's launch_ex asks for no more than fit).
 */
static void
cluster_room(moert_program *p)
{
	const Manifest *m = p->m;

	p->maxcl = arena_array(p->arena, int, m->nk + 1);
	for (int i = 0; i < m->nk && moert_cu.cuOccupancyMaxActiveClusters; i++) {
		MoertLaunchAttr a = {.id = 4, .val = {(unsigned)m->k[i].cluster, 1, 1}};
		const MStep *s = NULL;
		int n = 0;

		for (int j = 0; j < m->nstep && !s; j++)
			if (m->step[j].kind == STEP_LAUNCH && m->step[j].kidx == i)
				s = &m->step[j];
		if (m->k[i].cluster < 2 || !s || !p->fn[i])
			continue;
		MoertLaunchConfig c = {{(unsigned)m->k[i].cluster, 1, 1},
				       {(unsigned)s->block[0], (unsigned)s->block[1], (unsigned)s->block[2]},
				       (unsigned)s->smem, NULL, &a, 1};
		if (moert_cu.cuOccupancyMaxActiveClusters(&n, p->fn[i], &c) == CUDA_SUCCESS && n > 0)
			p->maxcl[i] = n;
	}
}

static moert_status
functions(moert_program *p)
{
	const Manifest *m = p->m;
	moert_status s;
	size_t size;

	p->fn = arena_array(p->arena, CUfunction, m->nk + 1);
	p->param_off = arena_array(p->arena, size_t *, m->nk + 1);
	for (int i = 0; i < m->nk; i++) {
		int smem = max_smem(m, i);
		p->param_off[i] = arena_array(p->arena, size_t, m->k[i].nparam + 1);
		if ((s = moert_param_layout(&m->k[i], p->param_off[i], &size)))
			return s;
		if (!has_code(p, i))	/* another target's: never launched here */
			continue;
		if ((s = CU(MOERT_ELOAD, cuModuleGetFunction,
			    (&p->fn[i], p->mod, m->k[i].name))))
			return moert_context(s, "kernel '%s' in %s", m->k[i].name,
					     p->code);
		if (smem <= 48 << 10)
			continue;
		if (smem > p->dev->smem_optin)
			return moert_seterr(MOERT_ELOAD, "kernel '%s' asks for "
					    "%d bytes of shared memory, the "
					    "device allows %d", m->k[i].name,
					    smem, p->dev->smem_optin);
		if ((s = CU(MOERT_ELOAD, cuFuncSetAttribute,
			    (p->fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			     smem))))
			return moert_context(s, "kernel '%s'", m->k[i].name);
	}
	p->pbuf = arena_alloc(p->arena, MOERT_MAXPARAM);
	p->pptr = arena_array(p->arena, void *, BUNDLE_MAXARGS);
	cluster_room(p);
	return MOERT_OK;
}

/* --- memory and weights -------------------------------------------------- */

static moert_status
memory(moert_program *p)
{
	const BundleSection *ws = bundle_find(&p->b, "weights");
	uint64_t *woff = arena_array(p->arena, uint64_t, p->m->nw + 1);
	uint64_t wsize, total, wbytes = ws ? ws->size : 0, upload;
	moert_status s;

	if ((s = moert_mem_plan(p->m, wbytes, woff, &wsize, &total)))
		return s;
	moert_trim_plan(p, wbytes, woff, &wsize, &total, &upload);
	if ((uint64_t)(size_t)total != total)
		return moert_seterr(MOERT_ENOMEM, "memory plan of %llu bytes",
				    (unsigned long long)total);
	p->memsize = (size_t)total;
	/* nothing of our own when the caller gave weights and a workspace */
	if ((p->memsize || (!p->ws && !p->bound)) &&
	    (s = CU(MOERT_ENOMEM, cuMemAlloc_v2, (&p->mem, p->memsize ? p->memsize : 256))))
		return moert_context(s, "allocating %zu bytes for weights and "
				     "arena", p->memsize);
	p->wptr = arena_array(p->arena, uint64_t, p->m->nw + 1);
	for (int i = 0; i < p->m->nw; i++)
		p->wptr[i] = p->bound && p->bound[i] ? p->bound[i] : p->mem + woff[i];
	p->bases.w = p->wptr;
	p->own_arena = p->ws ? 0 : p->mem + wsize;
	p->bases.arena = p->ws ? p->ws : p->own_arena;
	/* real weights in one copy; synthetic ones and the arena start zeroed */
	if (upload && (s = CU(MOERT_ELOAD, cuMemcpyHtoD_v2, (p->mem, ws->data, upload))))
		return moert_context(s, "uploading %llu bytes of weights",
				     (unsigned long long)upload);
	if (total > upload &&
	    (s = CU(MOERT_ELOAD, cuMemsetD8_v2, (p->mem + upload, 0, total - upload))))
		return s;
	/* a pageable upload may still be in flight on the legacy stream, and
	 * init runs on our own non-blocking stream: wait for the legacy stream
	 * (not the device: that is refused while another thread captures) */
	return CU(MOERT_ELOAD, cuStreamSynchronize, (NULL));
}

static moert_status
init(moert_program *p)
{
	moert_status s;

	for (int i = 0; i < p->m->nstep; i++) {
		const MStep *st = &p->m->step[i];
		if (st->kind != STEP_INIT || moert_init_skipped(p, st))
			continue;
		if ((s = moert_launch_step(p, st, 1, p->stream)))
			return moert_context(s, "init step %d (kernel '%s', "
					     "manifest line %d)", i, st->kernel,
					     st->line);
	}
	/* the bytes of when=shared memsets start at 0 on our own arena, whatever
	 * the init steps did with it (a later run skips those memsets) */
	for (int i = 0; p->own_arena && i < p->m->nstep; i++) {
		const MStep *st = &p->m->step[i];
		uint64_t at, n;
		if (st->kind != STEP_MEMSET || !st->shared_only)
			continue;
		if ((s = moert_eval_memset(p->m, st, p->m->max_tokens, &at, &n)) ||
		    (n && (s = CU(MOERT_ELOAD, cuMemsetD8Async, (p->own_arena + at, 0, n, p->stream)))))
			return moert_context(s, "memset (manifest line %d)", st->line);
	}
	if ((s = CU(MOERT_ELAUNCH, cuStreamSynchronize, (p->stream))))
		return moert_context(s, "running the init steps");
	return MOERT_OK;
}

void
moert_release_device(moert_program *p)
{
	if (!p->dev)
		return;
	if (moert_bind(p->dev)) {
		p->dev = NULL;	/* the context is gone, and all it held */
		return;
	}
	for (int i = 0; i < p->ngraph; i++)
		moert_cu.cuGraphExecDestroy(p->graph[i].exec);
	p->ngraph = 0;
	if (p->stream)
		moert_cu.cuStreamDestroy_v2(p->stream);
	if (p->mod && !p->mod_borrowed)
		moert_cu.cuModuleUnload(p->mod);
	p->mod_borrowed = 0;
	if (p->mem)
		moert_cu.cuMemFree_v2(p->mem);
	p->stream = NULL, p->mod = NULL, p->mem = 0, p->own_arena = 0;
	p->dev = NULL;
}

moert_status
moert_load_device(moert_device *dev, moert_program *p)
{
	moert_status s;

	if (!dev || !p)
		return moert_seterr(MOERT_EINVAL, "no device or no program");
	if (p->dev || !p->bytes)
		return moert_seterr(MOERT_EINVAL, "program already loaded on "
				    "a device");
	p->dev = dev;
	if ((s = moert_bind(dev)) || (s = choose(p)) || (s = module(p)) ||
	    (s = functions(p)) || (s = memory(p)) ||
	    (s = CU(MOERT_ELOAD, cuStreamCreate, (&p->stream, CU_STREAM_NON_BLOCKING))) ||
	    (s = init(p))) {
		moert_release_device(p);
		return s;
	}
	p->bytes = NULL;	/* sections are no longer read */
	memset(&p->b.sec, 0, sizeof p->b.sec[0] * (size_t)p->b.nsec);
	return MOERT_OK;
}

/* Every program of the bundle onto the device, the owner first (its
 * module is then shared); programs already loaded are left as they are. */
static moert_status
load_all(moert_device *dev, moert_program *p)
{
	moert_status s;

	for (int i = 0; i < p->nprog; i++) {
		if (p->prog[i]->dev)
			continue;
		if ((s = moert_load_device(dev, p->prog[i])))
			return p->nprog > 1 ? moert_context(s, "program '%s'", p->prog[i]->name) : s;
	}
	return MOERT_OK;
}

moert_status
moert_load(moert_device *dev, const void *bundle, size_t len,
	   moert_program **out)
{
	moert_status s;

	if ((s = moert_load_host(bundle, len, out)))
		return s;
	if ((s = load_all(dev, *out))) {
		moert_unload(*out);
		*out = NULL;
	}
	return s;
}

moert_status
moert_load_file(moert_device *dev, const char *path, moert_program **out)
{
	unsigned char *buf;
	size_t len;
	int rc;
	Diag d;
	moert_status s;

	*out = NULL;
	diag_init(&d, NULL);
	if (!(buf = bundle_read_file(path, &len, &rc, &d)))
		return moert_seterr(rc == 1 ? MOERT_EIO : rc == BUNDLE_EVERSION
					? MOERT_EVERSION : MOERT_EFORMAT,
				    "%s", d.last);
	if ((s = load_host(path, buf, len, out))) {
		free(buf);
		return s;
	}
	(*out)->owned = buf;
	if ((s = load_all(dev, *out))) {
		moert_unload(*out);
		*out = NULL;
		return s;
	}
	free(buf);
	(*out)->owned = NULL;
	return MOERT_OK;
}

void
moert_unload(moert_program *p)
{
	if (!p || p->owner)	/* a program of a bundle goes with its owner */
		return;
	for (int i = p->nprog - 1; i > 0; i--) {	/* before the module they borrow */
		if (!p->prog[i])
			continue;
		moert_release_device(p->prog[i]);
		arena_free(p->prog[i]->arena);
		free(p->prog[i]);
	}
	moert_release_device(p);
	arena_free(p->arena);
	free(p->owned);
	free(p);
}
