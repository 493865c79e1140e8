/* tests/minitrain/net.c - layer graphs of the networks minitrain trains.
 *
 * A network is a list of nodes in topological (issue) order; each node
 * produces one output feature map and names its inputs.  Builders keep the
 * shapes valid at any image size: a pooling window larger than its (padded)
 * input is clamped, so vgg16 at 32x32 ends its five 2x2 pools at 1x1 and the
 * first FC layer follows the flattened size.  A convolution that does not
 * fit its input is an error ("image too small").
 *
 * After building, mt_net_build decides which ReLU / add run in place (as
 * Torch and Caffe do, vDNN §II-B footnote 1): when their first input has
 * no other consumer and its producer's backward does not need its output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

const char *const mt_net_names_help =
	"  alexnet            5 conv + 3 FC (Krizhevsky's one-tower variant)\n"
	"  vgg16              13 conv + 3 FC (VGG configuration D)\n"
	"  vgg19              16 conv + 3 FC (configuration E; vDNN's \"VGG-16\")\n"
	"  vgg116 vgg216 vgg316 vgg416\n"
	"                     vDNN IV-C very deep VGGs: the 16-conv base plus 20\n"
	"                     3x3 convs per group for every 100\n"
	"  resnet resnet10 resnet18 resnet34 resnet50 resnet101 resnet152\n"
	"                     residual nets, bn, identity joins by add-tensor\n"
	"                     (50+: bottleneck blocks); resnet = resnet18\n"
	"  inception          GoogLeNet-style fork/join, concat joins (9 modules)\n"
	"  densenet           DenseNet-121 (dense blocks 6-12-24-16, growth 32)\n"
	"  random:SEED        a seeded random DAG of conv/relu/pool/bn/add/concat\n";

static char g_err[160];

static void set_err(const char *msg, const mt_node_t *nd)
{
	if (!g_err[0])
		snprintf(g_err, sizeof(g_err), "%s at layer %s (%dx%d input)", msg,
			 nd ? nd->name : "?", nd ? nd->h : 0, nd ? nd->w : 0);
}

static int add_param(mt_net_t *net, size_t count, int fan_in, float init,
		     bool trainable)
{
	if (net->nparams == net->pcap) {
		net->pcap = net->pcap ? 2 * net->pcap : 64;
		net->params = realloc(net->params, net->pcap * sizeof(*net->params));
		if (!net->params)
			mt_die("host out of memory");
	}
	mt_param_t *p = &net->params[net->nparams];
	memset(p, 0, sizeof(*p));
	p->count = count;
	p->fan_in = fan_in;
	p->init = init;
	p->trainable = trainable;
	return net->nparams++;
}

static int add_node(mt_net_t *net, mt_op_t op, const int *in, int nin,
		    const char *prefix)
{
	static const char *const opname[] = {
		"input", "conv", "relu", "maxpool", "avgpool", "bn", "fc",
		"add", "concat", "loss",
	};
	if (net->n == net->cap) {
		net->cap = net->cap ? 2 * net->cap : 64;
		net->nodes = realloc(net->nodes, net->cap * sizeof(*net->nodes));
		if (!net->nodes)
			mt_die("host out of memory");
	}
	int id = net->n++;
	mt_node_t *nd = &net->nodes[id];
	memset(nd, 0, sizeof(*nd));
	nd->op = op;
	nd->buf = id;
	nd->in = malloc((nin ? nin : 1) * sizeof(int));
	if (!nd->in)
		mt_die("host out of memory");
	if (nin)
		memcpy(nd->in, in, nin * sizeof(int));
	nd->nin = nin;
	nd->p0 = net->nparams;
	snprintf(nd->name, sizeof(nd->name), "%s%s%d", prefix ? prefix : "",
		 opname[op], id);
	if (nin) {
		nd->c = net->nodes[in[0]].c;
		nd->h = net->nodes[in[0]].h;
		nd->w = net->nodes[in[0]].w;
	}
	return id;
}

static int input(mt_net_t *net)
{
	int id = add_node(net, MT_INPUT, NULL, 0, NULL);

	net->nodes[id].c = 3;
	net->nodes[id].h = net->nodes[id].w = net->image;
	return id;
}

static int conv_b(mt_net_t *net, int x, int out_c, int k, int stride, int pad,
		  bool bias)
{
	int id = add_node(net, MT_CONV, &x, 1, NULL);
	mt_node_t *nd = &net->nodes[id];
	int in_c = nd->c, h = nd->h;

	nd->k = k;
	nd->stride = stride;
	nd->pad = pad;
	nd->c = out_c;
	if (h + 2 * pad < k) {
		set_err("image too small: convolution window larger than its input", nd);
		nd->h = nd->w = 1;
	} else {
		nd->h = nd->w = (h + 2 * pad - k) / stride + 1;
	}
	add_param(net, (size_t)out_c * in_c * k * k, in_c * k * k, 0, true);
	if (bias)
		add_param(net, out_c, 0, 0.0f, true);
	nd->np = bias ? 2 : 1;
	return id;
}

static int conv(mt_net_t *net, int x, int out_c, int k, int stride, int pad)
{
	return conv_b(net, x, out_c, k, stride, pad, true);
}

static int relu(mt_net_t *net, int x)
{
	return add_node(net, MT_RELU, &x, 1, NULL);
}

static int pool(mt_net_t *net, int x, bool max, int k, int stride, int pad)
{
	int id = add_node(net, max ? MT_MAXPOOL : MT_AVGPOOL, &x, 1, NULL);
	mt_node_t *nd = &net->nodes[id];
	int h = nd->h;

	/* Clamp the window to the padded input so small images stay valid. */
	if (k > h + 2 * pad)
		k = h + 2 * pad;
	if (pad >= k)
		pad = k - 1;
	nd->k = k;
	nd->stride = stride;
	nd->pad = pad;
	nd->h = nd->w = (h + 2 * pad - k) / stride + 1;
	return id;
}

