/*
 * ptxas.c — assemble PTX with NVIDIA's ptxas and read its resource report.
 *
 *	ptxas -arch=sm_90a -v -o OUT.cubin IN.ptx
 *	ptxas info    : Compiling entry function 'k' for 'sm_90a'
 *	ptxas info    : Function properties for k
 *	    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *	ptxas info    : Used 168 registers, used 1 barriers, 98304 bytes smem, 400 bytes cmem[0]
 *
 * ptxas runs through posix_spawn (no shell) on temporary files.  Several
 * PTX texts (one per target) are assembled at once, one ptxas per core;
 * results and diagnostics come in the order the jobs were given.
 */
#define CG_INTERNAL
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen.h"

extern char **environ;

static int
executable(const char *p)
{
	struct stat st;

	return p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

const char *
cg_ptxas_path(void)
{
	static char found[4096];
	const char *env = getenv("PTXAS"), *path = getenv("PATH");

	if (env && env[0])
		return executable(env) ? env : NULL;
	if (executable("/usr/local/cuda/bin/ptxas"))
		return "/usr/local/cuda/bin/ptxas";
	while (path && *path) {
		const char *e = strchr(path, ':');
		size_t n = e ? (size_t)(e - path) : strlen(path);
		if (n > 0 && n + 7 < sizeof found) {
			memcpy(found, path, n);
			strcpy(found + n, "/ptxas");
			if (executable(found))
				return found;
		}
		path = e ? e + 1 : NULL;
	}
	return NULL;
}

void
cg_ptxas_free(CgPtxasResult *r)
{
	free(r->k);
	free(r->cubin);
	free(r->log);
	memset(r, 0, sizeof *r);
}

static CgPtxasInfo *
entry(CgPtxasResult *r, const char *name, size_t n)
{
	for (int i = 0; i < r->n; i++)
		if (strlen(r->k[i].name) == n && strncmp(r->k[i].name, name, n) == 0)
			return &r->k[i];
	r->k = xrealloc(r->k, (size_t)(r->n + 1) * sizeof *r->k);
	memset(&r->k[r->n], 0, sizeof r->k[r->n]);
	if (n >= sizeof r->k[r->n].name)
		n = sizeof r->k[r->n].name - 1;
	memcpy(r->k[r->n].name, name, n);
	return &r->k[r->n++];
}

static int
num_before(const char *line, const char *what)
{
	const char *p = strstr(line, what);

	if (!p)
		return 0;
	while (p > line && (p[-1] == ' '))
		p--;
	while (p > line && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return atoi(p);
}

static void
parse(CgPtxasResult *r)
{
	CgPtxasInfo *cur = NULL;

	for (const char *l = r->log; l && *l;) {
		const char *e = strchr(l, '\n'), *q;
		size_t n = e ? (size_t)(e - l) : strlen(l);
		char line[1024];

		if (n >= sizeof line)
			n = sizeof line - 1;
		memcpy(line, l, n);
		line[n] = 0;
		if ((q = strstr(line, "Compiling entry function '")) != NULL) {
			const char *s = q + 26, *t = strchr(s, '\'');
			if (t)
				cur = entry(r, s, (size_t)(t - s));
		} else if ((q = strstr(line, "Function properties for ")) != NULL) {
			const char *s = q + 24;
			cur = entry(r, s, strcspn(s, " \r\n"));
		} else if (cur && strstr(line, "bytes stack frame")) {
			cur->stack = num_before(line, "bytes stack frame");
			cur->spill_stores = num_before(line, "bytes spill stores");
			cur->spill_loads = num_before(line, "bytes spill loads");
		} else if (cur && strstr(line, "Used ") && strstr(line, "registers")) {
			cur->regs = num_before(line, "registers");
			cur->barriers = num_before(line, "barriers");
			cur->smem = num_before(line, "bytes smem");
			cur->cmem = num_before(line, "bytes cmem[0]");
		} else if (cur && (q = strstr(line, "Compile time = ")) != NULL) {
			cur->ms = atof(q + 15);	/* ptxas 12.8 and later */
		}
		l = e ? e + 1 : NULL;
	}
}

/* One ptxas run: started by job_start, its output read as it comes (the
 * batch polls every running job's pipe), reaped by job_finish. */
typedef struct {
	char in[4096], out[4096], arch[64];
	pid_t pid;		/* 0: not running */
	int fd;			/* its stdout and stderr; -1 once at EOF */
	char *log;		/* what it printed so far */
	size_t nlog, caplog;
} Job;

/*
 * ptxas's environment: ours, plus glibc malloc settings that keep freed
 * blocks up to 32 MiB (and 256 MiB of free heap) in the process instead of
 * handing each back to the kernel: ptxas allocates and frees large blocks
 * per kernel, and faulting their pages in again was a tenth of its CPU time
 * (27,000 page faults for a Mixtral layer's sm_80 module, 16,000 with
 * these; the same cubin).  A GLIBC_TUNABLES of the caller's is kept as is.
 */
static char **ptxas_environ;

static void
ptxas_env_make(void)
{
	static char tun[] = "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:"
			    "glibc.malloc.trim_threshold=268435456";
	size_t n = 0;

	if (getenv("GLIBC_TUNABLES"))
		return;
	while (environ[n])
		n++;
	ptxas_environ = xcalloc(n + 2, sizeof *ptxas_environ);
	memcpy(ptxas_environ, environ, n * sizeof *environ);
	ptxas_environ[n] = tun;
}

static char **
ptxas_env(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, ptxas_env_make);
	return ptxas_environ ? ptxas_environ : environ;
}

/* Write the PTX to a temporary file and start ptxas on it; -1 with a diagnostic. */
static int
job_start(Job *j, const char *exe, const CgPtxasJob *cj, Diag *d)
{
	const char *tmp = getenv("TMPDIR");
	char *argv[8];
	int fd, pfd[2];
	posix_spawn_file_actions_t fa;

	memset(j, 0, sizeof *j);
	j->fd = -1;
	if (!tmp || !tmp[0])
		tmp = "/tmp";
	snprintf(j->in, sizeof j->in, "%s/moec-XXXXXX.ptx", tmp);
	snprintf(j->out, sizeof j->out, "%s/moec-XXXXXX.cubin", tmp);
	if ((fd = mkstemps(j->in, 4)) < 0) {
		j->in[0] = j->out[0] = 0;
		return diag_error(d, LOC_NONE, "ptxas: cannot create %s: %s", j->in, strerror(errno));
	}
	if (write(fd, cj->ptx, cj->len) != (ssize_t)cj->len) {
		int e = errno;
		close(fd);
		j->out[0] = 0;
		return diag_error(d, LOC_NONE, "ptxas: cannot write %s: %s", j->in, strerror(e));
	}
	close(fd);
	if ((fd = mkstemps(j->out, 6)) < 0) {
		j->out[0] = 0;
		return diag_error(d, LOC_NONE, "ptxas: cannot create %s: %s", j->out, strerror(errno));
	}
	close(fd);
	snprintf(j->arch, sizeof j->arch, "-arch=%s", cj->sm);
	argv[0] = (char *)"ptxas";
	argv[1] = j->arch;
	argv[2] = (char *)"-v";
	argv[3] = (char *)"-o";
	argv[4] = j->out;
	argv[5] = j->in;
	argv[6] = NULL;
	/* close-on-exec on both ends: codegen threads may spawn too, and no
	 * other ptxas may hold this pipe open (the dup2s below clear it on 1, 2) */
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return diag_error(d, LOC_NONE, "ptxas: pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	errno = posix_spawn(&j->pid, exe, &fa, NULL, argv, ptxas_env());
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (errno != 0) {
		int e = errno;
		close(pfd[0]);
		j->pid = 0;
		return diag_error(d, LOC_NONE, "ptxas: cannot run %s: %s", exe, strerror(e));
	}
	j->fd = pfd[0];
	return 0;
}

/* Read what the job has printed; at EOF close its pipe (fd -1). */
static void
job_read(Job *j)
{
	ssize_t k;

	if (j->nlog + 4096 >= j->caplog)
		j->log = xrealloc(j->log, j->caplog = 2 * j->caplog + 8192);
	k = read(j->fd, j->log + j->nlog, j->caplog - j->nlog - 1);
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		close(j->fd);
		j->fd = -1;
		return;
	}
	j->nlog += (size_t)k;
}

/* Wait for the job (its pipe at EOF), parse the report, read the cubin;
 * remove its files.  -1 with a diagnostic (ptxas's first error line). */
static int
job_finish(Job *j, int started, int want_cubin, CgPtxasResult *r, Diag *d)
{
	int st = 0, rc = -1;

	if (!started)
		goto done;
	while (j->fd >= 0)
		job_read(j);
	r->log = j->log ? j->log : xstrdup("");
	r->log[j->nlog] = 0;
	j->log = NULL;
	while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char first[400];
		size_t n = strcspn(r->log, "\n");
		const char *err = strstr(r->log, "error");
		if (err) {	/* show the first error line */
			const char *b = err;
			while (b > r->log && b[-1] != '\n')
				b--;
			n = strcspn(b, "\n");
			snprintf(first, sizeof first, "%.*s", (int)(n < 399 ? n : 399), b);
		} else {
			snprintf(first, sizeof first, "%.*s", (int)(n < 399 ? n : 399), r->log);
		}
		diag_error(d, LOC_NONE, "ptxas %s failed (status %d): %s", j->arch,
			   WIFEXITED(st) ? WEXITSTATUS(st) : -1, first);
		goto done;
	}
	parse(r);
	if (want_cubin) {
		size_t n = 0;
		Diag quiet;
		diag_init(&quiet, NULL);
		r->cubin = (unsigned char *)file_read(j->out, &n, &quiet);
		r->cubin_len = n;
		if (!r->cubin) {
			diag_error(d, LOC_NONE, "ptxas: cannot read %s", j->out);
			goto done;
		}
	}
	rc = 0;
done:
	free(j->log);
	j->log = NULL;
	if (j->in[0])
		unlink(j->in);
	if (j->out[0])
		unlink(j->out);
	if (rc < 0) {
		char *log = r->log;
		r->log = NULL;
		cg_ptxas_free(r);
		r->log = log;
	}
	return rc;
}

