/* tests/unit/simgpu/test_simgpu_race.c - the race checker's pure core
 * (tests/simgpu/core_race.c): vector clocks and byte-exact shadow memory.
 * Agents here are plain numbers: 0 the host, 1 and 2 two streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core_race.h"

static simgpu_epoch_t ep(uint32_t agent, uint32_t clock, uint64_t seq, const char *op)
{
	simgpu_epoch_t e = { agent, clock, seq, op };

	return e;
}

/* A clock that knows agent a up to c (and itself, `self`, at `sc`). */
static simgpu_vc_t vc_of(uint32_t a, uint32_t c, uint32_t self, uint32_t sc)
{
	simgpu_vc_t v = { 0, 0, NULL };
	uint32_t i;

	for (i = 0; i < c; i++)
		assert_int_equal(simgpu_vc_tick(&v, a), 0);
	for (i = 0; i < sc; i++)
		assert_int_equal(simgpu_vc_tick(&v, self), 0);
	return v;
}

static void expect_race(int rc, const simgpu_race_t *r, simgpu_race_kind_t kind,
			uint64_t base, uint64_t size, uint64_t prior_seq)
{
	if (rc != 1 || r->kind != kind || r->base != base || r->size != size ||
	    r->prior.seq != prior_seq)
		fail_msg("expected race kind %d on [%llu, +%llu) with call %llu; got rc %d, "
			 "kind %d on [%llu, +%llu) with call %llu", kind,
			 (unsigned long long)base, (unsigned long long)size,
			 (unsigned long long)prior_seq, rc, r->kind,
			 (unsigned long long)r->base, (unsigned long long)r->size,
			 (unsigned long long)r->prior.seq);
}

static void test_vector_clocks_tick_join_and_copy(void **state)
{
	simgpu_vc_t a = { 0, 0, NULL }, b = { 0, 0, NULL }, c = { 0, 0, NULL };

	(void)state;
	assert_int_equal(simgpu_vc_tick(&a, 1), 0);
	assert_int_equal(simgpu_vc_tick(&a, 1), 0);
	assert_int_equal(simgpu_vc_tick(&b, 5), 0);
	assert_int_equal(simgpu_vc_get(&a, 1), 2);
	assert_int_equal(simgpu_vc_get(&a, 5), 0);       /* unknown agent: 0 */
	assert_int_equal(simgpu_vc_join(&b, &a), 0);
	assert_int_equal(simgpu_vc_get(&b, 1), 2);
	assert_int_equal(simgpu_vc_get(&b, 5), 1);
	assert_int_equal(simgpu_vc_copy(&c, &b), 0);
	assert_int_equal(simgpu_vc_get(&c, 5), 1);
	assert_int_equal(simgpu_vc_copy(&b, &a), 0);     /* shrinking copy zeroes */
	assert_int_equal(simgpu_vc_get(&b, 5), 0);
	simgpu_vc_free(&a), simgpu_vc_free(&b), simgpu_vc_free(&c);
}

static void test_read_of_an_unordered_write_is_a_race_and_an_ordered_one_not(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t w = vc_of(1, 0, 1, 1), blind = vc_of(1, 0, 2, 1), seen = vc_of(1, 1, 2, 1);
	simgpu_epoch_t cp = ep(1, 1, 10, "copy"), k1 = ep(2, 1, 11, "kernel");
	simgpu_race_t r;

	(void)state;
	assert_int_equal(simgpu_shadow_access(&s, 0, 4096, SIMGPU_ACC_W, &cp, &w, &r), 0);
	expect_race(simgpu_shadow_access(&s, 0, 4096, SIMGPU_ACC_R, &k1, &blind, &r), &r,
		    SIMGPU_RACE_RAW, 0, 4096, 10);
	assert_string_equal(r.prior.op, "copy");
	/* after waiting for the copy (clock knows agent 1 at 1): no race */
	assert_int_equal(simgpu_shadow_access(&s, 0, 4096, SIMGPU_ACC_R, &k1, &seen, &r), 0);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&w), simgpu_vc_free(&blind), simgpu_vc_free(&seen);
}