static int global_avg(mt_net_t *net, int x)
{
	int h = net->nodes[x].h;

	return h > 1 ? pool(net, x, false, h, h, 0) : x;
}

static int bn(mt_net_t *net, int x)
{
	int id = add_node(net, MT_BN, &x, 1, NULL);
	int c = net->nodes[id].c;

	add_param(net, c, 0, 1.0f, true);    /* scale */
	add_param(net, c, 0, 0.0f, true);    /* shift */
	add_param(net, c, 0, 0.0f, false);   /* running mean */
	add_param(net, c, 0, 1.0f, false);   /* running variance */
	net->nodes[id].np = 4;
	return id;
}

static int fc(mt_net_t *net, int x, int out)
{
	int id = add_node(net, MT_FC, &x, 1, NULL);
	mt_node_t *nd = &net->nodes[id];
	int in = nd->c * nd->h * nd->w;

	nd->c = out;
	nd->h = nd->w = 1;
	add_param(net, (size_t)out * in, in, 0, true);
	add_param(net, out, 0, 0.0f, true);
	nd->np = 2;
	return id;
}

static int add(mt_net_t *net, int a, int b)
{
	int in[2] = { a, b };
	const mt_node_t *na = &net->nodes[a], *nb = &net->nodes[b];

	if (na->c != nb->c || na->h != nb->h)
		mt_die("internal: add of mismatched shapes %dx%dx%d and %dx%dx%d",
		       na->c, na->h, na->w, nb->c, nb->h, nb->w);
	return add_node(net, MT_ADD, in, 2, NULL);
}

static int concat(mt_net_t *net, const int *in, int nin)
{
	if (nin == 1)
		return in[0];
	int id = add_node(net, MT_CONCAT, in, nin, NULL);
	int c = 0;

	for (int i = 0; i < nin; i++) {
		if (net->nodes[in[i]].h != net->nodes[id].h)
			mt_die("internal: concat of mismatched spatial sizes");
		c += net->nodes[in[i]].c;
	}
	net->nodes[id].c = c;
	return id;
}

static void loss(mt_net_t *net, int x)
{
	add_node(net, MT_LOSS, &x, 1, NULL);
}

static int conv_relu(mt_net_t *net, int x, int c, int k, int s, int p)
{
	return relu(net, conv(net, x, c, k, s, p));
}

/* conv (no bias) -> bn [-> relu] */
static int cbr(mt_net_t *net, int x, int c, int k, int s, int p, bool act)
{
	int y = bn(net, conv_b(net, x, c, k, s, p, false));

	return act ? relu(net, y) : y;
}

static int classifier(mt_net_t *net, int x, int hidden)
{
	if (hidden) {
		x = relu(net, fc(net, x, hidden));
		x = relu(net, fc(net, x, hidden));
	}
	return fc(net, x, net->classes);
}