/* ptxas processes at once: $MOEC_PTXAS_JOBS, else one per online core. */
static int
cores(void)
{
	const char *env = getenv("MOEC_PTXAS_JOBS");
	long c = env && atoi(env) > 0 ? atoi(env) : sysconf(_SC_NPROCESSORS_ONLN);

	return c < 1 ? 1 : c > 1024 ? 1024 : (int)c;
}

/* Jobs running at once: cores(), at most n. */
static int
job_slots(int n)
{
	int c = cores();

	return c < n ? c : n;
}

/*
 * A batch: n jobs given one at a time (cg_modules_assemble gives a
 * target's as soon as LLVM has written its PTX), at most `slots` running;
 * a job given while every slot is busy waits for one.  Results and
 * diagnostics come in job order whatever order the processes end in.
 */
enum { J_NONE, J_HELD, J_RUNNING, J_OVER, J_FAILED };

struct CgPtxasBatch {
	const char *exe;
	int n, slots, running;
	CgPtxasJob *job;
	Job *run;
	int *state;
	Diag start_diag;	/* a job that could not start: reported in job order */
	char (*why)[512];
};

CgPtxasBatch *
cg_ptxas_batch_new(int n)
{
	CgPtxasBatch *b;
	const char *exe = cg_ptxas_path();

	if (!exe || n < 1)
		return NULL;
	b = xcalloc(1, sizeof *b);
	b->exe = exe;
	b->n = n;
	b->slots = job_slots(n);
	b->job = xcalloc((size_t)n, sizeof *b->job);
	b->run = xcalloc((size_t)n, sizeof *b->run);
	b->state = xcalloc((size_t)n, sizeof *b->state);
	b->why = xcalloc((size_t)n, sizeof *b->why);
	return b;
}