static void test_one_agents_accesses_never_race_with_each_other(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t v = vc_of(1, 0, 1, 3);
	simgpu_epoch_t a = ep(1, 1, 1, "a"), b = ep(1, 2, 2, "b"), c = ep(1, 3, 3, "c");
	simgpu_race_t r;

	(void)state;
	assert_int_equal(simgpu_shadow_access(&s, 0, 64, SIMGPU_ACC_W, &a, &v, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 0, 64, SIMGPU_ACC_R, &b, &v, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 0, 64, SIMGPU_ACC_RW, &c, &v, &r), 0);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&v);
}

/* Two tensors side by side in one allocation (a caching allocator's
 * segment): streams using one each do not race. */
static void test_neighbouring_tensors_are_not_confused(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t v1 = vc_of(1, 0, 1, 1), v2 = vc_of(2, 0, 2, 1);
	simgpu_epoch_t w1 = ep(1, 1, 1, "w1"), w2 = ep(2, 1, 2, "w2");
	simgpu_race_t r;

	(void)state;
	assert_int_equal(simgpu_shadow_access(&s, 0, 1000, SIMGPU_ACC_W, &w1, &v1, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 1000, 1000, SIMGPU_ACC_W, &w2, &v2, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 1000, 1000, SIMGPU_ACC_R, &w2, &v2, &r), 0);
	/* one byte over the edge is a race, on that byte only */
	expect_race(simgpu_shadow_access(&s, 999, 1001, SIMGPU_ACC_R, &w2, &v2, &r), &r,
		    SIMGPU_RACE_RAW, 999, 1, 1);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&v1), simgpu_vc_free(&v2);
}

static void test_a_write_names_the_latest_unordered_reader(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t v1 = vc_of(1, 0, 1, 2), v2 = vc_of(1, 1, 2, 1), v3 = vc_of(2, 1, 3, 1);
	simgpu_epoch_t set = ep(1, 1, 1, "memset"), cp = ep(1, 2, 2, "copy");
	simgpu_epoch_t k = ep(2, 1, 3, "kernel"), w = ep(3, 1, 4, "fill");
	simgpu_race_t r;

	(void)state;
	assert_int_equal(simgpu_shadow_access(&s, 0, 256, SIMGPU_ACC_W, &set, &v1, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 0, 256, SIMGPU_ACC_R, &cp, &v1, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 0, 128, SIMGPU_ACC_R, &k, &v2, &r), 0);
	/* agent 3 knows agent 2 up to 1, nothing of agent 1: the memset and
	 * the copy are unordered; the copy is named, the latest */
	expect_race(simgpu_shadow_access(&s, 128, 128, SIMGPU_ACC_W, &w, &v3, &r), &r,
		    SIMGPU_RACE_WAR, 128, 128, 2);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&v1), simgpu_vc_free(&v2), simgpu_vc_free(&v3);
}

/* A read dominated by a later one (ordered after it) is dropped: a write
 * ordered after the later read follows the earlier one too. */
static void test_reads_ordered_before_a_later_read_are_dropped(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t v1 = vc_of(1, 0, 1, 1), v2 = vc_of(1, 1, 2, 1), v3 = vc_of(2, 1, 3, 1);
	simgpu_epoch_t r1 = ep(1, 1, 1, "r1"), r2 = ep(2, 1, 2, "r2"), w = ep(3, 1, 3, "w");
	simgpu_race_t r;

	(void)state;
	assert_int_equal(simgpu_shadow_access(&s, 0, 64, SIMGPU_ACC_R, &r1, &v1, &r), 0);
	assert_int_equal(simgpu_shadow_access(&s, 0, 64, SIMGPU_ACC_R, &r2, &v2, &r), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.a[0].nr, 1);
	assert_int_equal(simgpu_shadow_access(&s, 0, 64, SIMGPU_ACC_W, &w, &v3, &r), 0);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&v1), simgpu_vc_free(&v2), simgpu_vc_free(&v3);
}

/* A read over many segments and the gaps between them leaves as few
 * segments as there are different histories. */
