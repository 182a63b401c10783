/*
 * file.c — whole-file reads and writes with diagnostics, and path helpers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

char *
file_read(const char *path, size_t *len, Diag *d)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *buf;
	size_t n;

	if (!f) {
		diag_error(d, loc_file(path), "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		diag_error(d, loc_file(path), "not a regular file");
		return NULL;
	}
	n = (size_t)st.st_size;
	buf = malloc(n + 1);
	if (!buf) {
		fclose(f);
		diag_error(d, loc_file(path), "file too large to read (%zu bytes)", n);
		return NULL;
	}
	if (n && fread(buf, 1, n, f) != n) {
		free(buf);
		fclose(f);
		diag_error(d, loc_file(path), "read error");
		return NULL;
	}
	fclose(f);
	buf[n] = 0;
	*len = n;
	return buf;
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
