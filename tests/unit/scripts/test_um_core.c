/* tests/unit/scripts/test_um_core.c - the unified-memory baseline's core
 * (scripts/um/um_core.c) against a fake device: the balloon's size, the
 * cap on managed memory (never more than the card had free), what is
 * asked of CUDA and what is not, and the configuration it reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "um_core.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* A fake device: hands out addresses from a counter, remembers the largest
 * managed request it ever saw and the total managed bytes it handed out. */
typedef struct {
	uint64_t free_b, total_b;
	int meminfo_rc, device_rc, managed_rc;
	uint64_t next;
	uint64_t device_bytes;          /* plain cudaMalloc: the balloon */
	int device_calls, managed_calls, free_calls, last_error_sets;
	uint64_t managed_live, managed_live_max, largest_managed_request;
	char messages[8][512];
	int nmessages;
} fake_t;

static int f_meminfo(void *ctx, size_t *f, size_t *t)
{
	fake_t *d = ctx;

	*f = d->free_b;
	*t = d->total_b;
	return d->meminfo_rc;
}

static int f_device(void *ctx, void **p, size_t n)
{
	fake_t *d = ctx;

	d->device_calls++;
	if (d->device_rc)
		return d->device_rc;
	d->device_bytes += n;
	*p = (void *)(uintptr_t)(d->next += 1ull << 32);
	return 0;
}

static int f_managed(void *ctx, void **p, size_t n)
{
	fake_t *d = ctx;

	d->managed_calls++;
	if (n > d->largest_managed_request)
		d->largest_managed_request = n;
	if (d->managed_rc)
		return d->managed_rc;
	d->managed_live += n;
	if (d->managed_live > d->managed_live_max)
		d->managed_live_max = d->managed_live;
	*p = (void *)(uintptr_t)(d->next += 1ull << 32);
	return 0;
}

static int f_free(void *ctx, void *p)
{
	(void)p;
	((fake_t *)ctx)->free_calls++;
	return 0;
}

static void f_last_error(void *ctx)
{
	((fake_t *)ctx)->last_error_sets++;
}

static void f_message(void *ctx, const char *line)
{
	fake_t *d = ctx;

	if (d->nmessages < 8)
		snprintf(d->messages[d->nmessages++], sizeof(d->messages[0]), "%s", line);
}

static um_state_t st;
static fake_t dev;
static um_ops_t ops;

static void setup_dev(uint64_t free_b, uint64_t total_b, uint64_t budget)
{
	um_config_t cfg = { .budget = budget, .stats = true };

	memset(&dev, 0, sizeof(dev));
	dev.free_b = free_b;
	dev.total_b = total_b;
	ops = (um_ops_t){ f_meminfo, f_device, f_managed, f_free, f_last_error, f_message, &dev };
	um_init(&st, &cfg, &ops);
}

static void test_nothing_touches_cuda_before_the_first_allocation(void **state)
{
	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 3 * GiB);
	assert_int_equal(dev.device_calls + dev.managed_calls, 0);
	assert_false(st.started);
}

static void test_balloon_leaves_exactly_the_budget_free(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 3 * GiB);
	assert_int_equal(um_alloc(&st, &p, 100 * MiB, &cs), UM_OK);
	assert_int_equal(cs, UM_CUDA_SUCCESS);
	assert_non_null(p);
	/* expected: balloon = free - budget = 67 GiB, one plain cudaMalloc */
	assert_int_equal(dev.device_calls, 1);
	assert_int_equal(dev.device_bytes, 67 * GiB);
	assert_int_equal(st.balloon, 67 * GiB);
	assert_int_equal(dev.managed_calls, 1);
	assert_int_equal(st.managed, 100 * MiB);
	/* a second allocation takes no second balloon */
	assert_int_equal(um_alloc(&st, &p, 100 * MiB, &cs), UM_OK);
	assert_int_equal(dev.device_calls, 1);
	assert_int_equal(st.managed_peak, 200 * MiB);
}

