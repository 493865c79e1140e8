/* tests/minitrain/main.c - minitrain's command line.
 *
 *   minitrain --net NAME --batch N --image PIXELS --iters K
 *             --alloc per-tensor|network|caching --seed S [--json] ...
 *
 * Scripts and checks depend on these names and on the output lines
 * ("iter <i> loss <f> time <ms> ms", "checksum: 0x<16 hex>",
 * "peak: <N> MiB", a final JSON line with --json).  A bad argument is one
 * line naming the option and the value, exit code 2.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: minitrain --net NAME [options]\n"
		"Trains a network on synthetic data through cuDNN/cuBLAS/cudart, the way a\n"
		"framework does, and prints per-iteration loss, a weight checksum and the\n"
		"peak device memory it allocated.\n\n"
		"options:\n"
		"  --net NAME                 network (required, see below)\n"
		"  --batch N                  mini-batch size (default 4)\n"
		"  --image PIXELS             square input image size (default 32)\n"
		"  --iters K                  training iterations (default 5)\n"
		"  --alloc STYLE              per-tensor | network | caching (default per-tensor)\n"
		"  --seed S                   seed of weights and data (default 1)\n"
		"  --json                     print a JSON summary as the last line\n"
		"  --conv-api API             legacy | graph (cuDNN backend API) (default legacy)\n"
		"  --algo-mode MODE           get (heuristics) | find (benchmark) |\n"
		"                             find-ex (benchmark on scratch buffers) (default get)\n"
		"  --fc-api API               gemm (cublasSgemm) | lt (cublasLtMatmul) (default gemm)\n"
		"  --batch-change K:N         use batch N from iteration K on\n"
		"  --eval-every K             forward-only inference pass every K iterations\n"
		"  --threads N                1, or 2: backward on a second host thread, as\n"
		"                             PyTorch's autograd engine runs it (default 1)\n"
		"  --lr F                     SGD learning rate (default 0.001)\n"
		"  --momentum F               SGD momentum (default 0.9)\n"
		"  --weight-decay F           weight decay (default 0.0005)\n"
		"  --optim FORM               fused (one SGD kernel per parameter) | foreach\n"
		"                             (PyTorch's _foreach_add_ over tensor lists)\n"
		"                             (default fused)\n"
		"  --classes C                number of classes (default 10)\n"
		"  --mem-report               print the network-wide memory breakdown\n"
		"  --print-net                print the layer table\n"
		"  --help                     this text\n\n"
		"networks:\n%s\n"
		"exit codes: 0 ok, 1 CUDA/cuDNN/cuBLAS error, 2 bad argument, 3 out of memory\n",
		mt_net_names_help);
}

static void bad(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "minitrain: error: %s: bad value '%s'; expected %s\n", opt,
		val ? val : "(missing)", want);
	exit(2);
}

static long parse_int(const char *opt, const char *v, long lo, long hi)
{
	char *end;
	long x;

	if (!v)
		bad(opt, v, "an integer");
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi) {
		char want[96];

		snprintf(want, sizeof(want), "an integer in [%ld, %ld]", lo, hi);
		bad(opt, v, want);
	}
	return x;
}

static float parse_float(const char *opt, const char *v, double lo, double hi)
{
	char *end;
	double x;

	if (!v)
		bad(opt, v, "a number");
	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || *end || !(x >= lo && x <= hi)) {
		char want[96];

		snprintf(want, sizeof(want), "a number in [%g, %g]", lo, hi);
		bad(opt, v, want);
	}
	return (float)x;
}

int main(int argc, char **argv)
{
	mt_opts_t o = {
		.net = NULL, .batch = 4, .image = 32, .iters = 5, .classes = 10,
		.seed = 1, .alloc = MT_ALLOC_PER_TENSOR, .conv_api = MT_CONV_LEGACY,
		.algo_mode = MT_ALGO_GET, .change_iter = -1, .lr = 0.001f,
		.momentum = 0.9f, .weight_decay = 0.0005f, .threads = 1,
	};
	mt_net_t net;
	char err[256];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			o.json = true;
			continue;
		} else if (!strcmp(a, "--mem-report")) {
			o.mem_report = true;
			continue;
		} else if (!strcmp(a, "--print-net")) {
			o.print_net = true;
			continue;
		}
		if (!strcmp(a, "--net")) {
			if (!v || !*v)
				bad(a, v, "a network name (see --help)");
			o.net = v;
		} else if (!strcmp(a, "--batch")) {
			o.batch = (int)parse_int(a, v, 1, 1 << 20);
		} else if (!strcmp(a, "--image")) {
			o.image = (int)parse_int(a, v, 1, 1 << 16);
		} else if (!strcmp(a, "--iters")) {
			o.iters = (int)parse_int(a, v, 0, 1 << 24);
		} else if (!strcmp(a, "--classes")) {
			o.classes = (int)parse_int(a, v, 2, 1 << 20);
		} else if (!strcmp(a, "--seed")) {
			char *end;

			if (!v)
				bad(a, v, "an unsigned integer");
			errno = 0;
			o.seed = strtoull(v, &end, 0);
			if (errno || end == v || *end || *v == '-')
				bad(a, v, "an unsigned integer");
		} else if (!strcmp(a, "--alloc")) {
			if (v && !strcmp(v, "per-tensor"))
				o.alloc = MT_ALLOC_PER_TENSOR;
			else if (v && !strcmp(v, "network"))
				o.alloc = MT_ALLOC_NETWORK;
			else if (v && !strcmp(v, "caching"))
				o.alloc = MT_ALLOC_CACHING;
			else
				bad(a, v, "per-tensor, network or caching");
		} else if (!strcmp(a, "--optim")) {
			if (v && !strcmp(v, "fused"))
				o.optim = MT_OPTIM_FUSED;
			else if (v && !strcmp(v, "foreach"))
				o.optim = MT_OPTIM_FOREACH;
			else
				bad(a, v, "fused or foreach");
		} else if (!strcmp(a, "--conv-api")) {
			if (v && !strcmp(v, "legacy"))
				o.conv_api = MT_CONV_LEGACY;
			else if (v && !strcmp(v, "graph"))
				o.conv_api = MT_CONV_GRAPH;
			else
				bad(a, v, "legacy or graph");
		} else if (!strcmp(a, "--algo-mode")) {
			if (v && !strcmp(v, "get"))
				o.algo_mode = MT_ALGO_GET;
			else if (v && !strcmp(v, "find"))
				o.algo_mode = MT_ALGO_FIND;
			else if (v && !strcmp(v, "find-ex"))
				o.algo_mode = MT_ALGO_FIND_EX;
			else
				bad(a, v, "get, find or find-ex");
		} else if (!strcmp(a, "--fc-api")) {
			if (v && !strcmp(v, "gemm"))
				o.fc_api = MT_FC_GEMM;
			else if (v && !strcmp(v, "lt"))
				o.fc_api = MT_FC_LT;
			else
				bad(a, v, "gemm or lt");
		} else if (!strcmp(a, "--batch-change")) {
			char *end;
			long k = -1, n = 0;

			if (v) {
				errno = 0;
				k = strtol(v, &end, 10);
				if (errno || end == v || *end != ':')
					k = -1;
				else
					n = strtol(end + 1, &end, 10);
				if (errno || *end)
					k = -1;
			}
			if (k < 0 || k > (1 << 24) || n < 1 || n > (1 << 20))
				bad(a, v, "K:N with iteration K >= 0 and batch N >= 1, e.g. 3:8");
			o.change_iter = (int)k;
			o.change_batch = (int)n;
		} else if (!strcmp(a, "--threads")) {
			o.threads = (int)parse_int(a, v, 1, 2);
		} else if (!strcmp(a, "--eval-every")) {
			o.eval_every = (int)parse_int(a, v, 1, 1 << 24);
		} else if (!strcmp(a, "--lr")) {
			o.lr = parse_float(a, v, 0.0, 100.0);
		} else if (!strcmp(a, "--momentum")) {
			o.momentum = parse_float(a, v, 0.0, 1.0);
		} else if (!strcmp(a, "--weight-decay")) {
			o.weight_decay = parse_float(a, v, 0.0, 1.0);
		} else {
			fprintf(stderr, "minitrain: error: unknown option '%s'; see --help\n", a);
			return 2;
		}
		i++;
	}
	if (!o.net) {
		fprintf(stderr, "minitrain: error: --net: missing; see --help for the networks\n");
		return 2;
	}
	if (mt_net_build(&net, o.net, o.image, o.classes, err, sizeof(err))) {
		fprintf(stderr, "minitrain: error: %s\n", err);
		return 2;
	}
	if (o.print_net)
		mt_net_print(&net);
	int rc = mt_train(&net, &o);
	mt_net_free(&net);
	return rc;
}
