/*
 * outfile.c — every file moec and moert write, written atomically.
 *
 *	file_create("out.moeb")  ->  out.moeb.tmp-XXXXXX (same folder)
 *	... fwrite ...
 *	file_commit()            ->  fflush, fsync, fclose, rename over out.moeb
 *	   (any error)           ->  temporary removed, "out.moeb: error: ..."
 *
 * A reader sees the old file or the whole new one, never a part, and a
 * failed write leaves nothing behind.  "-" is stdout; a target that exists
 * and is not a regular file (/dev/null, /dev/full, a FIFO) is written in
 * place, since renaming over it would replace the device.  Every error names
 * the path and the system's reason.
 *
 * A temporary is also removed when the process is stopped by SIGINT, SIGTERM,
 * SIGHUP or SIGPIPE while it is open: the live temporaries sit in a small
 * table that the handler walks with unlink (async-signal-safe), before it
 * re-raises the signal with the default action.  (SIGKILL cannot be caught;
 * a `*.tmp-XXXXXX` left by one is safe to delete.)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define NLIVE 64		/* open temporaries at once; more are not covered */
static char *volatile live[NLIVE];
static const int live_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

static void
on_signal(int sig)
{
	for (int i = 0; i < NLIVE; i++)
		if (live[i])
			unlink(live[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Track tmp for the signal handler; installed on the first temporary. */
static void
live_add(char *tmp)
{
	static int installed;

	if (!installed) {
		installed = 1;
		for (size_t i = 0; i < sizeof live_sigs / sizeof *live_sigs; i++) {
			struct sigaction old, sa = {.sa_handler = on_signal};

			/* a signal the caller ignores or handles stays theirs */
			if (sigaction(live_sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
				sigaction(live_sigs[i], &sa, NULL);
		}
	}
	for (int i = 0; i < NLIVE; i++)
		if (!live[i]) {
			live[i] = tmp;
			return;
		}
}

static void
live_drop(const char *tmp)
{
	for (int i = 0; i < NLIVE; i++)
		if (live[i] == tmp)
			live[i] = NULL;
}

/* Does the path name something that is not a regular file (a device)? */
static int
special(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static mode_t
create_mode(void)
{
	mode_t m = umask(0);

	umask(m);
	return 0666 & ~m;
}

FILE *
file_create(FileOut *o, const char *path, Diag *d)
{
	int fd;

	memset(o, 0, sizeof *o);
	o->path = path;
	if (strcmp(path, "-") == 0)
		return o->f = stdout;
	if (special(path)) {
		if (!(o->f = fopen(path, "wb")))
			diag_error(d, loc_file(path), "cannot write: %s", strerror(errno));
		return o->f;
	}
	if (file_is_dir(path)) {
		diag_error(d, loc_file(path), "cannot write: it is a folder");
		return NULL;
	}
	if (asprintf(&o->tmp, "%s.tmp-XXXXXX", path) < 0)
		die("out of memory");
	if ((fd = mkstemp(o->tmp)) < 0) {
		diag_error(d, loc_file(path), "cannot create: %s", strerror(errno));
		free(o->tmp);
		o->tmp = NULL;
		return NULL;
	}
	live_add(o->tmp);
	if (fchmod(fd, create_mode()) != 0 || !(o->f = fdopen(fd, "wb"))) {
		diag_error(d, loc_file(path), "cannot create: %s", strerror(errno));
		close(fd);
		file_discard(o);
		return NULL;
	}
	return o->f;
}

void
file_discard(FileOut *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	if (o->tmp) {
		unlink(o->tmp);
		live_drop(o->tmp);
		free(o->tmp);
	}
	o->f = NULL;
	o->tmp = NULL;
}

/* The write error of f, if any: errno of the failing call, kept. */
static int
flush_error(FILE *f)
{
	int bad = ferror(f), e = errno;

	if (fflush(f) != 0)
		return errno ? errno : EIO;
	return bad ? (e ? e : EIO) : 0;
}

int
file_commit(FileOut *o, Diag *d)
{
	int err = 0;

	if (!o->f)
		return -1;
	err = flush_error(o->f);
	if (o->f == stdout) {
		o->f = NULL;
		return err ? diag_error(d, loc_file("<stdout>"), "write error: %s", strerror(err)) : 0;
	}
	if (!err && o->tmp && fsync(fileno(o->f)) != 0)
		err = errno;
	if (fclose(o->f) != 0 && !err)
		err = errno ? errno : EIO;
	o->f = NULL;
	if (!err && o->tmp && rename(o->tmp, o->path) != 0)
		err = errno;
	if (err) {
		file_discard(o);
		return diag_error(d, loc_file(o->path), "write error: %s", strerror(err));
	}
	live_drop(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

int
file_write(const char *path, const void *p, size_t n, Diag *d)
{
	FileOut o;
	FILE *f = file_create(&o, path, d);

	if (!f)
		return -1;
	fwrite(p, 1, n, f);
	return file_commit(&o, d);
}

/*
 * Before any work: can `path` be written?  Its folder must exist and take a
 * new file (tried with a probe, so a read-only mount or a path under a file
 * is caught), and the path itself must not be a folder.
 */
int
file_check_output(const char *path, Diag *d)
{
	char *dir, *probe;
	int fd, rc = 0;

	if (strcmp(path, "-") == 0 || special(path))
		return 0;
	if (!*path)
		return diag_error(d, loc_file(path), "cannot write: an empty path");
	if (file_is_dir(path))
		return diag_error(d, loc_file(path), "cannot write: it is a folder");
	dir = file_dirname(path);
	if (!file_is_dir(dir)) {
		rc = diag_error(d, loc_file(path), "cannot write: the folder '%s' does not exist", dir);
		free(dir);
		return rc;
	}
	probe = file_join(dir, ".moec-probe-XXXXXX");
	if ((fd = mkstemp(probe)) < 0)
		rc = diag_error(d, loc_file(path), "cannot write in '%s': %s", dir, strerror(errno));
	else {
		close(fd);
		unlink(probe);
	}
	free(probe);
	free(dir);
	return rc;
}

/* `path` as a folder for outputs: created if missing (one level), checked. */
int
file_make_dir(const char *path, Diag *d)
{
	char *probe;
	int fd, rc = 0;

	if (mkdir(path, 0777) != 0 && errno != EEXIST)
		return diag_error(d, loc_file(path), "cannot create the folder: %s", strerror(errno));
	if (!file_is_dir(path))
		return diag_error(d, loc_file(path), "cannot create the folder: a file of that name exists");
	probe = file_join(path, ".moec-probe-XXXXXX");
	if ((fd = mkstemp(probe)) < 0)
		rc = diag_error(d, loc_file(path), "cannot write in the folder: %s", strerror(errno));
	else {
		close(fd);
		unlink(probe);
	}
	free(probe);
	return rc;
}

int
file_same(const char *a, const char *b)
{
	struct stat sa, sb;

	return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/*
 * A name chosen by a model (an output's name) as a file name: bytes other
 * than [A-Za-z0-9._-] become '_', a leading '.' becomes '_' (no "..", no
 * hidden files), an empty name is "_", and the result is cut to 200 bytes.
 * So "../../etc/x" is "_._.._etc_x" and "Identity:0" is "Identity_0": always
 * one file inside the output folder.
 */
void
file_safe_name(char *buf, size_t n, const char *name)
{
	size_t k = 0;

	for (; name[k] && k + 1 < n && k < 200; k++) {
		char c = name[k];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '_' || c == '-' || (c == '.' && k > 0);
		buf[k] = ok ? c : '_';
	}
	if (k == 0 && n > 1)
		buf[k++] = '_';
	buf[k] = 0;
}
