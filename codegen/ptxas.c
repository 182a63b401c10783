/*
 * ptxas.c — assemble PTX with NVIDIA's ptxas and read its resource report.
 *
 *	ptxas -arch=sm_90a -v -o OUT.cubin IN.ptx
 *	ptxas info    : Compiling entry function 'k' for 'sm_90a'
 *	ptxas info    : Function properties for k
 *	    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *	ptxas info    : Used 168 registers, used 1 barriers, 98304 bytes smem, 400 bytes cmem[0]
 *
 * ptxas runs through posix_spawn (no shell) on temporary files.
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

int
cg_ptxas(const char *ptx, size_t len, const char *sm, int want_cubin, CgPtxasResult *r,
	 Diag *d)
{
	const char *exe = cg_ptxas_path(), *tmp = getenv("TMPDIR");
	char in[4096], out[4096], arch[64];
	char *argv[8];
	int fd, pfd[2], st = 0, rc = -1;
	pid_t pid;
	posix_spawn_file_actions_t fa;

	memset(r, 0, sizeof *r);
	if (!exe)
		return diag_error(d, LOC_NONE, "no ptxas (set PTXAS, or install CUDA in /usr/local/cuda)");
	if (!tmp || !tmp[0])
		tmp = "/tmp";
	snprintf(in, sizeof in, "%s/moec-XXXXXX.ptx", tmp);
	snprintf(out, sizeof out, "%s/moec-XXXXXX.cubin", tmp);
	if ((fd = mkstemps(in, 4)) < 0)
		return diag_error(d, LOC_NONE, "ptxas: cannot create %s: %s", in, strerror(errno));
	if (write(fd, ptx, len) != (ssize_t)len) {
		int e = errno;
		close(fd);
		unlink(in);
		return diag_error(d, LOC_NONE, "ptxas: cannot write %s: %s", in, strerror(e));
	}
	close(fd);
	if ((fd = mkstemps(out, 6)) < 0) {
		unlink(in);
		return diag_error(d, LOC_NONE, "ptxas: cannot create %s: %s", out, strerror(errno));
	}
	close(fd);
	snprintf(arch, sizeof arch, "-arch=%s", sm);
	argv[0] = (char *)"ptxas";
	argv[1] = arch;
	argv[2] = (char *)"-v";
	argv[3] = (char *)"-o";
	argv[4] = out;
	argv[5] = in;
	argv[6] = NULL;
	if (pipe(pfd) < 0) {
		diag_error(d, LOC_NONE, "ptxas: pipe: %s", strerror(errno));
		goto done;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	if ((errno = posix_spawn(&pid, exe, &fa, NULL, argv, environ)) != 0) {
		diag_error(d, LOC_NONE, "ptxas: cannot run %s: %s", exe, strerror(errno));
		posix_spawn_file_actions_destroy(&fa);
		close(pfd[0]);
		close(pfd[1]);
		goto done;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	r->log = read_fd(pfd[0]);
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
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
		diag_error(d, LOC_NONE, "ptxas %s failed (status %d): %s", arch,
			   WIFEXITED(st) ? WEXITSTATUS(st) : -1, first);
		goto done;
	}
	parse(r);
	if (want_cubin) {
		size_t n = 0;
		Diag quiet;
		diag_init(&quiet, NULL);
		r->cubin = (unsigned char *)file_read(out, &n, &quiet);
		r->cubin_len = n;
		if (!r->cubin) {
			diag_error(d, LOC_NONE, "ptxas: cannot read %s", out);
			goto done;
		}
	}
	rc = 0;
done:
	unlink(in);
	unlink(out);
	if (rc < 0) {
		char *log = r->log;
		r->log = NULL;
		cg_ptxas_free(r);
		r->log = log;
	}
	return rc;
}

int
cg_module_assemble(CgModule *m, int want_cubin, CgPtxasResult *r, Diag *d)
{
	size_t len;
	const char *ptx = cg_module_ptx(m, &len, d);

	if (!ptx)
		return -1;
	if (cg_ptxas(ptx, len, m->t.sm, want_cubin, r, d) < 0)
		return -1;
	for (int i = 0; i < r->n; i++)
		for (int k = 0; k < m->nkern; k++)
			if (strcmp(m->kern[k].name, r->k[i].name) == 0) {
				m->kern[k].regs = r->k[i].regs;
				m->kern[k].spill_stores = r->k[i].spill_stores;
				m->kern[k].spill_loads = r->k[i].spill_loads;
				m->kern[k].stack = r->k[i].stack;
				m->kern[k].static_smem = r->k[i].smem;
			}
	return 0;
}