static void test_allocations_beyond_the_budget_are_managed_not_refused(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 1 * GiB);
	/* 4 GiB of managed memory on a 1 GiB budget: oversubscription is the
	 * point of the baseline; the driver pages it. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(um_alloc(&st, &p, 1 * GiB, &cs), UM_OK);
	assert_int_equal(st.managed, 4 * GiB);
	assert_int_equal(dev.managed_calls, 4);
	assert_int_equal(st.refused, 0);
}

static void test_managed_memory_never_passes_the_free_memory_at_start(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(10 * GiB, 80 * GiB, 2 * GiB);
	assert_int_equal(um_alloc(&st, &p, 6 * GiB, &cs), UM_OK);
	/* 6 + 5 GiB > 10 GiB free at start: refused without asking CUDA */
	assert_int_equal(um_alloc(&st, &p, 5 * GiB, &cs), UM_REFUSED);
	assert_null(p);
	assert_int_equal(cs, UM_CUDA_ERROR_MEMORY_ALLOCATION);
	assert_int_equal(dev.managed_calls, 1);
	assert_int_equal(dev.largest_managed_request, 6 * GiB);
	assert_true(dev.managed_live_max <= 10 * GiB);
	assert_int_equal(dev.last_error_sets, 1);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.largest_refused, 5 * GiB);
	/* the message says what, the values and what to do */
	assert_true(dev.nmessages >= 2);
	assert_non_null(strstr(dev.messages[dev.nmessages - 1], "refused a cudaMalloc of 5120.0 MiB"));
	assert_non_null(strstr(dev.messages[dev.nmessages - 1], "10240.0 MiB the device had free"));
	assert_non_null(strstr(dev.messages[dev.nmessages - 1], "smaller batch"));
	/* exactly up to the cap still fits */
	assert_int_equal(um_alloc(&st, &p, 4 * GiB, &cs), UM_OK);
	assert_int_equal(st.managed, 10 * GiB);
}

static void test_cap_is_the_total_when_free_reports_more(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(90 * GiB, 80 * GiB, 0);
	assert_int_equal(um_alloc(&st, &p, 81 * GiB, &cs), UM_REFUSED);
	assert_int_equal(dev.managed_calls, 0);
	assert_int_equal(st.limit, 80 * GiB);
}

static void test_freeing_gives_the_room_back(void **state)
{
	void *a, *b, *c;
	int cs;

	(void)state;
	setup_dev(10 * GiB, 80 * GiB, 1 * GiB);
	assert_int_equal(um_alloc(&st, &a, 6 * GiB, &cs), UM_OK);
	assert_int_equal(um_alloc(&st, &b, 6 * GiB, &cs), UM_REFUSED);
	assert_true(um_forget(&st, a));
	assert_int_equal(st.managed, 0);
	assert_int_equal(um_alloc(&st, &c, 6 * GiB, &cs), UM_OK);
	/* a pointer that is not ours is not forgotten */
	assert_false(um_forget(&st, (void *)(uintptr_t)0x1234));
	assert_false(um_forget(&st, a));
	assert_int_equal(st.managed, 6 * GiB);
}

static void test_many_live_allocations_are_tracked_exactly(void **state)
{
	static void *ptrs[20000];
	int cs;

	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 1 * GiB);
	for (int i = 0; i < 20000; i++)
		assert_int_equal(um_alloc(&st, &ptrs[i], 1000 + (size_t)i, &cs), UM_OK);
	/* free every other one, then the rest in reverse: the sizes come back */
	for (int i = 0; i < 20000; i += 2)
		assert_true(um_forget(&st, ptrs[i]));
	for (int i = 19999; i >= 1; i -= 2)
		assert_true(um_forget(&st, ptrs[i]));
	assert_int_equal(st.managed, 0);
	assert_int_equal(st.live_count, 0);
}

static void test_budget_above_free_memory_takes_no_balloon(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(5 * GiB, 80 * GiB, 8 * GiB);
	assert_int_equal(um_alloc(&st, &p, 1 * GiB, &cs), UM_OK);
	assert_int_equal(dev.device_calls, 0);
	assert_int_equal(st.balloon, 0);
	assert_non_null(strstr(dev.messages[0], "not below the free device memory"));
}

static void test_failed_balloon_refuses_everything(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 3 * GiB);
	dev.device_rc = UM_CUDA_ERROR_MEMORY_ALLOCATION;
	assert_int_equal(um_alloc(&st, &p, 1 * MiB, &cs), UM_NOT_STARTED);
	assert_int_equal(um_alloc(&st, &p, 1 * MiB, &cs), UM_NOT_STARTED);
	/* without the balloon the budget would not hold: nothing managed */
	assert_int_equal(dev.managed_calls, 0);
	assert_int_equal(cs, UM_CUDA_ERROR_MEMORY_ALLOCATION);
	assert_non_null(strstr(dev.messages[0], "budget cannot be enforced"));
}

static void test_failed_meminfo_refuses_everything(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 3 * GiB);
	dev.meminfo_rc = 3;
	assert_int_equal(um_alloc(&st, &p, 1 * MiB, &cs), UM_NOT_STARTED);
	assert_int_equal(dev.managed_calls + dev.device_calls, 0);
}

static void test_cuda_error_of_managed_allocation_is_passed_on(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(70 * GiB, 80 * GiB, 3 * GiB);
	dev.managed_rc = 999;
	assert_int_equal(um_alloc(&st, &p, 1 * MiB, &cs), UM_CUDA_ERROR);
	assert_int_equal(cs, 999);
	assert_int_equal(st.managed, 0);
	assert_int_equal(st.cuda_errors, 1);
}

