/* tests/unit/simgpu/test_simgpu_core.c - size/boolean parsing, the device
 * model table, the roofline op time and the virtual-clock rules. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core.h"

static uint64_t size_of(const char *s)
{
	uint64_t v = 0xdeadbeef;

	assert_int_equal(simgpu_parse_size(s, &v), 0);
	return v;
}

static void test_parse_size_accepts_bytes_and_suffixes(void **state)
{
	(void)state;
	assert_int_equal(size_of("123"), 123);
	assert_int_equal(size_of("64k"), 64 << 10);
	assert_int_equal(size_of("512M"), 512ull << 20);
	assert_int_equal(size_of("2G"), 2ull << 30);
	assert_int_equal(size_of("2g"), 2ull << 30);
	assert_int_equal(size_of("1T"), 1ull << 40);
	assert_int_equal(size_of("0"), 0);
}

static void test_parse_size_rejects_garbage_and_overflow(void **state)
{
	static const char *const bad[] = {
		"", "abc", "12X", "1GB", "-1", " 1", "1 ", "G", "1.5G",
		"99999999999999999999", "17179869184G", "18446744073709551616",
	};
	uint64_t v = 77;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (simgpu_parse_size(bad[i], &v) != -1)
			fail_msg("expected \"%s\" to be rejected, got %llu",
				 bad[i], (unsigned long long)v);
	}
	assert_int_equal(v, 77);        /* untouched on failure */
	assert_int_equal(simgpu_parse_size(NULL, &v), -1);
}

static void test_parse_bool_words(void **state)
{
	bool b = false;

	(void)state;
	assert_int_equal(simgpu_parse_bool("1", &b), 0);
	assert_true(b);
	assert_int_equal(simgpu_parse_bool("Yes", &b), 0);
	assert_true(b);
	assert_int_equal(simgpu_parse_bool("0", &b), 0);
	assert_false(b);
	assert_int_equal(simgpu_parse_bool("", &b), 0);
	assert_false(b);
	assert_int_equal(simgpu_parse_bool("2", &b), -1);
	assert_int_equal(simgpu_parse_bool("maybe", &b), -1);
}

static bool per_call;

static int simgpu_parse_vmm_cost_(const char *s, double c[SIMGPU_VMM_N])
{
	return simgpu_parse_vmm_cost(s, c, &per_call);
}

