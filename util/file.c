/*
 * file.c — opening files from strangers, whole-file reads and writes with
 * diagnostics, and path helpers.
 *
 * Every reader opens through file_open: O_NONBLOCK, so a FIFO (or a link to
 * one) is refused by the fstat that follows instead of blocking the open; a
 * regular file only; the size checked before anything is read; and where a
 * file must stay inside a folder, the check is made on the opened file (its
 * /proc/self/fd link), not on the name, which a link could redirect.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* What st_mode is, for "not a regular file" diagnostics. */
static const char *
kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" :
	       S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" :
	       S_ISSOCK(m) ? "a socket" : "of an unknown kind";
}

/*
 * The real path of what fd refers to: /proc/self/fd names the opened file
 * itself, so a link swapped after the open changes nothing.  Without /proc,
 * realpath(path), trusted only if it names the same file (dev, ino).
 */
static char *
fd_realpath(int fd, const char *path, const struct stat *st)
{
	char link[64], *r = xmalloc(PATH_MAX + 1);
	struct stat rs;
	ssize_t n;

	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, r, PATH_MAX)) > 0 && n < PATH_MAX && r[0] == '/') {
		r[n] = 0;
		return r;
	}
	free(r);
	if (!(r = realpath(path, NULL)) || stat(r, &rs) != 0 || rs.st_dev != st->st_dev ||
	    rs.st_ino != st->st_ino) {
		free(r);
		return NULL;
	}
	return r;
}

/* The opened file lies below the folder `within` (after symbolic links). */
static int
fd_inside(int fd, const char *path, const struct stat *st, const char *within)
{
	char *rd = realpath(within, NULL), *rp = fd_realpath(fd, path, st);
	size_t n = rd ? strlen(rd) : 0;
	int ok = rd && rp && strncmp(rp, rd, n) == 0 && (rp[n] == '/' || !strcmp(rd, "/"));

	free(rd);
	free(rp);
	return ok;
}

int
file_open(const char *path, const char *within, uint64_t max, uint64_t *size, Diag *d)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;

	if (fd < 0) {
		diag_error(d, loc_file(path), "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0)
		st.st_mode = 0;
	if (!S_ISREG(st.st_mode)) {
		diag_error(d, loc_file(path), "not a regular file (%s)", kind_of(st.st_mode));
		close(fd);
		return -1;
	}
	if (within && !fd_inside(fd, path, &st, within)) {
		close(fd);
		return FILE_OUTSIDE;
	}
	if (max && (uint64_t)st.st_size > max) {
		diag_error(d, loc_file(path), "file too large (%llu bytes, the limit is %llu)",
			   (unsigned long long)st.st_size, (unsigned long long)max);
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);	/* reads of a regular file */
	*size = (uint64_t)st.st_size;
	return fd;
}

int
file_pread(int fd, void *buf, size_t n, uint64_t off)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = pread(fd, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

char *
file_read_max(const char *path, uint64_t max, size_t *len, Diag *d)
{
	uint64_t n;
	int fd = file_open(path, NULL, max, &n, d);
	char *buf;

	if (fd < 0)
		return NULL;
	if (n >= SIZE_MAX || !(buf = malloc((size_t)n + 1))) {
		close(fd);
		diag_error(d, loc_file(path), "file too large to read (%llu bytes)",
			   (unsigned long long)n);
		return NULL;
	}
	errno = 0;
	if (file_pread(fd, buf, (size_t)n, 0)) {
		diag_error(d, loc_file(path), "read error: %s",
			   errno ? strerror(errno) : "the file shrank while it was read");
		free(buf);
		close(fd);
		return NULL;
	}
	close(fd);
	buf[n] = 0;
	*len = (size_t)n;
	return buf;
}

char *
file_read(const char *path, size_t *len, Diag *d)
{
	return file_read_max(path, 0, len, d);
}

const char *
file_basename(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

char *
file_dirname(const char *path)
{
	const char *s = strrchr(path, '/');

	if (!s)
		return xstrdup(".");
	if (s == path)
		return xstrdup("/");
	char *r = xmalloc((size_t)(s - path) + 1);
	memcpy(r, path, (size_t)(s - path));
	r[s - path] = 0;
	return r;
}

char *
file_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *r = xmalloc(a + b + 2);

	memcpy(r, dir, a);
	r[a] = '/';
	memcpy(r + a + 1, name, b + 1);
	return r;
}

int
file_is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int
file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}
