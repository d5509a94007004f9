/*
 * peer_starpu runs the peer benchmark's task stream through StarPU 1.3:
 * one codelet per op (matmul; and an empty one for the per-task overhead),
 * each with the two CPU implementations of ../peerkern.c in cpu_funcs, and
 * a history-based performance model, so that dmda calibrates each
 * (size, implementation) and then picks the one that seems fastest.
 *
 * Usage: peer_starpu STREAM EMPTY_TASKS DELAYS
 * DELAYS holds one integer per shape of STREAM, in its order: the ns the
 * drifted implementation busy-waits after its kernel from the drift task
 * on (cmd/peer calibrates them and hands the same to adaptsched).
 * Run it as StarPU's users do: STARPU_SCHED=dmda, STARPU_CALIBRATE=1, a
 * fresh STARPU_HOME, STARPU_NCPU=1 (make peer and cmd/peer set these).
 *
 * It prints "key value" lines that cmd/peer reads:
 *   total_ns, half1_ns, half2_ns    wall time of the stream and its halves
 *                                   (the first ends when its last task does)
 *   kernel1_ns, kernel2_ns          time inside the implementations
 *   chosen HALF IMPL COUNT          tasks per half and implementation
 *   shape S HALF IMPL COUNT NS      the same per shape, with the kernel ns
 *   empty_ns                        ns per empty task, submit + wait
 *   empty_async_ns                  ns per empty task, all submitted, then
 *                                   waited for together
 */
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../peerkern.h"

struct shape {
	int m, k, n;
	float *a, *b, *c;
	starpu_data_handle_t ha, hb, hc;
};

static int drift_impl = -1;    /* the implementation the drift slows */
static double drift_factor = 1; /* how much (the delays embody it) */
static int drift_from;          /* the first drifted task */
static int64_t *delays;         /* per shape: the drift's busy-wait, ns */
static int *task_shape;         /* per task: its shape */
static int64_t *ends;           /* per task: when its implementation returned */
static int64_t *kerns;          /* per task: ns inside peer_exec */
static int *chosen;             /* per task: the implementation that ran it */

static void die(const char *what) {
	fprintf(stderr, "peer_starpu: %s\n", what);
	exit(1);
}

static void run(int impl, void *buffers[], void *cl_arg) {
	int idx;
	starpu_codelet_unpack_args(cl_arg, &idx);
	const float *a = (const float *)STARPU_MATRIX_GET_PTR(buffers[0]);
	const float *b = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
	float *c = (float *)STARPU_MATRIX_GET_PTR(buffers[2]);
	int m = STARPU_MATRIX_GET_NY(buffers[0]);
	int k = STARPU_MATRIX_GET_NX(buffers[0]);
	int n = STARPU_MATRIX_GET_NX(buffers[2]);
	int64_t extra = impl == drift_impl && idx >= drift_from ? delays[task_shape[idx]] : 0;
	kerns[idx] = peer_exec(impl, extra, m, n, k, a, b, c);
	chosen[idx] = impl;
	ends[idx] = peer_now_ns();
}

static void gemm_blas(void *buffers[], void *cl_arg) { run(PEER_BLAS, buffers, cl_arg); }
static void gemm_blocked(void *buffers[], void *cl_arg) { run(PEER_BLOCKED, buffers, cl_arg); }

static struct starpu_perfmodel gemm_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "adaptsched_peer_gemm",
};

static struct starpu_codelet gemm_cl = {
	.cpu_funcs = {gemm_blas, gemm_blocked},
	.cpu_funcs_name = {"gemm_blas", "gemm_blocked"},
	.nbuffers = 3,
	.modes = {STARPU_R, STARPU_R, STARPU_W},
	.model = &gemm_model,
	.name = "gemm",
};

static void empty_a(void *buffers[], void *cl_arg) {
	(void)buffers, (void)cl_arg;
	peer_exec(PEER_EMPTY, 0, 0, 0, 0, NULL, NULL, NULL);
}
static void empty_b(void *buffers[], void *cl_arg) {
	(void)buffers, (void)cl_arg;
	peer_exec(PEER_EMPTY, 0, 0, 0, 0, NULL, NULL, NULL);
}