static void test_parse_vmm_cost(void **state)
{
	static const char *const bad[] = {
		"1,2,3,4", "1,2,3,4,5,6", "1,2,,4,5", "-1,2,3,4,5", "1,2,3,4,5x",
		" 1,2,3,4,5", "nan,1,1,1,1", "fast", "1e7,1,1,1,1", "/call", "h100/Call/call",
	};
	double c[SIMGPU_VMM_N];
	size_t i;

	(void)state;
	assert_int_equal(simgpu_parse_vmm_cost_("", c), 0);
	/* the default is the H100's measured remap: map + access ~41 us */
	assert_true(c[SIMGPU_VMM_MAP] + c[SIMGPU_VMM_ACCESS] > 40e-6 &&
		    c[SIMGPU_VMM_MAP] + c[SIMGPU_VMM_ACCESS] < 42e-6);
	assert_true(c[SIMGPU_VMM_UNMAP] > 23e-6 && c[SIMGPU_VMM_UNMAP] < 25e-6);
	assert_int_equal(simgpu_parse_vmm_cost_("H100", c), 0);
	assert_true(c[SIMGPU_VMM_CREATE] > 16e-6);
	assert_int_equal(simgpu_parse_vmm_cost_("off", c), 0);
	for (i = 0; i < SIMGPU_VMM_N; i++)
		assert_true(c[i] == 0.0);
	assert_int_equal(simgpu_parse_vmm_cost_("1,2.5,3,0,5", c), 0);
	if (fabs(c[SIMGPU_VMM_ACCESS] - 2.5e-6) > 1e-12 || c[SIMGPU_VMM_CREATE] != 0.0 ||
	    fabs(c[SIMGPU_VMM_RELEASE] - 5e-6) > 1e-12)
		fail_msg("expected 1,2.5,3,0,5 us, got %g,%g,%g,%g,%g s", c[0], c[1],
			 c[2], c[3], c[4]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (simgpu_parse_vmm_cost_(bad[i], c) != -1)
			fail_msg("expected \"%s\" to be rejected", bad[i]);
	assert_int_equal(simgpu_parse_vmm_cost_(NULL, c), -1);
	assert_int_equal(simgpu_parse_vmm_cost_("h100/call", c), 0);
	assert_true(per_call && c[SIMGPU_VMM_ACCESS] > 36e-6);
	assert_int_equal(simgpu_parse_vmm_cost_("1,2,3,4,5/CALL", c), 0);
	assert_true(per_call && fabs(c[SIMGPU_VMM_UNMAP] - 3e-6) < 1e-12);
	assert_int_equal(simgpu_parse_vmm_cost_("h100", c), 0);
	assert_false(per_call);
}

static void test_model_table_has_published_figures(void **state)
{
	const simgpu_model_t *t = simgpu_model_lookup("titanx");
	const simgpu_model_t *v = simgpu_model_lookup("v100");
	const simgpu_model_t *h = simgpu_model_lookup("H100");

	(void)state;
	assert_non_null(t);
	assert_non_null(v);
	assert_non_null(h);
	assert_int_equal(t->mem_bytes, 12ull << 30);
	assert_true(t->flops == 7.0e12 && t->mem_bw == 336.0e9 &&
		    t->link_bw == 16.0e9);
	assert_int_equal(v->mem_bytes, 16ull << 30);
	assert_true(v->flops == 15.7e12 && v->mem_bw == 900.0e9 &&
		    v->link_bw == 16.0e9);
	assert_int_equal(h->mem_bytes, 80ull << 30);
	assert_true(h->flops == 67.0e12 && h->mem_bw == 3.35e12 &&
		    h->link_bw == 55.0e9);
	assert_int_equal(t->copy_engines, 2);
	assert_int_equal(v->copy_engines, 2);
	assert_int_equal(h->copy_engines, 2);
	assert_int_equal(t->cc_major * 10 + t->cc_minor, 52);
	assert_int_equal(v->cc_major * 10 + v->cc_minor, 70);
	assert_int_equal(h->cc_major * 10 + h->cc_minor, 90);
	assert_int_equal(simgpu_model_sm_count(h), 132);
	assert_null(simgpu_model_lookup("a100"));
	assert_null(simgpu_model_lookup(NULL));
}

static void test_op_seconds_is_launch_plus_roofline(void **state)
{
	const simgpu_model_t *t = simgpu_model_lookup("titanx");

	(void)state;
	/* compute-bound: 7e9 FLOPs = 1 ms */
	assert_float_equal(simgpu_model_op_seconds(t, 7.0e9, 1.0),
			   t->launch_s + 1e-3, 1e-12);
	/* memory-bound: 336 MB = 1 ms */
	assert_float_equal(simgpu_model_op_seconds(t, 1.0, 336.0e6),
			   t->launch_s + 1e-3, 1e-12);
	assert_float_equal(simgpu_model_copy_seconds(t, 16.0e6),
			   t->launch_s + 1e-3, 1e-12);
}

static void test_clock_work_starts_after_stream_engine_and_host(void **state)
{
	simgpu_clock_t c;
	double s1 = 0.0, s2 = 0.0;

	(void)state;
	simgpu_clock_init(&c, 2);
	assert_float_equal(simgpu_clock_submit(&c, &s1, 0.0,
					       SIMGPU_ENGINE_COMPUTE, 2.0),
			   2.0, 0.0);
	/* same engine, other stream: FIFO behind the first */
	assert_float_equal(simgpu_clock_submit(&c, &s2, 0.0,
					       SIMGPU_ENGINE_COMPUTE, 1.0),
			   3.0, 0.0);
	/* host has waited to 10: new work starts then */
	simgpu_clock_wait(&c, 10.0);
	assert_float_equal(simgpu_clock_submit(&c, &s1, 0.0,
					       SIMGPU_ENGINE_H2D, 1.0),
			   11.0, 0.0);
	/* a floor (the legacy stream's clock) delays it further */
	assert_float_equal(simgpu_clock_submit(&c, &s2, 20.0,
					       SIMGPU_ENGINE_D2H, 1.0),
			   21.0, 0.0);
	assert_float_equal(s1, 11.0, 0.0);
	assert_float_equal(s2, 21.0, 0.0);
}

static void test_clock_two_copy_engines_overlap_directions(void **state)
{
	simgpu_clock_t c;
	double s1 = 0.0, s2 = 0.0;

	(void)state;
	simgpu_clock_init(&c, 2);
	simgpu_clock_submit(&c, &s1, 0.0, SIMGPU_ENGINE_H2D, 4.0);
	assert_float_equal(simgpu_clock_submit(&c, &s2, 0.0,
					       SIMGPU_ENGINE_D2H, 4.0),
			   4.0, 0.0);
	assert_float_equal(simgpu_clock_end(&c), 4.0, 0.0);
}

static void test_clock_one_copy_engine_serialises_directions(void **state)
{
	simgpu_clock_t c;
	double s1 = 0.0, s2 = 0.0;

	(void)state;
	simgpu_clock_init(&c, 1);
	simgpu_clock_submit(&c, &s1, 0.0, SIMGPU_ENGINE_H2D, 4.0);
	assert_float_equal(simgpu_clock_submit(&c, &s2, 0.0,
					       SIMGPU_ENGINE_D2H, 4.0),
			   8.0, 0.0);
	/* D2D runs on the compute engine, beside the copies */
	assert_int_equal(simgpu_clock_engine(&c, SIMGPU_ENGINE_D2D),
			 SIMGPU_CLK_COMPUTE);
}

static void test_clock_host_moves_only_when_waiting(void **state)
{
	simgpu_clock_t c;
	double s = 0.0;

	(void)state;
	simgpu_clock_init(&c, 2);
	simgpu_clock_submit(&c, &s, 0.0, SIMGPU_ENGINE_COMPUTE, 5.0);
	assert_float_equal(c.host, 0.0, 0.0);
	simgpu_clock_wait(&c, 3.0);
	assert_float_equal(c.host, 3.0, 0.0);
	simgpu_clock_wait(&c, 1.0);     /* never backwards */
	assert_float_equal(c.host, 3.0, 0.0);
	simgpu_clock_wait(&c, simgpu_clock_end(&c));
	assert_float_equal(c.host, 5.0, 0.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size_accepts_bytes_and_suffixes),
		cmocka_unit_test(test_parse_size_rejects_garbage_and_overflow),
		cmocka_unit_test(test_parse_bool_words),
		cmocka_unit_test(test_parse_vmm_cost),
		cmocka_unit_test(test_model_table_has_published_figures),
		cmocka_unit_test(test_op_seconds_is_launch_plus_roofline),
		cmocka_unit_test(test_clock_work_starts_after_stream_engine_and_host),
		cmocka_unit_test(test_clock_two_copy_engines_overlap_directions),
		cmocka_unit_test(test_clock_one_copy_engine_serialises_directions),
		cmocka_unit_test(test_clock_host_moves_only_when_waiting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
