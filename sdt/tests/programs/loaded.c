/* The library tests/programs/loads.c opens and closes: one step of 3x + 1. */

long plugin_step(long x)
{
	return 3 * x + 1;
}