static struct starpu_perfmodel empty_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "adaptsched_peer_empty",
};

static struct starpu_codelet empty_cl = {
	.cpu_funcs = {empty_a, empty_b},
	.cpu_funcs_name = {"empty_a", "empty_b"},
	.nbuffers = 0,
	.model = &empty_model,
	.name = "empty",
};

/* read_stream reads the format of bench/peer (stream.go documents it). */
static int read_stream(const char *path, struct shape **shapes, int *nshapes, int **tasks) {
	FILE *f = fopen(path, "r");
	if (!f)
		die("cannot open the stream");
	char word[64], impl[64];
	int version, cap = 0, ntasks = -1;
	if (fscanf(f, "%63s %d", word, &version) != 2 || strcmp(word, "adaptsched-peer-stream") || version != 1)
		die("not an adaptsched-peer-stream version 1");
	*nshapes = 0;
	*shapes = NULL;
	while (ntasks < 0 && fscanf(f, "%63s", word) == 1) {
		if (!strcmp(word, "drift")) {
			if (fscanf(f, "%63s %lf %d", impl, &drift_factor, &drift_from) != 3)
				die("bad drift line");
			drift_impl = !strcmp(impl, "blas") ? PEER_BLAS : !strcmp(impl, "blocked") ? PEER_BLOCKED : -1;
			if (drift_impl < 0)
				die("drift names no implementation");
		} else if (!strcmp(word, "shape")) {
			if (*nshapes == cap) {
				cap = cap ? 2 * cap : 16;
				*shapes = realloc(*shapes, cap * sizeof **shapes);
			}
			struct shape *s = &(*shapes)[(*nshapes)++];
			memset(s, 0, sizeof *s);
			if (fscanf(f, "%d %d %d", &s->m, &s->k, &s->n) != 3 || s->m <= 0 || s->k <= 0 || s->n <= 0)
				die("bad shape line");
		} else if (!strcmp(word, "tasks")) {
			if (fscanf(f, "%d", &ntasks) != 1 || ntasks <= 0)
				die("bad tasks line");
		} else if (word[0] == '#') {
			int ch;
			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
		} else {
			die("unknown line");
		}
	}
	if (ntasks < 0)
		die("no tasks line");
	*tasks = malloc(ntasks * sizeof **tasks);
	for (int i = 0; i < ntasks; i++)
		if (fscanf(f, "%d", &(*tasks)[i]) != 1 || (*tasks)[i] < 0 || (*tasks)[i] >= *nshapes)
			die("bad task");
	fclose(f);
	return ntasks;
}

static float *filled(size_t n) {
	float *p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
	return p;
}

