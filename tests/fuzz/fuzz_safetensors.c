/*
 * fuzz_safetensors.c — the safetensors reader: header parse and reading
 * every tensor.  An input starting with '{' is a sharded checkpoint's
 * model.safetensors.index.json instead, in a folder holding two small
 * shards and a symlink to a shard outside the folder (which the reader must
 * refuse); anything else is a model.safetensors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"
#include "fuzz.h"

static char single[1024], index_path[1024];

/* A valid file holding f32 tensors `a` [2,2] and `b` [3] named with prefix. */
static void
shard(const char *path, const char *prefix)
{
	char hdr[256], buf[512];
	int n = snprintf(hdr, sizeof hdr,
			 "{\"%sa\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
			 "\"%sb\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[16,28]},"
			 "\"__metadata__\":{\"format\":\"pt\"}}",
			 prefix, prefix);
	uint64_t len = (uint64_t)n;

	for (int i = 0; i < 8; i++)
		buf[i] = (char)(len >> 8 * i);
	memcpy(buf + 8, hdr, (size_t)n);
	for (int i = 0; i < 28; i++)
		buf[8 + n + i] = (char)i;
	fuzz_write(path, buf, 8 + (size_t)n + 28);
}

static void
setup(void)
{
	const char *tmp = fuzz_tmpdir();
	char dir[1024], path[1024];

	shard(fuzz_path(path, sizeof path, tmp, "outside.safetensors"), "out.");
	mkdir(fuzz_path(dir, sizeof dir, tmp, "m"), 0700);
	shard(fuzz_path(path, sizeof path, dir, "model-00001-of-00002.safetensors"), "x.");
	shard(fuzz_path(path, sizeof path, dir, "model-00002-of-00002.safetensors"), "y.");
	if (symlink("../outside.safetensors", fuzz_path(path, sizeof path, dir, "link.safetensors")))
		perror("symlink");
	fuzz_path(single, sizeof single, dir, "model.safetensors");
	fuzz_path(index_path, sizeof index_path, dir, "model.safetensors.index.json");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	StFile *f;
	Diag d;

	if (!single[0])
		setup();
	path = size && data[0] == '{' ? index_path : single;
	fuzz_write(path, data, size);
	fuzz_diag(&d);
	if (!(f = st_open(path, &d)))
		return 0;
	for (int i = 0; i < st_count(f); i++) {
		const StTensor *t = st_get(f, i);
		void *buf;
		FUZZ_CHECK(t && st_find(f, t->name) == t, "tensor %d is not found by name", i);
		/* the path as the reader names it, through any link */
		char *real = realpath(st_shard_path(f, t), NULL);
		FUZZ_CHECK(!real || !strstr(real, "outside"),
			   "a shard outside the folder was opened: %s", st_shard_path(f, t));
		free(real);
		if (t->size > ((uint64_t)1 << 28))
			continue;
		buf = xmalloc((size_t)t->size + 1);
		st_read(f, t, buf, &d);
		free(buf);
	}
	st_metadata(f, "format");
	st_close(f);
	return 0;
}
