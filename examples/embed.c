/*
 * embed.c — embedding the moec runtime in a C program: the one header
 * (moert.h), the one library (libmoert.so, or pkg-config moert), no CUDA
 * headers or toolkit.
 *
 *	embed BUNDLE [--tokens=T] [--bind NAME=FILE]...
 *
 * It does what a server does with a stack of layers:
 *   1. opens GPU 0 and loads the bundle twice, as two "layers" whose
 *      weights named by --bind come from memory the program owns (FILE's raw
 *      bytes, uploaded once: a framework's tensors in real life) and which
 *      share one workspace — no arena of their own;
 *   2. runs layer 1 then layer 2 on a stream of its own (layer 2 reads layer
 *      1's output when the shapes allow it, as decoder layers do);
 *   3. captures the same two runs as a CUDA graph of its own, replays it
 *      twice, and checks the outputs are byte-identical to the plain run.
 * Inputs are a fixed pattern (f32, bf16, f16 and i32; zeros otherwise).
 * Exit 0 ok, 1 a failure (message from moert_last_error), 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moert.h>

#define MAXT 16

static int
fail(const char *what, moert_status s)
{
	fprintf(stderr, "embed: %s: %s: %s\n", what, moert_status_name(s), moert_last_error());
	return 1;
}

#define TRY(what, call)                                                        \
	do {                                                                   \
		moert_status s_ = (call);                                      \
		if (s_ != MOERT_OK)                                            \
			return fail(what, s_);                                 \
	} while (0)

/* The whole file, malloc'd. */
static unsigned char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	*len = b ? (size_t)n : 0;
	fclose(f);
	return b;
}

/* A recognisable pattern in the tensor's dtype: k/4 for k = -3..3 (exact in
 * f32, bf16 and f16), 1..3 for i32, zeros otherwise. */
static void
pattern(unsigned char *buf, const moert_tensor_info *t)
{
	static const uint16_t half[4] = {0, 0x3400, 0x3800, 0x3A00};	/* 0, .25, .5, .75 */
	size_t n = 1;

	for (int i = 0; i < t->rank; i++)
		n *= (size_t)t->dim[i];
	memset(buf, 0, t->bytes);
	for (size_t i = 0; i < n; i++) {
		int k = (int)(i % 7) - 3;
		float v = (float)k * 0.25f;
		uint32_t u;
		uint16_t h = (uint16_t)(half[k < 0 ? -k : k] | (k < 0 ? 0x8000 : 0));
		memcpy(&u, &v, 4);
		if (!strcmp(t->dtype, "f32"))
			memcpy(buf + 4 * i, &v, 4);
		else if (!strcmp(t->dtype, "bf16"))
			buf[2 * i] = (unsigned char)(u >> 16), buf[2 * i + 1] = (unsigned char)(u >> 24);
		else if (!strcmp(t->dtype, "f16"))
			buf[2 * i] = (unsigned char)h, buf[2 * i + 1] = (unsigned char)(h >> 8);
		else if (!strcmp(t->dtype, "i32"))
			((int32_t *)buf)[i] = (int32_t)(i % 3) + 1;
	}
}

typedef struct {
	moert_program *p;
	uint64_t in[8], out[8];
	moert_tensor_info oi[8];
} Layer;

static void
print_output(const moert_tensor_info *t, const unsigned char *b)
{
	printf("  %s %s[", t->name, t->dtype);
	for (int i = 0; i < t->rank; i++)
		printf("%s%lld", i ? "," : "", (long long)t->dim[i]);
	printf("]:");
	for (int i = 0; i < 4 && (size_t)i * 4 < t->bytes; i++) {
		if (!strcmp(t->dtype, "f32"))
			printf(" %g", (double)((const float *)b)[i]);
		else if (!strcmp(t->dtype, "i32"))
			printf(" %d", ((const int32_t *)b)[i]);
		else
			printf(" 0x%02x%02x", b[2 * i + 1], b[2 * i]);
	}
	printf(" ...\n");
}

