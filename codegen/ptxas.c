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
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
		}
		l = e ? e + 1 : NULL;
	}
}

static char *
read_fd(int fd)
{
	size_t n = 0, cap = 4096;
	char *s = xmalloc(cap);
	ssize_t k;

	for (;;) {
		if (n + 1 >= cap)
			s = xrealloc(s, cap *= 2);
		k = read(fd, s + n, cap - n - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	s[n] = 0;
	return s;
}

/* One ptxas run: started by job_start, reaped by job_finish. */
typedef struct {
	char in[4096], out[4096], arch[64];
	pid_t pid;		/* 0: not running */
	int fd;			/* its stdout and stderr */
} Job;

/* Write the PTX to a temporary file and start ptxas on it; -1 with a diagnostic. */
static int
job_start(Job *j, const char *exe, const char *ptx, size_t len, const char *sm, Diag *d)
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
	if (write(fd, ptx, len) != (ssize_t)len) {
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
	snprintf(j->arch, sizeof j->arch, "-arch=%s", sm);
	argv[0] = (char *)"ptxas";
	argv[1] = j->arch;
	argv[2] = (char *)"-v";
	argv[3] = (char *)"-o";
	argv[4] = j->out;
	argv[5] = j->in;
	argv[6] = NULL;
	if (pipe(pfd) < 0)
		return diag_error(d, LOC_NONE, "ptxas: pipe: %s", strerror(errno));
	fcntl(pfd[0], F_SETFD, FD_CLOEXEC);	/* later jobs must not hold this one open */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	errno = posix_spawn(&j->pid, exe, &fa, NULL, argv, environ);
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

/* Read the job's output, wait for it, parse the report, read the cubin;
 * remove its files.  -1 with a diagnostic (ptxas's first error line). */
static int
job_finish(Job *j, int started, int want_cubin, CgPtxasResult *r, Diag *d)
{
	int st = 0, rc = -1;

	if (!started)
		goto done;
	r->log = read_fd(j->fd);
	close(j->fd);
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

/* Jobs running at once: $MOEC_PTXAS_JOBS, else one per online core; at most n. */
static int
job_slots(int n)
{
	const char *env = getenv("MOEC_PTXAS_JOBS");
	long cores = env && atoi(env) > 0 ? atoi(env) : sysconf(_SC_NPROCESSORS_ONLN);

	return cores < 1 ? 1 : cores < n ? (int)cores : n;
}

int
cg_ptxas_many(const CgPtxasJob *job, int n, CgPtxasResult *r, Diag *d)
{
	const char *exe = cg_ptxas_path();
	Job *run;
	int *started, slots, next = 0, rc = 0;

	for (int i = 0; i < n; i++)
		memset(&r[i], 0, sizeof r[i]);
	if (!exe)
		return diag_error(d, LOC_NONE, "no ptxas (set PTXAS, or install CUDA in /usr/local/cuda)");
	if (n < 1)
		return 0;
	run = xcalloc((size_t)n, sizeof *run);
	started = xcalloc((size_t)n, sizeof *started);
	slots = job_slots(n);
	/* start `slots` jobs; each one reaped (in order) starts the next */
	for (; next < slots; next++)
		started[next] = job_start(&run[next], exe, job[next].ptx, job[next].len,
					  job[next].sm, d) == 0;
	for (int i = 0; i < n; i++) {
		if (job_finish(&run[i], started[i], job[i].want_cubin, &r[i], d) != 0)
			rc = -1;
		if (next < n) {
			started[next] = job_start(&run[next], exe, job[next].ptx, job[next].len,
						  job[next].sm, d) == 0;
			next++;
		}
	}
	free(run);
	free(started);
	return rc;
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

int
cg_modules_assemble(CgModule **m, int n, int want_cubin, CgPtxasResult *r, Diag *d)
{
	CgPtxasJob *job = xcalloc((size_t)n + 1, sizeof *job);
	int rc = -1;

	memset(r, 0, sizeof *r * (size_t)n);
	for (int i = 0; i < n; i++) {
		if (!(job[i].ptx = cg_module_ptx(m[i], &job[i].len, d)))
			goto out;
		job[i].sm = m[i]->t.sm;
		job[i].want_cubin = want_cubin;
	}
	if (cg_ptxas_many(job, n, r, d) < 0)
		goto out;
	for (int i = 0; i < n; i++)
		cg_module_take_stats(m[i], &r[i]);
	rc = 0;
out:
	free(job);
	return rc;
}

int
cg_module_assemble(CgModule *m, int want_cubin, CgPtxasResult *r, Diag *d)
{
	return cg_modules_assemble(&m, 1, want_cubin, r, d);
}