static void
batch_start(CgPtxasBatch *b, int i)
{
	Diag d;

	diag_init(&d, NULL);
	if (job_start(&b->run[i], b->exe, &b->job[i], &d) == 0) {
		b->state[i] = J_RUNNING;
		b->running++;
	} else {	/* its temporary files, if made, go now */
		b->state[i] = J_FAILED;
		snprintf(b->why[i], sizeof b->why[i], "%s", d.last);
		if (b->run[i].in[0])
			unlink(b->run[i].in);
		if (b->run[i].out[0])
			unlink(b->run[i].out);
	}
}

/* Read every running job's output for up to `ms` (-1: until one ends);
 * an ended job frees its slot, and the first held jobs take the slots. */
static void
batch_pump(CgPtxasBatch *b, int ms)
{
	struct pollfd pf[64];
	int who[64], np = 0;

	for (int i = 0; i < b->n && np < (int)NELEM(pf); i++)
		if (b->state[i] == J_RUNNING && b->run[i].fd >= 0) {
			pf[np] = (struct pollfd){.fd = b->run[i].fd, .events = POLLIN};
			who[np++] = i;
		}
	if (np && poll(pf, (nfds_t)np, ms) > 0)
		for (int k = 0; k < np; k++)
			if (pf[k].revents) {
				job_read(&b->run[who[k]]);
				if (b->run[who[k]].fd < 0) {
					b->state[who[k]] = J_OVER;
					b->running--;
				}
			}
	for (int i = 0; i < b->n && b->running < b->slots; i++)
		if (b->state[i] == J_HELD)
			batch_start(b, i);
}