int
main(int argc, char **argv)
{
	const char *path = NULL, *bind[16];
	int nbind = 0, T = 4;
	moert_device *dev;
	size_t len;
	unsigned char *bundle, *host[2][8];
	uint64_t ws, wbuf[16] = {0};
	Layer L[2];
	void *stream, *graph;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--tokens=", 9))
			T = atoi(argv[i] + 9);
		else if (!strcmp(argv[i], "--bind") && i + 1 < argc && nbind < 16)
			bind[nbind++] = argv[++i];
		else if (!path && argv[i][0] != '-')
			path = argv[i];
		else
			path = NULL, i = argc;
	}
	if (!path || T < 1 || T > MAXT) {
		fprintf(stderr, "usage: embed BUNDLE [--tokens=1..%d] [--bind NAME=FILE]...\n", MAXT);
		return 2;
	}
	if (!(bundle = slurp(path, &len))) {
		fprintf(stderr, "embed: cannot read %s\n", path);
		return 2;
	}
	TRY("opening GPU 0", moert_open(0, &dev));
	printf("device: %s\n", moert_device_name(dev));

	/* 1. two layers: bound weights, one workspace */
	for (int l = 0; l < 2; l++)
		TRY("reading the bundle", moert_load_host(bundle, len, &L[l].p));
	for (int b = 0; b < nbind; b++) {
		char name[256];
		const char *eq = strchr(bind[b], '=');
		size_t n;
		unsigned char *bytes;
		moert_tensor_info wi;
		int w = 0;
		if (!eq || (size_t)(eq - bind[b]) >= sizeof name)
			return fprintf(stderr, "embed: --bind NAME=FILE\n"), 2;
		snprintf(name, sizeof name, "%.*s", (int)(eq - bind[b]), bind[b]);
		while (w < moert_num_weights(L[0].p) &&
		       (moert_weight_info(L[0].p, w, &wi) || strcmp(wi.name, name)))
			w++;
		if (w == moert_num_weights(L[0].p))
			return fprintf(stderr, "embed: no weight '%s'\n", name), 2;
		if (!(bytes = slurp(eq + 1, &n)) || n != wi.bytes)
			return fprintf(stderr, "embed: %s: want %zu bytes\n", eq + 1, wi.bytes), 2;
		TRY("allocating a weight", moert_malloc(dev, n, &wbuf[b]));
		TRY("uploading a weight", moert_memcpy_htod(dev, wbuf[b], bytes, n));
		free(bytes);
		for (int l = 0; l < 2; l++)	/* both layers read the one copy */
			TRY(name, moert_bind_weight(L[l].p, name, wbuf[b], wi.dtype, wi.rank, wi.dim));
		printf("bound %s %s (%zu bytes)\n", name, wi.dtype, wi.bytes);
	}
	uint64_t wsize = moert_workspace_size(L[0].p);
	TRY("allocating the workspace", moert_malloc(dev, wsize, &ws));
	for (int l = 0; l < 2; l++) {
		TRY("workspace", moert_set_workspace(L[l].p, ws, wsize));
		TRY("loading", moert_load_device(dev, L[l].p));
	}
	printf("loaded twice (%s), one workspace of %llu bytes\n", moert_code_section(L[0].p),
	       (unsigned long long)wsize);

	/* buffers: layer 2 reads layer 1's output 0 when it fits its input 0 */
	int nin = moert_num_inputs(L[0].p), nout = moert_num_outputs(L[0].p);
	if (nin > 8 || nout > 8)
		return fprintf(stderr, "embed: at most 8 inputs and outputs\n"), 2;
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < nout; i++) {
			TRY("output info", moert_output_info(L[l].p, i, T, &L[l].oi[i]));
			TRY("allocating", moert_malloc(dev, L[l].oi[i].bytes, &L[l].out[i]));
		}
	for (int i = 0; i < nin; i++) {
		moert_tensor_info ti;
		unsigned char *buf;
		TRY("input info", moert_input_info(L[0].p, i, T, &ti));
		TRY("allocating", moert_malloc(dev, ti.bytes, &L[0].in[i]));
		if (!(buf = malloc(ti.bytes)))
			return 1;
		pattern(buf, &ti);
		TRY("uploading an input", moert_memcpy_htod(dev, L[0].in[i], buf, ti.bytes));
		free(buf);
		L[1].in[i] = L[0].in[i];
		if (i == 0 && nout && !strcmp(ti.dtype, L[0].oi[0].dtype) && ti.bytes == L[0].oi[0].bytes)
			L[1].in[0] = L[0].out[0];
	}
	printf("layer 2 reads %s\n", L[1].in[0] == L[0].out[0] ? "layer 1's output" : "the same inputs");

	/* 2. a plain run on our stream */
	TRY("creating a stream", moert_stream_create(dev, &stream));
	for (int l = 0; l < 2; l++)
		TRY("running", moert_run(L[l].p, T, L[l].in, L[l].out, stream, 0));
	TRY("synchronising", moert_stream_sync(dev, stream));
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < nout; i++) {
			host[l][i] = malloc(L[l].oi[i].bytes);
			TRY("reading an output", moert_memcpy_dtoh(dev, host[l][i], L[l].out[i],
								  L[l].oi[i].bytes));
		}
	for (int l = 0; l < 2; l++) {
		printf("layer %d:\n", l + 1);
		for (int i = 0; i < nout; i++)
			print_output(&L[l].oi[i], host[l][i]);
	}

	/* 3. the same two runs as a graph of ours, replayed twice */
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < nout; i++)
			TRY("poisoning", moert_memset(dev, L[l].out[i], 0xFF, L[l].oi[i].bytes));
	TRY("capturing", moert_capture_begin(dev, stream));
	for (int l = 0; l < 2; l++)
		TRY("running in the capture", moert_run_ws(L[l].p, T, L[l].in, L[l].out, ws, stream));
	TRY("capturing", moert_capture_end(dev, stream, &graph));
	for (int r = 0; r < 2; r++)
		TRY("replaying", moert_graph_launch(dev, graph, stream));
	TRY("synchronising", moert_stream_sync(dev, stream));
	int same = 1;
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < nout; i++) {
			unsigned char *b = malloc(L[l].oi[i].bytes);
			TRY("reading an output", moert_memcpy_dtoh(dev, b, L[l].out[i], L[l].oi[i].bytes));
			same &= !memcmp(b, host[l][i], L[l].oi[i].bytes);
			free(b);
			free(host[l][i]);
		}
	printf("graph replay %s the plain run\n", same ? "matches" : "DIFFERS FROM");

	moert_graph_destroy(dev, graph);
	moert_stream_destroy(dev, stream);
	for (int l = 0; l < 2; l++) {
		moert_unload(L[l].p);
		for (int i = 0; i < nout; i++)
			moert_free(dev, L[l].out[i]);
	}
	for (int i = 0; i < nin; i++)
		moert_free(dev, L[0].in[i]);
	for (int b = 0; b < nbind; b++)
		moert_free(dev, wbuf[b]);
	moert_free(dev, ws);
	moert_close(dev);
	free(bundle);
	return same ? 0 : 1;
}