static void test_refusal_messages_are_capped(void **state)
{
	void *p;
	int cs;

	(void)state;
	setup_dev(1 * GiB, 80 * GiB, 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(um_alloc(&st, &p, 2 * GiB, &cs), UM_REFUSED);
	/* the start-up line, then 5 refusals, the last saying it goes quiet */
	assert_int_equal(dev.nmessages, 6);
	assert_non_null(strstr(dev.messages[5], "further refusals are not printed"));
	assert_int_equal(st.refused, 20);
}

static const char *const *env_pairs;

static const char *fake_getenv(const char *name, void *ctx)
{
	(void)ctx;
	for (const char *const *e = env_pairs; *e; e += 2)
		if (!strcmp(e[0], name))
			return e[1];
	return NULL;
}

static void test_config_reads_budget_sizes(void **state)
{
	static const char *const ok[] = { "VMEM_UM_BUDGET", "1.5G", "VMEM_UM_STATS", "0", NULL };
	static const char *const none[] = { NULL };
	um_config_t c;
	char err[256];

	(void)state;
	env_pairs = ok;
	assert_int_equal(um_config_read(&c, fake_getenv, NULL, err, sizeof(err)), 0);
	assert_int_equal(c.budget, 3 * GiB / 2);
	assert_false(c.stats);
	env_pairs = none;
	assert_int_equal(um_config_read(&c, fake_getenv, NULL, err, sizeof(err)), 0);
	assert_int_equal(c.budget, 0);
	assert_true(c.stats);
}

static void test_config_rejects_bad_values_saying_what_was_seen(void **state)
{
	static const char *const bad[] = { "VMEM_UM_BUDGET", "3 gigs", NULL };
	static const char *const zero[] = { "VMEM_UM_BUDGET", "0", NULL };
	static const char *const stats[] = { "VMEM_UM_STATS", "yes", NULL };
	um_config_t c;
	char err[256];

	(void)state;
	env_pairs = bad;
	assert_int_equal(um_config_read(&c, fake_getenv, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "VMEM_UM_BUDGET=3 gigs is not a size"));
	assert_non_null(strstr(err, "e.g. 3G"));
	env_pairs = zero;
	assert_int_equal(um_config_read(&c, fake_getenv, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is zero"));
	env_pairs = stats;
	assert_int_equal(um_config_read(&c, fake_getenv, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "VMEM_UM_STATS=yes"));
}

static void test_parse_size_suffixes_and_overflow(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(um_parse_size("123", &v), 0);
	assert_int_equal(v, 123);
	assert_int_equal(um_parse_size("64K", &v), 0);
	assert_int_equal(v, 64 * 1024);
	assert_int_equal(um_parse_size("8GiB", &v), 0);
	assert_int_equal(v, 8 * GiB);
	assert_int_equal(um_parse_size(" 2M ", &v), 0);
	assert_int_equal(v, 2 * MiB);
	assert_int_equal(um_parse_size("-1", &v), -1);
	assert_int_equal(um_parse_size("1X", &v), -1);
	assert_int_equal(um_parse_size("", &v), -1);
	assert_int_equal(um_parse_size("99999999999T", &v), -2);
}

static void test_stats_json_names_every_figure(void **state)
{
	void *p;
	int cs;
	char buf[1024];

	(void)state;
	setup_dev(10 * GiB, 80 * GiB, 2 * GiB);
	um_alloc(&st, &p, 3 * GiB, &cs);
	um_alloc(&st, &p, 9 * GiB, &cs);
	um_stats_json(&st, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"budget\":2147483648,"));
	assert_non_null(strstr(buf, "\"balloon\":8589934592,"));
	assert_non_null(strstr(buf, "\"managed_peak\":3221225472,"));
	assert_non_null(strstr(buf, "\"refused\":1,"));
	assert_non_null(strstr(buf, "\"failed\":false}"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_touches_cuda_before_the_first_allocation),
		cmocka_unit_test(test_balloon_leaves_exactly_the_budget_free),
		cmocka_unit_test(test_allocations_beyond_the_budget_are_managed_not_refused),
		cmocka_unit_test(test_managed_memory_never_passes_the_free_memory_at_start),
		cmocka_unit_test(test_cap_is_the_total_when_free_reports_more),
		cmocka_unit_test(test_freeing_gives_the_room_back),
		cmocka_unit_test(test_many_live_allocations_are_tracked_exactly),
		cmocka_unit_test(test_budget_above_free_memory_takes_no_balloon),
		cmocka_unit_test(test_failed_balloon_refuses_everything),
		cmocka_unit_test(test_failed_meminfo_refuses_everything),
		cmocka_unit_test(test_cuda_error_of_managed_allocation_is_passed_on),
		cmocka_unit_test(test_refusal_messages_are_capped),
		cmocka_unit_test(test_config_reads_budget_sizes),
		cmocka_unit_test(test_config_rejects_bad_values_saying_what_was_seen),
		cmocka_unit_test(test_parse_size_suffixes_and_overflow),
		cmocka_unit_test(test_stats_json_names_every_figure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