void
cg_ptxas_batch_add(CgPtxasBatch *b, int i, const CgPtxasJob *job)
{
	if (!b || i < 0 || i >= b->n || b->state[i] != J_NONE)
		return;
	b->job[i] = *job;
	b->state[i] = J_HELD;
	batch_pump(b, 0);
}

int
cg_ptxas_batch_wait(CgPtxasBatch *b, CgPtxasResult *r, Diag *d)
{
	int rc = 0;

	if (!b)
		return 0;
	for (;;) {
		int busy = 0;
		for (int i = 0; i < b->n; i++)
			busy |= b->state[i] == J_HELD || b->state[i] == J_RUNNING;
		if (!busy)
			break;
		batch_pump(b, -1);
	}
	for (int i = 0; i < b->n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		if (b->state[i] == J_FAILED)
			rc = diag_error(d, LOC_NONE, "%s", b->why[i]);
		else if (b->state[i] == J_OVER &&
			 job_finish(&b->run[i], 1, b->job[i].want_cubin, &r[i], d) != 0)
			rc = -1;
	}
	free(b->job);
	free(b->run);
	free(b->state);
	free(b->why);
	free(b);
	return rc;
}

int
cg_ptxas_many(const CgPtxasJob *job, int n, CgPtxasResult *r, Diag *d)
{
	CgPtxasBatch *b;

	for (int i = 0; i < n; i++)
		memset(&r[i], 0, sizeof r[i]);
	if (!cg_ptxas_path())
		return diag_error(d, LOC_NONE, "no ptxas (set PTXAS, or install CUDA in /usr/local/cuda)");
	if (n < 1)
		return 0;
	b = cg_ptxas_batch_new(n);
	for (int i = 0; i < n; i++)
		cg_ptxas_batch_add(b, i, &job[i]);
	return cg_ptxas_batch_wait(b, r, d);
}

int
cg_ptxas(const char *ptx, size_t len, const char *sm, int want_cubin, CgPtxasResult *r,
	 Diag *d)
{
	CgPtxasJob j = {ptx, len, sm, want_cubin};

	return cg_ptxas_many(&j, 1, r, d);
}

/* Each CgKernel's registers, spills, stack and static shared memory from r. */
void
cg_module_take_stats(CgModule *m, const CgPtxasResult *r)
{
	for (int i = 0; i < r->n; i++)
		for (int k = 0; k < m->nkern; k++)
			if (strcmp(m->kern[k].name, r->k[i].name) == 0) {
				m->kern[k].regs = r->k[i].regs;
				m->kern[k].spill_stores = r->k[i].spill_stores;
				m->kern[k].spill_loads = r->k[i].spill_loads;
				m->kern[k].stack = r->k[i].stack;
				m->kern[k].static_smem = r->k[i].smem;
			}
}