/* ---- AlexNet (the one-tower variant of the Torch/Facebook reference models) */
static void build_alexnet(mt_net_t *net)
{
	int x = input(net);

	x = conv_relu(net, x, 64, 11, 4, 2);
	x = pool(net, x, true, 3, 2, 0);
	x = conv_relu(net, x, 192, 5, 1, 2);
	x = pool(net, x, true, 3, 2, 0);
	x = conv_relu(net, x, 384, 3, 1, 1);
	x = conv_relu(net, x, 256, 3, 1, 1);
	x = conv_relu(net, x, 256, 3, 1, 1);
	x = pool(net, x, true, 3, 2, 0);
	loss(net, classifier(net, x, 4096));
}

/* ---- VGG: five groups of 3x3/1/1 convs separated by 2x2/2 max pools.
 * vDNN §IV-C: VGG-116/216/316/416 add 20 convs to each of the five groups
 * per 100 layers, with the group's channel count, to the 16-conv base. */
static void build_vgg(mt_net_t *net, const int groups[5], int extra)
{
	static const int ch[5] = { 64, 128, 256, 512, 512 };
	int x = input(net);

	for (int g = 0; g < 5; g++) {
		for (int i = 0; i < groups[g] + extra; i++)
			x = conv_relu(net, x, ch[g], 3, 1, 1);
		x = pool(net, x, true, 2, 2, 0);
	}
	loss(net, classifier(net, x, 4096));
}

/* ---- ResNet (He et al.), torchvision layout: stride on the 3x3 conv */
static void build_resnet(mt_net_t *net, const int blocks[4], bool bottleneck)
{
	int x = input(net), cin = 64;

	x = cbr(net, x, 64, 7, 2, 3, true);
	x = pool(net, x, true, 3, 2, 1);
	for (int s = 0; s < 4; s++) {
		int planes = 64 << s, out = bottleneck ? 4 * planes : planes;

		for (int b = 0; b < blocks[s]; b++) {
			int stride = (s > 0 && b == 0) ? 2 : 1, y, sc = x;

			if (bottleneck) {
				y = cbr(net, x, planes, 1, 1, 0, true);
				y = cbr(net, y, planes, 3, stride, 1, true);
				y = cbr(net, y, out, 1, 1, 0, false);
			} else {
				y = cbr(net, x, planes, 3, stride, 1, true);
				y = cbr(net, y, planes, 3, 1, 1, false);
			}
			if (stride != 1 || cin != out)
				sc = cbr(net, x, out, 1, stride, 0, false);
			x = relu(net, add(net, y, sc));
			cin = out;
		}
	}
	x = global_avg(net, x);
	loss(net, fc(net, x, net->classes));
}

/* ---- GoogLeNet-style Inception (v1 module table, no auxiliary heads) */
static int inception_module(mt_net_t *net, int x, const int m[6])
{
	int br[4];

	br[0] = conv_relu(net, x, m[0], 1, 1, 0);
	br[1] = conv_relu(net, conv_relu(net, x, m[1], 1, 1, 0), m[2], 3, 1, 1);
	br[2] = conv_relu(net, conv_relu(net, x, m[3], 1, 1, 0), m[4], 5, 1, 2);
	br[3] = conv_relu(net, pool(net, x, true, 3, 1, 1), m[5], 1, 1, 0);
	return concat(net, br, 4);
}

static void build_inception(mt_net_t *net)
{
	static const int mods[9][6] = {
		{ 64, 96, 128, 16, 32, 32 },   { 128, 128, 192, 32, 96, 64 },
		{ 192, 96, 208, 16, 48, 64 },  { 160, 112, 224, 24, 64, 64 },
		{ 128, 128, 256, 24, 64, 64 }, { 112, 144, 288, 32, 64, 64 },
		{ 256, 160, 320, 32, 128, 128 },
		{ 256, 160, 320, 32, 128, 128 }, { 384, 192, 384, 48, 128, 128 },
	};
	int x = input(net);

	x = conv_relu(net, x, 64, 7, 2, 3);
	x = pool(net, x, true, 3, 2, 1);
	x = conv_relu(net, x, 64, 1, 1, 0);
	x = conv_relu(net, x, 192, 3, 1, 1);
	x = pool(net, x, true, 3, 2, 1);
	for (int i = 0; i < 9; i++) {
		x = inception_module(net, x, mods[i]);
		if (i == 1 || i == 6)
			x = pool(net, x, true, 3, 2, 1);
	}
	x = global_avg(net, x);
	loss(net, fc(net, x, net->classes));
}

/* ---- DenseNet-121: every layer of a block reads the concat of the block
 * input and all earlier layers' outputs (materialised per layer). */
