/* tests/simgpu/core_clock.c - the virtual-clock rules, pure arithmetic.
 *
 * The simulator executes every op at once on the calling thread (a valid
 * serialisation of the stream order) and accounts its duration on virtual
 * clocks: one per stream, one "busy until" per engine, one for the host.
 * An op starts at max(stream, engine, host, floor) and ends after its
 * duration; the host clock only moves when the host synchronises.
 */
#include "core.h"

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

void simgpu_clock_init(simgpu_clock_t *c, int copy_engines)
{
	int i;

	c->host = 0.0;
	for (i = 0; i < SIMGPU_CLK_N; i++)
		c->engine[i] = 0.0;
	c->copy_engines = copy_engines < 2 ? 1 : 2;
}

int simgpu_clock_engine(const simgpu_clock_t *c, simgpu_engine_t e)
{
	switch (e) {
	case SIMGPU_ENGINE_H2D:
		return SIMGPU_CLK_H2D;
	case SIMGPU_ENGINE_D2H:
		/* one copy engine serves both directions */
		return c->copy_engines < 2 ? SIMGPU_CLK_H2D : SIMGPU_CLK_D2H;
	case SIMGPU_ENGINE_COMPUTE:
	case SIMGPU_ENGINE_D2D:
	default:
		/* device-to-device copies are bound by device memory, which
		 * the compute engine's kernels also use */
		return SIMGPU_CLK_COMPUTE;
	}
}

double simgpu_clock_submit(simgpu_clock_t *c, double *stream_t, double floor,
			   simgpu_engine_t e, double dur)
{
	int i = simgpu_clock_engine(c, e);
	double start = dmax(dmax(*stream_t, c->engine[i]), dmax(c->host, floor));
	double end = start + (dur > 0.0 ? dur : 0.0);

	*stream_t = end;
	c->engine[i] = end;
	return end;
}

void simgpu_clock_wait(simgpu_clock_t *c, double t)
{
	c->host = dmax(c->host, t);
}

double simgpu_clock_end(const simgpu_clock_t *c)
{
	double t = c->host;
	int i;

	for (i = 0; i < SIMGPU_CLK_N; i++)
		t = dmax(t, c->engine[i]);
	return t;
}