/*
 * A module's PTX in parts for ptxas.  ptxas assembles a module on one
 * thread, and two targets' modules rarely take the same time (a Mixtral
 * layer: sm_80 0.8 s, sm_90a 0.6 s), so with two targets on two cores one
 * core would idle while the longer one ends.  Cut between entries, each
 * part is the header (everything before the first entry) and a share of
 * the entries, shares balanced by their lines (the largest first, each to
 * the lightest part); a part assembles alone, and the parts' reports
 * merge into the module's (cg_module_take_stats goes by entry name).  Not
 * cut: one part wanted, a cubin wanted (one per module), or a .func in the
 * text (a part would miss its body).
 */
enum { MAXPART = 16 };

typedef struct {
	int n;				/* parts; 1: the module's text as it is */
	char *text[MAXPART];		/* malloc'd when n > 1 */
	size_t len[MAXPART], cost[MAXPART];
} Parts;

/* Parts per module: as many as make twice the ptxas slots over n modules. */
static int
parts_per_module(int n, int want_cubin)
{
	int p = n > 0 ? (2 * cores() + n - 1) / n : 1;

	return want_cubin || p < 2 ? 1 : p > MAXPART ? MAXPART : p;
}

const char *
cg_ptx_entry_name(const char *l)
{
	static const char *const kw[] = {".entry ", ".visible .entry ", ".weak .entry "};

	for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
		if (!strncmp(l, kw[i], strlen(kw[i])))
			return l + strlen(kw[i]);
	return NULL;
}

static size_t
lines(const char *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += s[i] == '\n';
	return k;
}

/* Cut ptx into up to `want` parts (P->n of them; 1: not cut). */
static void
parts_make(Parts *P, const char *ptx, size_t len, int want)
{
	size_t *at = NULL, *cost = NULL;
	int *part = NULL, ne = 0, cap = 0;

	memset(P, 0, sizeof *P);
	P->n = 1;
	if (want < 2 || strstr(ptx, ".func"))
		return;
	for (const char *l = ptx; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (cg_ptx_entry_name(l)) {
			if (ne == cap)
				at = xrealloc(at, (size_t)(cap = 2 * cap + 16) * sizeof *at);
			at[ne++] = (size_t)(l - ptx);
		}
	if (ne < 2)
		goto out;
	P->n = want < ne ? want : ne;
	cost = xcalloc((size_t)ne, sizeof *cost);
	part = xcalloc((size_t)ne, sizeof *part);
	for (int e = 0; e < ne; e++)
		cost[e] = lines(ptx + at[e], (e + 1 < ne ? at[e + 1] : len) - at[e]) + 1;
	for (int done = 0; done < ne; done++) {	/* the largest left to the lightest part */
		int big = -1, light = 0;
		for (int e = 0; e < ne; e++)
			if (cost[e] && (big < 0 || cost[e] > cost[big]))
				big = e;
		for (int p = 1; p < P->n; p++)
			if (P->cost[p] < P->cost[light])
				light = p;
		part[big] = light;
		P->cost[light] += cost[big];
		cost[big] = 0;
	}
	for (int p = 0; p < P->n; p++) {
		char *t = xmalloc(len + 1);
		size_t n = at[0];
		memcpy(t, ptx, n);
		for (int e = 0; e < ne; e++)
			if (part[e] == p) {
				size_t end = e + 1 < ne ? at[e + 1] : len;
				memcpy(t + n, ptx + at[e], end - at[e]);
				n += end - at[e];
			}
		t[n] = 0;
		P->text[p] = t;
		P->len[p] = n;
	}
	for (int p = 1; p < P->n; p++)	/* the heaviest part first: it starts first */
		for (int q = p; q > 0 && P->cost[q] > P->cost[q - 1]; q--) {
			char *t = P->text[q];
			size_t n = P->len[q], c = P->cost[q];
			P->text[q] = P->text[q - 1], P->len[q] = P->len[q - 1], P->cost[q] = P->cost[q - 1];
			P->text[q - 1] = t, P->len[q - 1] = n, P->cost[q - 1] = c;
		}
out:
	free(at);
	free(cost);
	free(part);
}

static void
parts_free(Parts *P)
{
	for (int p = 0; p < P->n; p++)
		free(P->text[p]);
	memset(P, 0, sizeof *P);
}

/* The module's result from its n parts' (which are emptied): the entries
 * and the logs one part after the other. */
static void
parts_merge(CgPtxasResult *to, CgPtxasResult *from, int n)
{
	size_t nlog = 0, at = 0;

	if (n < 2) {
		*to = from[0];
		memset(&from[0], 0, sizeof from[0]);
		return;
	}
	memset(to, 0, sizeof *to);
	for (int p = 0; p < n; p++) {
		nlog += from[p].log ? strlen(from[p].log) : 0;
		to->n += from[p].n;
	}
	to->k = xcalloc((size_t)to->n + 1, sizeof *to->k);
	to->log = xmalloc(nlog + 1);
	to->n = 0;
	for (int p = 0; p < n; p++) {
		size_t k = from[p].log ? strlen(from[p].log) : 0;
		if (from[p].n)
			memcpy(to->k + to->n, from[p].k, (size_t)from[p].n * sizeof *to->k);
		to->n += from[p].n;
		memcpy(to->log + at, from[p].log ? from[p].log : "", k);
		at += k;
		cg_ptxas_free(&from[p]);
	}
	to->log[at] = 0;
}

/*
 * LLVM for each module on a thread of its own (the kernels it shares with
 * another module emptied: share.c), ptxas on each module's PTX (in parts)
 * as soon as it is written and its shared kernels' text is in:
 *
 *	thread sm_80:  [verify, O3, NVPTX]          main: ptxas sm_80  ...........
 *	thread sm_90a: [verify, O3, NVPTX ]               ptxas sm_90a .........
 *
 * A module has its own LLVMContext and TargetMachine, and LLVM (19, 22) is
 * thread-safe across contexts; the targets were initialised by
 * cg_module_new on this thread.  Each thread reports into a Diag of its
 * own, copied to d in module order; only this thread starts processes.
 */
typedef struct Lower Lower;
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int *ready;		/* module indices in the order their PTX came */
	int nready;
} LowerSet;