static void build_densenet(mt_net_t *net)
{
	static const int blocks[4] = { 6, 12, 24, 16 };
	const int growth = 32;
	int x = input(net);
	int feats[64];

	x = cbr(net, x, 64, 7, 2, 3, true);
	x = pool(net, x, true, 3, 2, 1);
	for (int b = 0; b < 4; b++) {
		int nf = 0;

		feats[nf++] = x;
		for (int l = 0; l < blocks[b]; l++) {
			int y = concat(net, feats, nf);

			y = relu(net, bn(net, y));
			y = conv_b(net, y, 4 * growth, 1, 1, 0, false);
			y = relu(net, bn(net, y));
			y = conv_b(net, y, growth, 3, 1, 1, false);
			feats[nf++] = y;
		}
		x = concat(net, feats, nf);
		if (b < 3) {
			x = relu(net, bn(net, x));
			x = conv_b(net, x, net->nodes[x].c / 2, 1, 1, 0, false);
			x = pool(net, x, false, 2, 2, 0);
		}
	}
	x = relu(net, bn(net, x));
	x = global_avg(net, x);
	loss(net, fc(net, x, net->classes));
}

/* ---- random DAG for fuzzing: always valid shapes; every node reaches the
 * loss (leaves are globally pooled and concatenated before the classifier). */
static void build_random(mt_net_t *net, uint64_t seed)
{
	mt_rng_t r = { mt_mix(seed ^ 0x52414e444f4dull) };
	int avail[256], na = 0;
	int x = input(net);
	int nops = 6 + (int)(mt_rng_next(&r) % 14);

	avail[na++] = conv(net, x, 8 + (int)(mt_rng_next(&r) % 25), 3, 1, 1);
	for (int i = 0; i < nops && na < 250; i++) {
		int pick = (int)(mt_rng_next(&r) % 100);
		int src = avail[na - 1 - (int)(mt_rng_next(&r) % (na < 4 ? na : 4))];
		const mt_node_t *s = &net->nodes[src];
		int y;

		if (pick < 30) {
			int k = (mt_rng_next(&r) & 1) ? 3 : 1;
			int st = (s->h >= 4 && mt_rng_next(&r) % 4 == 0) ? 2 : 1;

			y = conv(net, src, 4 + (int)(mt_rng_next(&r) % 29), k, st, k / 2);
		} else if (pick < 45) {
			y = relu(net, src);
		} else if (pick < 55) {
			if (s->h < 2) {
				y = relu(net, src);
			} else if (mt_rng_next(&r) & 1) {
				y = pool(net, src, true, 2, 2, 0);
			} else {
				y = pool(net, src, mt_rng_next(&r) & 1, 3, 1, 1);
			}
		} else if (pick < 65) {
			y = bn(net, src);
		} else if (pick < 80) {
			int other = -1;

			for (int j = na - 1; j >= 0; j--)
				if (avail[j] != src && net->nodes[avail[j]].c == s->c &&
				    net->nodes[avail[j]].h == s->h) {
					other = avail[j];
					break;
				}
			if (other < 0)
				other = conv(net, src, net->nodes[src].c, 3, 1, 1);
			y = add(net, src, other);
		} else {
			int in[3] = { src }, n = 1;

			for (int j = na - 1; j >= 0 && n < 3; j--)
				if (avail[j] != src && net->nodes[avail[j]].h == s->h &&
				    (mt_rng_next(&r) & 1))
					in[n++] = avail[j];
			if (n == 1)
				in[n++] = conv(net, src, 4 + (int)(mt_rng_next(&r) % 13), 1, 1, 0);
			y = concat(net, in, n);
		}
		avail[na++] = y;
	}
	/* join every leaf */
	int *cons = calloc(net->n, sizeof(int));
	int leaves[256], nl = 0;

	for (int j = 0; j < net->n; j++)
		for (int i = 0; i < net->nodes[j].nin; i++)
			cons[net->nodes[j].in[i]]++;
	int nbefore = net->n;
	for (int j = 1; j < nbefore && nl < 256; j++)
		if (!cons[j])
			leaves[nl++] = global_avg(net, j);
	free(cons);
	x = concat(net, leaves, nl);
	loss(net, fc(net, x, net->classes));
}