static void test_reads_fill_gaps_and_merge_equal_neighbours(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t v = vc_of(1, 0, 1, 2);
	simgpu_epoch_t a = ep(1, 1, 1, "a"), b = ep(1, 2, 2, "b");
	simgpu_race_t r;
	uint64_t i;

	(void)state;
	for (i = 0; i < 8; i++)
		assert_int_equal(simgpu_shadow_access(&s, i * 100, 50, SIMGPU_ACC_R, &a, &v, &r), 0);
	assert_int_equal(s.n, 8);
	assert_int_equal(simgpu_shadow_access(&s, 0, 800, SIMGPU_ACC_R, &b, &v, &r), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.a[0].base, 0);
	assert_int_equal(s.a[0].size, 800);
	assert_int_equal(simgpu_shadow_access(&s, 100, 600, SIMGPU_ACC_W, &b, &v, &r), 0);
	assert_int_equal(s.n, 3);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&v);
}

static void test_host_check_reports_queued_access_and_clear_forgets_it(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_vc_t v1 = vc_of(1, 0, 1, 1), host = vc_of(1, 0, 0, 0), synced = vc_of(1, 1, 0, 0);
	simgpu_epoch_t cp = ep(1, 1, 7, "cudaMemcpyAsync");
	simgpu_race_t r;

	(void)state;
	assert_int_equal(simgpu_shadow_access(&s, 4096, 4096, SIMGPU_ACC_R, &cp, &v1, &r), 0);
	assert_true(simgpu_shadow_check(&s, 0, 16384, &host, 0, &r));
	assert_int_equal(r.kind, SIMGPU_RACE_WAR);
	assert_int_equal(r.base, 4096);
	assert_int_equal(r.size, 4096);
	assert_int_equal(r.prior.seq, 7);
	assert_false(simgpu_shadow_check(&s, 0, 16384, &synced, 0, &r));
	assert_false(simgpu_shadow_check(&s, 0, 4096, &host, 0, &r));   /* other bytes */
	simgpu_shadow_clear(&s, 0, 6000);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.a[0].base, 6000);
	simgpu_shadow_free(&s);
	simgpu_vc_free(&v1), simgpu_vc_free(&host), simgpu_vc_free(&synced);
}

/* More concurrent readers than remembered: the oldest is forgotten, the
 * newest are still judged (never a false report). */
static void test_concurrent_readers_beyond_the_limit_keep_the_newest(void **state)
{
	simgpu_shadow_t s = { NULL, 0, 0 };
	simgpu_race_t r;
	simgpu_vc_t none = { 0, 0, NULL };
	uint32_t a;

	(void)state;
	for (a = 1; a <= SIMGPU_SHADOW_READS + 2; a++) {
		simgpu_vc_t v = vc_of(a, 0, a, 1);
		simgpu_epoch_t e = ep(a, 1, a, "read");

		assert_int_equal(simgpu_shadow_access(&s, 0, 8, SIMGPU_ACC_R, &e, &v, &r), 0);
		simgpu_vc_free(&v);
	}
	assert_int_equal(s.a[0].nr, SIMGPU_SHADOW_READS);
	simgpu_epoch_t w = ep(99, 1, 100, "write");
	expect_race(simgpu_shadow_access(&s, 0, 8, SIMGPU_ACC_W, &w, &none, &r), &r,
		    SIMGPU_RACE_WAR, 0, 8, SIMGPU_SHADOW_READS + 2);
	simgpu_shadow_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vector_clocks_tick_join_and_copy),
		cmocka_unit_test(test_read_of_an_unordered_write_is_a_race_and_an_ordered_one_not),
		cmocka_unit_test(test_one_agents_accesses_never_race_with_each_other),
		cmocka_unit_test(test_neighbouring_tensors_are_not_confused),
		cmocka_unit_test(test_a_write_names_the_latest_unordered_reader),
		cmocka_unit_test(test_reads_ordered_before_a_later_read_are_dropped),
		cmocka_unit_test(test_reads_fill_gaps_and_merge_equal_neighbours),
		cmocka_unit_test(test_host_check_reports_queued_access_and_clear_forgets_it),
		cmocka_unit_test(test_concurrent_readers_beyond_the_limit_keep_the_newest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