struct Lower {
	CgModule *m;
	LowerSet *set;
	int i, rc, threaded;
	double secs;
	Diag d;
	pthread_t th;
};

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *
lower_run(void *arg)
{
	Lower *l = arg;
	double t0 = now();

	l->rc = cg_module_ptx(l->m, NULL, &l->d) ? 0 : -1;
	l->secs = now() - t0;
	pthread_mutex_lock(&l->set->mu);
	l->set->ready[l->set->nready++] = l->i;
	pthread_cond_signal(&l->set->cv);
	pthread_mutex_unlock(&l->set->mu);
	return NULL;
}

/* Module m's PTX to the batch, in up to np parts: jobs j0 ... */
static void
submit(CgPtxasBatch *b, CgModule *m, Parts *part, int j0, int np, int want_cubin)
{
	size_t len;
	const char *ptx = cg_module_ptx(m, &len, NULL);	/* made: no error */
	CgPtxasJob job = {ptx, len, cg_module_target(m)->sm, want_cubin};

	parts_make(part, ptx, len, np);
	for (int p = 0; p < part->n; p++) {
		if (part->n > 1)
			job.ptx = part->text[p], job.len = part->len[p];
		cg_ptxas_batch_add(b, j0 + p, &job);
	}
}

/* b: the batch the PTX goes to (NULL: PTX only), np jobs a module (its
 * parts: jobs i*np ...); r: the modules' results. */