/* Decides the in-place ReLU / add aliases and counts consumers. */
static void finish(mt_net_t *net)
{
	for (int j = 0; j < net->n; j++)
		net->nodes[j].nconsumers = 0;
	for (int j = 0; j < net->n; j++)
		for (int i = 0; i < net->nodes[j].nin; i++)
			net->nodes[net->nodes[j].in[i]].nconsumers++;
	for (int j = 0; j < net->n; j++) {
		mt_node_t *nd = &net->nodes[j];

		if (nd->op != MT_RELU && nd->op != MT_ADD)
			continue;
		const mt_node_t *src = &net->nodes[nd->in[0]];
		/* producers whose backward reads their own output keep it */
		bool keeps = src->op == MT_INPUT || src->op == MT_RELU ||
			     src->op == MT_MAXPOOL || src->op == MT_AVGPOOL ||
			     src->op == MT_LOSS;
		if (src->nconsumers == 1 && !keeps)
			nd->buf = src->buf;
	}
}

int mt_net_build(mt_net_t *net, const char *name, int image, int classes,
		 char *err, size_t errlen)
{
	static const int vgg16[5] = { 2, 2, 3, 3, 3 }, vgg19[5] = { 2, 2, 4, 4, 4 };
	static const struct { const char *name; int blocks[4]; bool bottleneck; } resnets[] = {
		{ "resnet", { 2, 2, 2, 2 }, false },
		{ "resnet10", { 1, 1, 1, 1 }, false },
		{ "resnet18", { 2, 2, 2, 2 }, false },
		{ "resnet34", { 3, 4, 6, 3 }, false },
		{ "resnet50", { 3, 4, 6, 3 }, true },
		{ "resnet101", { 3, 4, 23, 3 }, true },
		{ "resnet152", { 3, 8, 36, 3 }, true },
	};

	memset(net, 0, sizeof(*net));
	g_err[0] = 0;
	snprintf(net->name, sizeof(net->name), "%s", name);
	net->image = image;
	net->classes = classes;
	if (!strcmp(name, "alexnet")) {
		build_alexnet(net);
	} else if (!strcmp(name, "vgg16")) {
		build_vgg(net, vgg16, 0);
	} else if (!strcmp(name, "vgg19")) {
		build_vgg(net, vgg19, 0);
	} else if (!strcmp(name, "vgg116") || !strcmp(name, "vgg216") ||
		   !strcmp(name, "vgg316") || !strcmp(name, "vgg416")) {
		build_vgg(net, vgg19, 20 * (name[3] - '0'));
	} else if (!strcmp(name, "inception")) {
		build_inception(net);
	} else if (!strcmp(name, "densenet")) {
		build_densenet(net);
	} else if (!strncmp(name, "random:", 7)) {
		char *end;
		unsigned long long s = strtoull(name + 7, &end, 0);

		if (!name[7] || *end) {
			snprintf(err, errlen, "--net: bad random seed in '%s'; expected random:<integer>", name);
			return -1;
		}
		build_random(net, s);
	} else {
		size_t i;

		for (i = 0; i < sizeof(resnets) / sizeof(resnets[0]); i++)
			if (!strcmp(name, resnets[i].name))
				break;
		if (i == sizeof(resnets) / sizeof(resnets[0])) {
			snprintf(err, errlen, "--net: unknown network '%s'; see --help for the list", name);
			return -1;
		}
		build_resnet(net, resnets[i].blocks, resnets[i].bottleneck);
	}
	if (g_err[0]) {
		snprintf(err, errlen, "--image %d is too small for %s: %s", image, name, g_err);
		return -1;
	}
	finish(net);
	return 0;
}

void mt_net_free(mt_net_t *net)
{
	for (int j = 0; j < net->n; j++)
		free(net->nodes[j].in);
	free(net->nodes);
	free(net->params);
	memset(net, 0, sizeof(*net));
}

void mt_net_print(const mt_net_t *net)
{
	size_t total = 0;

	for (int j = 0; j < net->n; j++) {
		const mt_node_t *nd = &net->nodes[j];
		size_t np = 0;

		for (int p = nd->p0; p < nd->p0 + nd->np; p++)
			np += net->params[p].count;
		total += np;
		printf("%4d %-14s out %4dx%3dx%-3d", j, nd->name, nd->c, nd->h, nd->w);
		if (nd->op == MT_CONV || nd->op == MT_MAXPOOL || nd->op == MT_AVGPOOL)
			printf(" k%d s%d p%d", nd->k, nd->stride, nd->pad);
		printf(" params %zu in", np);
		for (int i = 0; i < nd->nin; i++)
			printf(" %d", nd->in[i]);
		if (nd->buf != j)
			printf(" (in place on %d)", nd->buf);
		printf("\n");
	}
	printf("total params %zu\n", total);
}
