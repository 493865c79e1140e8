/* tests/unit/policy/test_pytorch.c - the policy on real PyTorch traces.
 *
 * fixtures/NAME.ev were derived with `vmem-trace events` from the VMEM_TRACE
 * files of results/gpu/2026-11-22-run1 (H100, PyTorch 2.11, cuDNN 9.19,
 * torchvision VGG-16 and ResNet-50, batch 32, 4 iterations; that run did
 * not yet hook kernel launches, so the ReLU/pool/optimizer kernels are not
 * in them).  What makes them PyTorch-shaped: the caching allocator's
 * segments (many tensors per allocation, small blocks placed differently
 * each iteration), two preloaded input batches used alternately, backward
 * on the autograd thread, a first iteration that differs (cuDNN's
 * heuristics, lazily created gradients), and calls after training (the
 * checksum) that match no plan.
 *
 * fixtures/h200-vgg16-caching.ev: iterations 0-6 of torchvision VGG-16
 * (batch 32, fp32, caching allocator) under libvmem on an H200 on
 * 2026-11-26 (results/gpu/2026-11-26-policies), kernel launches included.
 * Its reduce_kernel launches carry argument words that fall inside the
 * pool's addresses without naming an allocation, and a scratch pointer
 * that is in the pool in some iterations only: the plan must be made on
 * the third steady repetition and never suspended (before the fix, no plan
 * at all in these seven iterations; on the GPU, a plan of 9 calls).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "policy/policy.h"

static void print_line(void *ctx, const char *line)
{
	(void)ctx;
	printf("%s\n", line);
}

typedef struct {
	const char *file;
	uint32_t period;           /* significant calls per iteration */
	uint64_t steady_seq;       /* seq of the first op of iteration 1 (its first conv) */
	uint64_t made_seq;         /* the call that confirms: iteration 3, the third steady one */
	int lanes;
	bool never_suspended;      /* the fixture ends with training */
} expect_t;

static void replay_expect(const expect_t *x)
{
	policy_config_t c;
	drv_t d;
	fixture_stats_t fs;
	const policy_plan_t *pl;
	policy_stats_t st;
	uint64_t made = 0;

	policy_config_default(&c);
	drv_init(&d, &c);
	if (fixture_replay(&d, x->file, &fs) != 0)
		fail_msg("cannot replay %s", x->file);
	for (int i = 0; i < d.nacts; i++)
		if (d.acts[i].kind == POLICY_ACT_NOTE && d.acts[i].a.note == POLICY_NOTE_MADE && !made)
			made = d.acts[i].seq;
	pl = policy_plan(d.p);
	if (!pl)
		fail_msg("%s: no plan made from %d significant calls", x->file, fs.significant);
	if (getenv("VMEM_TEST_DUMP"))
		policy_dump(d.p, print_line, NULL);
	if (pl->period != x->period)
		fail_msg("%s: period expected %u, got %u", x->file, x->period, pl->period);
	if (pl->steady_seq != x->steady_seq)
		fail_msg("%s: first steady iteration expected at seq %llu, got %llu", x->file,
			 (unsigned long long)x->steady_seq, (unsigned long long)pl->steady_seq);
	if (made != x->made_seq)
		fail_msg("%s: plan expected at seq %llu, made at %llu", x->file,
			 (unsigned long long)x->made_seq, (unsigned long long)made);
	/* the iteration starts with the first conv (after loss.item()'s sync) */
	assert_int_equal(pl->g.ops[0].kind, VMEM_OP_CONV_FWD);
	assert_int_equal(pl->g.ops[0].info.u.conv.c, 3);
	/* backward runs on the autograd thread: its own lane; the boundary is
	 * the first op on it (with launches seen: the kernel that seeds the
	 * loss gradient) */
	assert_int_equal(pl->g.nlanes, x->lanes);
	assert_true(vmem_op_is_backward(pl->g.ops[pl->g.boundary].kind) ||
		    pl->g.ops[pl->g.boundary].kind == VMEM_OP_GEMM ||
		    pl->g.ops[pl->g.boundary].lane != pl->g.ops[0].lane);
	policy_get_stats(d.p, &st);
	assert_int_equal(st.plans_made, 1);
	if (x->never_suspended && st.suspensions)
		fail_msg("%s: plan suspended %llu times, expected never", x->file,
			 (unsigned long long)st.suspensions);
	drv_free(&d);
}

static void test_vgg16_caching_allocator(void **state)
{
	static const expect_t x = { "vgg16-caching.ev", 52, 256, 602, 2 };

	(void)state;
	replay_expect(&x);
}

static void test_vgg16_no_caching(void **state)
{
	static const expect_t x = { "vgg16-nocache.ev", 52, 601, 1827, 2 };

	(void)state;
	replay_expect(&x);
}

static void test_resnet50_caching_allocator(void **state)
{
	static const expect_t x = { "resnet50-caching.ev", 268, 1677, 3936, 2 };

	(void)state;
	replay_expect(&x);
}

static void test_h200_vgg16_scanned_launches(void **state)
{
	static const expect_t x = { "h200-vgg16-caching.ev", 183, 6443, 37364, 2, true };

	(void)state;
	replay_expect(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vgg16_caching_allocator),
		cmocka_unit_test(test_vgg16_no_caching),
		cmocka_unit_test(test_resnet50_caching_allocator),
		cmocka_unit_test(test_h200_vgg16_scanned_launches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