static int
lower_all(CgModule **m, int n, CgPtxasBatch *b, int np, int want_cubin, CgPtxasResult *r,
	  CgAssembleTimes *t, Diag *d)
{
	Lower *l = xcalloc((size_t)n + 1, sizeof *l);
	LowerSet set = {.ready = xcalloc((size_t)n + 1, sizeof(int))};
	Parts *part = xcalloc((size_t)n + 1, sizeof *part);
	CgPtxasResult *pr = b ? xcalloc((size_t)(n * np), sizeof *pr) : NULL;
	CgShare *sh = cg_share_plan(m, n);
	int rc = 0, *ready = xcalloc((size_t)n + 1, sizeof *ready), *sent = xcalloc((size_t)n + 1, sizeof *sent);
	double t0 = now(), tptx;

	pthread_mutex_init(&set.mu, NULL);
	pthread_cond_init(&set.cv, NULL);
	for (int i = 0; i < n; i++) {
		l[i] = (Lower){.m = m[i], .set = &set, .i = i};
		diag_init(&l[i].d, NULL);
		l[i].threaded = n > 1 && pthread_create(&l[i].th, NULL, lower_run, &l[i]) == 0;
		if (!l[i].threaded)	/* one module, or no thread to be had: here */
			lower_run(&l[i]);
	}
	for (int k = 0; k < n; k++) {
		pthread_mutex_lock(&set.mu);
		while (set.nready <= k)
			pthread_cond_wait(&set.cv, &set.mu);
		ready[set.ready[k]] = 1;
		pthread_mutex_unlock(&set.mu);
		for (int i = 0; i < n; i++) {	/* those whose donor, if any, is there too */
			int dn = cg_share_donor(sh, i);
			if (!ready[i] || sent[i] || (dn >= 0 && !ready[dn]))
				continue;
			sent[i] = 1;
			if (l[i].rc == 0 && dn >= 0 && l[dn].rc != 0)
				l[i].rc = diag_error(&l[i].d, LOC_NONE, "%s: no PTX for the kernels it shares with %s",
						     cg_module_target(m[i])->sm, cg_module_target(m[dn])->sm);
			else if (l[i].rc == 0 && cg_share_splice(sh, m, i, &l[i].d) < 0)
				l[i].rc = -1;
			if (l[i].rc == 0 && b)
				submit(b, m[i], &part[i], i * np, np, want_cubin);
		}
	}
	tptx = now();
	for (int i = 0; i < n; i++) {
		if (l[i].threaded)
			pthread_join(l[i].th, NULL);
		if (l[i].rc)
			rc = diag_error(d, LOC_NONE, "%s", l[i].d.last);
		if (t && i < (int)NELEM(t->llvm)) {
			t->llvm[i] = l[i].secs;
			t->shared[i] = cg_share_count(sh, i);
		}
	}
	if (b && cg_ptxas_batch_wait(b, pr, d) < 0)
		rc = -1;
	for (int i = 0; i < n && b; i++)
		parts_merge(&r[i], pr + i * np, part[i].n > 0 ? part[i].n : 1);
	for (int i = 0; i < n && rc == 0 && b; i++)
		cg_module_take_stats(m[i], &r[i]);
	if (t) {
		t->ptx = tptx - t0;
		t->ptxas = now() - tptx;
	}
	pthread_mutex_destroy(&set.mu);
	pthread_cond_destroy(&set.cv);
	for (int i = 0; i < n; i++)
		parts_free(&part[i]);
	cg_share_free(sh);
	free(ready);
	free(sent);
	free(part);
	free(pr);
	free(set.ready);
	free(l);
	return rc;
}

int
cg_modules_ptx(CgModule **m, int n, CgAssembleTimes *t, Diag *d)
{
	return lower_all(m, n, NULL, 1, 0, NULL, t, d);
}

int
cg_modules_assemble(CgModule **m, int n, int want_cubin, CgPtxasResult *r, CgAssembleTimes *t,
		    Diag *d)
{
	CgPtxasBatch *b;
	int np = parts_per_module(n, want_cubin);

	memset(r, 0, sizeof *r * (size_t)n);
	if (!cg_ptxas_path())
		return diag_error(d, LOC_NONE, "no ptxas (set PTXAS, or install CUDA in /usr/local/cuda)");
	if (n < 1 || !(b = cg_ptxas_batch_new(n * np)))
		return 0;
	return lower_all(m, n, b, np, want_cubin, r, t, d);
}

int
cg_module_assemble(CgModule *m, int want_cubin, CgPtxasResult *r, Diag *d)
{
	return cg_modules_assemble(&m, 1, want_cubin, r, NULL, d);
}