int main(int argc, char **argv) {
	if (argc != 4)
		die("usage: peer_starpu STREAM EMPTY_TASKS DELAYS");
	int nempty = atoi(argv[2]);
	if (nempty <= 0)
		die("EMPTY_TASKS must be positive");
	char err[512];
	if (peer_load_blas(err, sizeof err))
		die(err);
	struct shape *shapes;
	int nshapes, *tasks;
	int ntasks = read_stream(argv[1], &shapes, &nshapes, &tasks);
	task_shape = tasks;
	delays = calloc(nshapes, sizeof *delays);
	FILE *df = fopen(argv[3], "r");
	if (!df)
		die("cannot open the delays");
	for (int i = 0; i < nshapes; i++) {
		long long d;
		if (fscanf(df, "%lld", &d) != 1 || d < 0)
			die("bad delays: want one ns count per shape");
		delays[i] = d;
	}
	fclose(df);
	ends = calloc(ntasks, sizeof *ends);
	kerns = calloc(ntasks, sizeof *kerns);
	chosen = calloc(ntasks, sizeof *chosen);

	struct starpu_conf conf;
	starpu_conf_init(&conf);
	if (starpu_init(&conf) != 0)
		die("starpu_init failed");
	for (int i = 0; i < nshapes; i++) {
		struct shape *s = &shapes[i];
		s->a = filled((size_t)s->m * s->k);
		s->b = filled((size_t)s->k * s->n);
		s->c = filled((size_t)s->m * s->n);
		starpu_matrix_data_register(&s->ha, STARPU_MAIN_RAM, (uintptr_t)s->a, s->k, s->k, s->m, sizeof(float));
		starpu_matrix_data_register(&s->hb, STARPU_MAIN_RAM, (uintptr_t)s->b, s->n, s->n, s->k, sizeof(float));
		starpu_matrix_data_register(&s->hc, STARPU_MAIN_RAM, (uintptr_t)s->c, s->n, s->n, s->m, sizeof(float));
	}

	int64_t start = peer_now_ns();
	for (int i = 0; i < ntasks; i++) {
		struct shape *s = &shapes[tasks[i]];
		int ret = starpu_task_insert(&gemm_cl, STARPU_R, s->ha, STARPU_R, s->hb, STARPU_W, s->hc,
		                             STARPU_VALUE, &i, sizeof(i), 0);
		if (ret != 0)
			die("starpu_task_insert failed");
	}
	starpu_task_wait_for_all();
	/* Tasks without a data dependency run in any order: the first half
	 * ends when the last of its tasks does. */
	int half = drift_from > 0 && drift_from < ntasks ? drift_from : ntasks / 2;
	int64_t end1 = start, end = start, k1 = 0, k2 = 0;
	long count[2][PEER_IMPLS] = {{0}};
	for (int i = 0; i < ntasks; i++) {
		int h = i >= half;
		if (!h && ends[i] > end1)
			end1 = ends[i];
		if (ends[i] > end)
			end = ends[i];
		if (h)
			k2 += kerns[i];
		else
			k1 += kerns[i];
		count[h][chosen[i]]++;
	}
	printf("tasks %d\n", ntasks);
	printf("total_ns %lld\n", (long long)(end - start));
	printf("half1_ns %lld\n", (long long)(end1 - start));
	printf("half2_ns %lld\n", (long long)(end - end1));
	printf("kernel1_ns %lld\nkernel2_ns %lld\n", (long long)k1, (long long)k2);
	for (int h = 0; h < 2; h++)
		for (int j = 0; j < PEER_IMPLS; j++)
			printf("chosen %d %s %ld\n", h, j == PEER_BLAS ? "blas" : "blocked", count[h][j]);
	for (int s = 0; s < nshapes; s++)
		for (int h = 0; h < 2; h++)
			for (int j = 0; j < PEER_IMPLS; j++) {
				long n = 0;
				int64_t ns = 0;
				for (int i = h ? half : 0; i < (h ? ntasks : half); i++)
					if (tasks[i] == s && chosen[i] == j)
						n++, ns += kerns[i];
				printf("shape %d %d %s %ld %lld\n", s, h, j == PEER_BLAS ? "blas" : "blocked", n, (long long)ns);
			}

	/* The per-task overhead: empty tasks, each submitted and waited for. */
	int64_t t0 = peer_now_ns();
	for (int i = 0; i < nempty; i++)
		if (starpu_task_insert(&empty_cl, STARPU_TASK_SYNCHRONOUS, 1, 0) != 0)
			die("starpu_task_insert (empty) failed");
	printf("empty_ns %.1f\n", (double)(peer_now_ns() - t0) / nempty);
	/* And submitted all at once, waited for together: the throughput. */
	t0 = peer_now_ns();
	for (int i = 0; i < nempty; i++)
		if (starpu_task_insert(&empty_cl, 0) != 0)
			die("starpu_task_insert (empty) failed");
	starpu_task_wait_for_all();
	printf("empty_async_ns %.1f\n", (double)(peer_now_ns() - t0) / nempty);

	for (int i = 0; i < nshapes; i++) {
		starpu_data_unregister(shapes[i].ha);
		starpu_data_unregister(shapes[i].hb);
		starpu_data_unregister(shapes[i].hc);
	}
	starpu_shutdown();
	return 0;
}
