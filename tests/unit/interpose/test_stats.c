/* tests/unit/interpose/test_stats.c - counters, gauges with peak, and the
 * exit table printed through the output callback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "interpose/stats.h"
#include "interpose/trace.h"

void trace_header_fields(char *buf, size_t len) { (void)len; buf[0] = '\0'; }
void trace_end_fields(char *buf, size_t len) { (void)len; buf[0] = '\0'; }

static char out[8192];

static void collect(const char *line, void *ctx)
{
	(void)ctx;
	strncat(out, line, sizeof(out) - strlen(out) - 2);
	strcat(out, "\n");
}

static void test_gauge_keeps_current_peak_and_total(void **state)
{
	(void)state;
	stats_reset();
	stats_gauge_add(STATS_ALLOCATED, 100);
	stats_gauge_add(STATS_ALLOCATED, 50);
	stats_gauge_add(STATS_ALLOCATED, -120);
	stats_gauge_add(STATS_ALLOCATED, 10);
	assert_int_equal(stats_gauge_current(STATS_ALLOCATED), 40);
	assert_int_equal(stats_gauge_peak(STATS_ALLOCATED), 150);
	stats_gauge_set(STATS_RESIDENT, 7);
	stats_gauge_set(STATS_RESIDENT, 3);
	assert_int_equal(stats_gauge_current(STATS_RESIDENT), 3);
	assert_int_equal(stats_gauge_peak(STATS_RESIDENT), 7);
}

static void test_table_lists_calls_bytes_and_counters(void **state)
{
	(void)state;
	stats_reset();
	out[0] = '\0';
	stats_call(VMEM_OP_LAUNCH, 300, 1000);
	stats_call(VMEM_OP_LAUNCH, 100, 1000);
	stats_call(STATS_CALL_MALLOC, 50, 0);
	stats_gauge_add(STATS_ALLOCATED, 4096);
	stats_add(STATS_MISSES, 3);
	stats_print(collect, NULL);
	assert_non_null(strstr(out, "vmem: call kind"));
	if (!strstr(out, "vmem: launch                      2            0.4          200            2.0"))
		fail_msg("expected the launch row (2 calls, 0.4 us in vmem, 200 ns per call, 2.0 us in CUDA), got:\n%s", out);
	assert_non_null(strstr(out, "vmem: malloc                      1"));
	assert_non_null(strstr(out, "vmem: allocated                    4096             4096             4096"));
	{
		char want[128];

		snprintf(want, sizeof(want), "vmem: %-32s %16d\n", "misses (fault-ins)", 3);
		if (!strstr(out, want))
			fail_msg("expected the line \"%s\" in:\n%s", want, out);
	}
	assert_null(strstr(out, "conv_fwd"));
	assert_null(strstr(out, "evictions"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gauge_keeps_current_peak_and_total),
		cmocka_unit_test(test_table_lists_calls_bytes_and_counters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
